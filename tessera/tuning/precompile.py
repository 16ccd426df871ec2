"""Compile kernel families for a target we are not running on (run as a child process).

``python -m tessera.tuning.precompile`` reads one JSON request from stdin —
``{"arch": "gfx1103", "out": DIR, "jobs": [{"index", "library", "op", "kernel", "dtype", "config"}, …]}``
(``index``: the job's place in the whole build, which a pack build deals to several such processes;
it names the job's files and its result line).
For each job it runs the family's ``representative_launch(op, config, dtype, num_sms)`` on CPU tensors
under :func:`~tessera._core.launch.capture`, derives with Triton's own binder the specialization the
JIT would compile for each captured launch on the target, compiles it with ``triton.compile`` and
writes into DIR the binary, Triton's metadata and a ``.launch.json`` sidecar with the launch key
(what the pack loader matches at run time) and Triton's specialization (to rebuild its source).
It prints one JSON result line per job: ``{"job": index, "status": "ok", "files": […]}`` (a
binary, its metadata and its sidecar per launch) or ``{"job": index, "status": "failed",
"reason": …}``. It runs apart from the caller because Triton's interpreter, when on, patches the
language module process-wide.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

# kernel family → module that defines representative_launch(op, config, dtype, num_sms)
FAMILY_MODULES = {"gemm_tile": "tessera.blas.kernels.gemm_tile",
                  "gemm_tma": "tessera.blas.kernels.gemm_tma",
                  "gemm_splitk": "tessera.blas.kernels.gemm_splitk",
                  "gemm_streamk": "tessera.blas.kernels.gemm_streamk",
                  "gemm_ws": "tessera.blas.kernels.gemm_ws",
                  "gemm_fma": "tessera.blas.kernels.gemm_fma",
                  "gemm_wq": "tessera.blas.kernels.gemm_wq", "gemv_wq": "tessera.blas.kernels.gemm_wq",
                  "gemm_wq_dequant": "tessera.blas.kernels.gemm_wq",
                  "gemm_wq_ws": "tessera.blas.kernels.gemm_wq_ws",
                  "gemm_scaled": "tessera.blas.kernels.gemm_scaled",
                  "gemm_scaled_tma": "tessera.blas.kernels.gemm_scaled",
                  "gemm_scaled_ws": "tessera.blas.kernels.gemm_scaled",
                  "gemv": "tessera.blas.kernels.level2", "gemv_gemm": "tessera.blas.kernels.level2",
                  "ger": "tessera.blas.kernels.level2", "symv": "tessera.blas.kernels.level2",
                  "trsv": "tessera.blas.kernels.level2", "level1": "tessera.blas.kernels.level1",
                  "philox": "tessera.rand.kernels.philox",
                  "mrg32k3a": "tessera.rand.kernels.mrg", "sobol32": "tessera.rand.kernels.sobol"}


# Hopper tensor descriptors (sm_90 or newer): these families, and configurations with ``tma`` set
TMA_FAMILIES = ("gemm_tma", "gemm_scaled_tma", "gemm_ws", "gemm_scaled_ws", "gemm_wq_ws")


def _target(arch: str, warp_size: int) -> object:
    from triton.backends.compiler import GPUTarget

    if arch.startswith("sm_"):
        return GPUTarget("cuda", int(arch[3:]), 32)
    return GPUTarget("hip", arch, warp_size)


def compile_for(call: Any, target: Any) -> Any:
    """Triton's ``CompiledKernel`` of one captured launch for ``target``: the specialization the
    JIT would derive there (Triton's own binder), compiled with ``triton.compile``."""
    import dataclasses

    import triton
    from triton.compiler import ASTSource, make_backend
    from triton.experimental.gluon._runtime import (
        GluonASTSource,  # what gluon.jit compiles from (no public name)
    )

    from tessera._core.launch import jit_specialization

    kernel = call.launcher.kernel
    signature, constants, attrs, options = jit_specialization(
        kernel, call.args, call.constexprs, call.num_warps, call.num_stages, make_backend(target))
    source = GluonASTSource if getattr(kernel, "is_gluon", lambda: False)() else ASTSource
    return triton.compile(source(kernel, signature, constants, attrs), target=target,
                          options=dataclasses.asdict(options))


def compile_call(call: Any, target: Any, out: Path) -> list[str]:
    """Compile one captured launch for ``target``; write binary, metadata and sidecar, named by the
    launch (``binaries.stem``: a launch finds its binary by one file test); return the names."""
    from tessera._core.launch import function_name
    from tessera.tuning.binaries import stem, write_binary

    function, key = function_name(call.launcher.kernel), repr(call.key())
    return write_binary(compile_for(call, target), function, key, out, stem(function, key))


def main() -> None:
    from tessera._core.device import build_multiprocessors, offline_device
    from tessera._core.launch import building_for, capture, function_name
    from tessera.tuning.logic import registered_ops
    from tessera.tuning.packs import kill_point

    request = json.load(sys.stdin)
    arch, out = request["arch"], Path(request["out"])
    target = _target(arch, request.get("warp_size", 32))
    num_sms = build_multiprocessors(offline_device(arch))
    compiled: set[tuple] = set()  # launch keys in this process's earlier jobs' files (tf32's K-major
    # copies); the pack build drops what another process's earlier job compiled too
    for position, job in enumerate(request["jobs"]):
        i = job.get("index", position)
        kill_point(f"precompile-{i}")  # reliability tests: a crash before this job
        family = registered_ops()[(job["library"], job["op"])].families[job["kernel"]]
        try:
            config = family(**job["config"])  # a configuration the family refuses is a failed row
            hopper = arch.startswith("sm_") and int(arch[3:]) >= 90
            if (job["kernel"] in TMA_FAMILIES or job["config"].get("tma")) and not hopper:
                raise ValueError("tensor descriptors (TMA) need sm_90 or newer")
            module = importlib.import_module(FAMILY_MODULES[job["kernel"]])
            with capture() as calls, building_for(target.backend, arch):
                module.representative_launch(job["op"], config, job["dtype"], num_sms)
            files, seen = [], set()
            for call in calls:
                key = (function_name(call.launcher.kernel), call.key())
                if key in seen or key in compiled:  # e.g. a finishing kernel launched alike by every
                    continue  # representative length, or a launch an earlier job compiled
                seen.add(key)
                files += compile_call(call, target, out)
            compiled |= seen  # a failed job's files are not packed: its keys stay to be compiled
            result = {"status": "ok", "files": files}
        except Exception as exc:  # noqa: BLE001 - each failure is a row of the support table
            result = {"status": "failed", "reason": f"{type(exc).__name__}: {str(exc).strip()[-300:]}"}
        print(json.dumps({"job": i, **result}), flush=True)


if __name__ == "__main__":
    main()
