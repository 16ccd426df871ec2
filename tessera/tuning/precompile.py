"""Compile kernel families for a target we are not running on (run as a child process).

``python -m tessera.tuning.precompile`` reads one JSON job from stdin —
``{"arch": "gfx1103", "out": DIR, "jobs": [{"library", "op", "kernel", "dtype", "config"}, …]}`` —
compiles each job's common specialization with ``triton.compile`` for the target, writes the binary
into DIR and prints one JSON result line per job: ``{"status": "ok", "file": …}`` or
``{"status": "failed", "reason": …}``. It runs apart from the caller because Triton's interpreter,
when on, patches the language module for the whole process.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

# kernel family → module that defines offline_source(config, dtype)
FAMILY_MODULES = {"gemm_tile": "tessera.blas.kernels.gemm_tile", "gemm_tma": "tessera.blas.kernels.gemm_tma",
                  "gemm_splitk": "tessera.blas.kernels.gemm_splitk"}


def _target(arch: str, warp_size: int) -> object:
    from triton.backends.compiler import GPUTarget

    if arch.startswith("sm_"):
        return GPUTarget("cuda", int(arch[3:]), 32)
    return GPUTarget("hip", arch, warp_size)


def main() -> None:
    import triton

    from tessera.tuning.logic import registered_ops

    request = json.load(sys.stdin)
    arch, out = request["arch"], Path(request["out"])
    target = _target(arch, request.get("warp_size", 32))
    for i, job in enumerate(request["jobs"]):
        family = registered_ops()[(job["library"], job["op"])].families[job["kernel"]]
        config = family(**job["config"])
        try:
            if job["kernel"] == "gemm_tma" and not (arch.startswith("sm_") and int(arch[3:]) >= 90):
                raise ValueError("the TMA family needs sm_90 or newer")
            module = importlib.import_module(FAMILY_MODULES[job["kernel"]])
            compiled = triton.compile(module.offline_source(config, job["dtype"]), target=target,
                                      options={"num_warps": config.num_warps,
                                               "num_stages": config.num_stages})
            suffix = "cubin" if arch.startswith("sm_") else "hsaco"
            binary = out / f"{i:04d}-{job['kernel']}-{job['dtype']}.{suffix}"
            binary.write_bytes(compiled.asm[suffix])
            meta = binary.with_suffix(".json")
            meta.write_text(json.dumps(compiled.metadata._asdict(), default=str, sort_keys=True))
            result = {"status": "ok", "file": binary.name, "metadata": meta.name}
        except Exception as exc:  # noqa: BLE001 - each failure is a row of the support table
            result = {"status": "failed", "reason": f"{type(exc).__name__}: {str(exc).strip()[-300:]}"}
        print(json.dumps({"job": i, **result}), flush=True)


if __name__ == "__main__":
    main()
