"""Python cost of repeat ``gemm`` (and level-1/2) calls on a machine without a GPU: the launch stubbed out.

What a call costs the host besides the driver and torch's allocator — validation, selection or the
recipe lookup, copies planned or replayed, launch arguments — measured on CPU tensors with the
selection an H200 (sm_90, 132 multiprocessors) would make: the device description, Triton's driver
and the compiled kernel are stand-ins whose launch does nothing, so only Tessera's own Python runs.
Compare variants of the host path here before timing them on the GPU (where torch.empty and the
launchers add several µs a launch). The process re-executes itself once with glibc's mmap
threshold raised, so that freeing a 4 MiB CPU buffer does not unmap it (a CUDA caching allocator
keeps it too). Usage: python benchmarks/host_path.py [--size N] [--calls N] [--profile KIND]
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import functools
import itertools
import os
import pstats
import sys
import time
import types
from collections.abc import Callable

_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 31)}


def _stub_the_gpu() -> None:
    """sm_90 selection on CPU tensors, every launch a no-op (before any call); the stand-in
    binaries have Triton 3.6's launcher layout, so replays call their "C launcher" as on the GPU
    (``TESSERA_RAW_LAUNCH=0``: through Triton's wrappers, as stubbed here)."""
    from tessera._core import device, launch, validate
    from tessera.blas import api

    h200 = dataclasses.replace(device.offline_device("sm_90"), multiprocessors=132, name="NVIDIA H200 (stub)")
    api.device_info = lambda dev=None: h200
    validate.interpreter_enabled = lambda: True  # CPU operands pass the device check

    class CFunction:  # a compiled kernel's C launcher: takes every argument, launches nothing
        def __call__(self, *args: object) -> None:
            pass

    def make_tensordesc_arg(arg: object, meta: object) -> list[object]:  # Triton 3.6's expansion
        return [object(), *arg.shape, *arg.strides]  # type: ignore[attr-defined]

    def wrap(launcher: object, tensordesc_indices: set[int], tensordesc_meta: list[object]) -> object:
        """Triton 3.6's wrapper of the C launcher: each tensor descriptor expanded every launch."""
        # make_tensordesc_arg is a module global there: a default here, so the closure's cells match
        def inner(*args: object, make_tensordesc_arg: Callable = make_tensordesc_arg) -> None:
            final_args = list(args[:13])
            for i, arg in enumerate(args[13:]):
                if i in tensordesc_indices:
                    final_args.extend(make_tensordesc_arg(arg, tensordesc_meta[0]))
                else:
                    final_args.append(arg)
            launcher(*final_args)  # type: ignore[operator]

        return inner

    class CudaLauncher:
        """Triton 3.6's launcher layout (what ``launch.raw_launcher`` reads), its descriptors
        learnt from the first launch's arguments: replays take the path they take on the GPU."""
        global_scratch_size = profile_scratch_size = 0
        launch_cooperative_grid = launch_pdl = False

        def __init__(self) -> None:
            self.launch: object = None

        def __call__(self, *args: object) -> None:
            if self.launch is None:
                indices = {i for i, arg in enumerate(args[9:]) if hasattr(arg, "block_shape")}
                self.launch = wrap(CFunction(), indices, [{}] * len(indices)) if indices else CFunction()
            self.launch(*args[:5], False, False, None, None, *args[5:])  # type: ignore[operator]

    class Compiled:
        function, packed_metadata = 0, None

        def __init__(self) -> None:
            self.run = CudaLauncher()

    class Active:
        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, index: int) -> int:
            return 0

    hooks = types.SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None)
    knobs = types.SimpleNamespace(runtime=hooks)
    driver = types.SimpleNamespace(active=Active())
    launch._triton_runtime = lambda: (knobs, driver)
    launch.Launcher._from_pack = lambda self, key: Compiled()
    module = types.SimpleNamespace(_BASE_ARGS_FORMAT="iiiKKppOOOOOO", make_tensordesc_arg=make_tensordesc_arg)
    launch.raw_launcher = functools.partial(launch.raw_launcher, driver_module=module)


