"""Child processes that compile kernels, for tests that compile offline (as a pack build does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compiler_env() -> dict[str, str]:
    """This process's environment without ``TRITON_INTERPRET`` (conftest sets it for CPU runs, and
    the interpreter patches Triton's language process-wide, so compiling needs a child without it)
    and with the repository importable."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def precompile(arch: str, jobs: list[dict], out: str | Path) -> list[dict]:
    """The pack builder's offline compiler (``tessera.tuning.precompile``) run in a child on
    ``jobs`` for ``arch``: its result row per job."""
    done = subprocess.run([sys.executable, "-m", "tessera.tuning.precompile"], text=True, env=compiler_env(),
                          input=json.dumps({"arch": arch, "out": str(out), "jobs": jobs}),
                          capture_output=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.strip().splitlines()[-len(jobs):]]


_PTX_CHILD = r"""
import importlib
import json
import sys
import tempfile
from pathlib import Path

import triton

from tessera._core.launch import building_for, capture
from tessera.tuning import precompile

kept = []
compile_ = triton.compile


def keep(*args, **kwargs):
    compiled = compile_(*args, **kwargs)
    kept.append(compiled.asm["ptx"])
    return compiled


triton.compile = keep  # the pack builder's own compile call, its PTX kept
out = {}
with tempfile.TemporaryDirectory() as tmp:
    for name, (module, op, config_class, fields, dtype, index) in json.loads(sys.argv[1]).items():
        family = importlib.import_module(module)
        with capture() as calls, building_for("cuda", "sm_90"):
            family.representative_launch(op, getattr(family, config_class)(**fields), dtype, 132)
        kept.clear()
        precompile.compile_call(calls[index], precompile._target("sm_90", 32), Path(tmp), name)
        out[name] = kept[0]
print(json.dumps(out))
"""


def sm90_ptx(launches: dict[str, tuple[str, str, str, dict, str, int]]) -> dict[str, str]:
    """The sm_90 PTX of chosen launches, compiled in a child as a pack build compiles them (with
    the running Triton): name → (family module, op, config class, its fields, dtype, which of
    the family's representative launches)."""
    done = subprocess.run([sys.executable, "-c", _PTX_CHILD, json.dumps(launches)], capture_output=True,
                          text=True, env=compiler_env(), timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
