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