def _calls(size: int) -> dict[str, Callable[[], object]]:
    import torch

    from tessera.blas import gemm, space

    a32, b32 = torch.randn(size, size), torch.randn(size, size)
    a16, b16 = a32.bfloat16(), b32.bfloat16()
    swapping = space.WS_TF32_SPACE[1]  # gemm_ws multiplying the row-major B swapped: no copy

    def tf32_swapped() -> object:
        with space.forced(swapping):
            return gemm(a32, b32, precision="tf32")

    from tessera import blas

    x, y = torch.randn(4096), torch.randn(4096)
    v, w = torch.randn(size).bfloat16(), torch.empty(size).bfloat16()
    calls = itertools.count()  # a new alpha every call, as an iterative solver's or a schedule's

    def alpha() -> float:
        return 0.5 + next(calls) * 2.0**-30

    level12 = {"axpy 4096": lambda: blas.axpy(0.5, x, y),
               "axpy 4096, a new alpha each call": lambda: blas.axpy(alpha(), x, y),
               "scal 4096": lambda: blas.scal(0.5, x),
               "copy 4096": lambda: blas.copy(x, y), "dot 4096": lambda: blas.dot(x, y),
               "nrm2 4096": lambda: blas.nrm2(x), f"gemv {size}² bf16": lambda: blas.gemv(a16, v, w),
               f"gemv T {size}² bf16": lambda: blas.gemv(a16, v, w, trans=True),
               f"gemv {size}² bf16, a new alpha each call": lambda: blas.gemv(a16, v, w, alpha=alpha()),
               f"symv {size}² bf16": lambda: blas.symv(a16, v, w),
               f"ger {size}² bf16": lambda: blas.ger(0.5, v, w, a16)}
    from tessera.blas import quantize_weight

    q4 = quantize_weight(torch.randn(size, size).half(), bits=4, group_size=128)
    xq, yq = torch.randn(1, size).half(), torch.empty(1, size).half()
    weight_only = {f"gemm_wq W4A16 1x{size}²": lambda: blas.gemm_wq(xq, q4),
                   f"gemm_wq W4A16 1x{size}², out=": lambda: blas.gemm_wq(xq, q4, out=yq)}
    a8, b8 = torch.randn(256, 256).to(torch.float8_e4m3fn), torch.randn(256, 256).to(torch.float8_e4m3fn).t()
    s8, d8 = torch.ones(1), torch.empty(256, 256, dtype=torch.bfloat16)
    scaled = {"fp8 256³ fast": lambda: gemm(a8, b8, scale_a=s8, scale_b=s8, fast_accum=True),
              "fp8 256³ fast, out=": lambda: gemm(a8, b8, scale_a=s8, scale_b=s8, fast_accum=True, out=d8)}
    c16, bias16 = torch.randn(size, size).bfloat16(), torch.randn(size).bfloat16()
    with_c = {"bf16 + beta·C": lambda: gemm(a16, b16, c16, beta=1.0),
              "bf16 + a bias row (C broadcast)": lambda: gemm(a16, b16, bias16, beta=1.0)}
    return {**level12, **weight_only, **scaled, **with_c, "bf16": lambda: gemm(a16, b16),
            "bf16, a new alpha each call": lambda: gemm(a16, b16, alpha=alpha()),
            "fp32": lambda: gemm(a32, b32),
            "tf32": lambda: gemm(a32, b32, precision="tf32"),
            "tf32x3": lambda: gemm(a32, b32, precision="tf32x3"),
            "tf32, B a transposed view": lambda: gemm(a32, b32.t(), precision="tf32"),
            f"tf32 swapped ({swapping.short().split()[1]} forced)": tf32_swapped}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1024, help="M = N = K (selects the kernel)")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--profile", help="print a cProfile of this kind's calls")
    args = parser.parse_args()
    if any(os.environ.get(k) != v for k, v in _MALLOC.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **_MALLOC})
    _stub_the_gpu()
    import torch

    from tessera.blas import explain

    calls = _calls(args.size)
    for kind, call in calls.items():
        for _ in range(200):  # the first call plans and records; the rest are repeat calls
            call()
        start = time.perf_counter()
        for _ in range(args.calls):
            call()
        per_call = (time.perf_counter() - start) / args.calls * 1e6
        print(f"{kind:<40} {per_call:6.1f} µs a call")
    a, b = (torch.empty(args.size, args.size) for _ in range(2))
    print(f"bf16 {args.size}³: {explain(a.bfloat16(), b.bfloat16()).config.short()}; tf32: "
          f"{explain(a, b, precision='tf32').config.short()}")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.calls):
            calls[args.profile]()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
