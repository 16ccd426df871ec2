"""Host-side cost of one GEMM call (validation, selection, descriptors, Triton's launcher), and
of tiny BLAS level 1/2 calls and a weight-only decode call beside their torch equivalents.

Times many back-to-back calls of a tiny problem whose GPU work is negligible, so the wall time
per call is what Python and the launcher cost; torch.matmul is the vendor baseline. Also prints a
cProfile of the Tessera calls. The tf32 rows split a 1024³ call's cost: tf32 on Hopper copies a
row-major B K-major on every call (98 µs per eager call at 68cf936 against 13 µs in a CUDA graph).
Usage: python benchmarks/host_overhead.py [OUT.json]
"""

from __future__ import annotations

import cProfile
import io
import itertools
import pstats
import sys
import time
import traceback
from collections.abc import Callable

import torch
import triton

from tessera import blas
from tessera._core.device import torch_matmul_tf32_as
from tessera._core.launch import Launcher
from tessera._core.timing import git_revision, launch_settings, per_call_us, write_result
from tessera.blas import explain, gemm, space
from tessera.blas.kernels.copy import column_major_copy
from tessera.blas.kernels.gemm_scaled import ScaledTmaConfig
from tessera.blas.kernels.gemm_streamk import StreamKConfig
from tessera.blas.kernels.gemm_tile import TileConfig
from tessera.blas.kernels.gemm_tma import TmaConfig
from tessera.blas.kernels.gemm_wq import WqConfig, WqGemvConfig
from tessera.blas.kernels.gemm_ws import ScaledWsConfig


def launch_anatomy(a: torch.Tensor, b: torch.Tensor, configs: dict[str, space.Config]) -> dict[str, float]:
    """µs per call of each step of a warm launch, timed apart: what the direct launch's remaining
    cost is made of (Triton's launcher, its TMA descriptor encoding, torch's allocator…)."""
    from triton.runtime.driver import driver
    from triton.tools.tensor_descriptor import TensorDescriptor

    rows: dict[str, float] = {}
    device = driver.active.get_current_device()
    rows["driver get_current_device"] = per_call_us(driver.active.get_current_device)
    rows["driver get_current_stream"] = per_call_us(lambda: driver.active.get_current_stream(device))
    rows["torch.empty 64x64 bf16"] = per_call_us(lambda: torch.empty((64, 64), dtype=torch.bfloat16,
                                                                      device="cuda"))
    rows["TensorDescriptor(...)"] = per_call_us(lambda: TensorDescriptor(a, [64, 64], [64, 1], [64, 64]))
    utils = driver.active.utils
    fill = getattr(utils, "fill_tma_descriptor", None) or getattr(utils, "fill_tma_descriptor_tiled", None)
    if fill is not None:
        ptr = a.data_ptr()
        rows["fill_tma_descriptor (one CUtensorMap)"] = per_call_us(
            lambda: fill(ptr, 3, 2, 9, [64, 64], [64, 64], [64, 1], 0))
    for name, config in configs.items():
        rows.update(_family_steps(name, config, a, b, device))
    return rows


def _family_steps(name: str, config: space.Config, a: torch.Tensor, b: torch.Tensor,
                  device: int) -> dict[str, float]:
    """The launch steps of one GEMM family's warm call (see :func:`launch_anatomy`)."""
    from triton import knobs
    from triton.runtime.driver import driver

    from tessera._core import launch

    with space.forced(config):
        gemm(a, b)  # compile and cache
        with launch.capture() as calls:
            gemm(a, b)
    call = calls[-1]
    launcher = call.launcher
    compiled, _ = launcher.compiled_for(call)  # the binary the warm call above cached
    bound = (*call.args, *call.constexprs.values())
    grid = (*call.grid, 1, 1)[:3]
    stream = driver.active.get_current_stream(device)
    hooks = (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
    return {
        f"{name}: launch_key": per_call_us(lambda: launch.launch_key(
            call.args, call.constexprs, call.num_warps, call.num_stages, launcher._plain)),
        f"{name}: compiled.launch_metadata": per_call_us(
            lambda: compiled.launch_metadata(grid, stream, *bound)),
        f"{name}: compiled.run (Triton's launcher)": per_call_us(lambda: compiled.run(
            *grid, stream, compiled.function, compiled.packed_metadata, None, *hooks, *bound)),
        f"{name}: Launcher (direct launch)": per_call_us(
            lambda: launcher(call.grid, call.args, call.constexprs, call.num_warps, call.num_stages)),
    }


def main() -> None:
    a = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    big_a, big_b = (torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    bias = torch.randn(1024, device="cuda", dtype=torch.bfloat16)  # a linear layer's: C a row
    f32_a, f32_b = big_a.float(), big_b.float()  # tf32: B (row-major) is copied K-major per call
    row, weight = (torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16),  # the shipped logic takes
                   torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16))  # split-K: two launches
    tile, tma = TileConfig(64, 64, 64, 8, 4, 1), TmaConfig(64, 64, 64, 8, 4, 2)
    streamk = StreamKConfig(64, 64, 64, 0, 4, 3, True)  # replayed: its scratch buffers are kept per stream
    a8 = torch.randn(256, 256, device="cuda").to(torch.float8_e4m3fn)
    b8, one = torch.randn(256, 256, device="cuda").to(torch.float8_e4m3fn).t(), torch.ones((), device="cuda")

    def forced(config: space.Config) -> Callable[[], object]:
        def call() -> object:
            with space.forced(config):
                return gemm(a, b)
        return call

    def fp8(config: space.Config) -> Callable[[], object]:
        def call() -> object:
            with space.forced(config):
                return gemm(a8, b8, scale_a=one, scale_b=one, fast_accum=True)
        return call

    samples: dict[str, list[float]] = {}
    for _ in range(3):  # alternate the variants: the host's speed drifts
        for direct in (True, False):
            Launcher.enabled = direct
            how = "direct launch" if direct else "Triton JIT launch"
            samples.setdefault(f"tessera.gemm, tile family, {how}", []).append(per_call_us(forced(tile)))
            samples.setdefault(f"tessera.gemm, TMA family, {how}", []).append(per_call_us(forced(tma)))
            samples.setdefault(f"tessera.gemm, stream-K family, {how}", []).append(
                per_call_us(forced(streamk)))
        Launcher.enabled = True
        samples.setdefault("torch.matmul", []).append(per_call_us(lambda: torch.matmul(a, b)))
        samples.setdefault("tessera.gemm 1024^3 bf16, shipped logic", []).append(
            per_call_us(lambda: gemm(big_a, big_b), calls=500))
        samples.setdefault("torch.matmul 1024^3 bf16", []).append(
            per_call_us(lambda: torch.matmul(big_a, big_b), calls=500))
        samples.setdefault("tessera.gemm 1024^3 bf16 + a bias row (beta·C, C broadcast)", []).append(
            per_call_us(lambda: gemm(big_a, big_b, bias, beta=1.0), calls=500))
        samples.setdefault("torch.addmm 1024^3 bf16, a bias row", []).append(
            per_call_us(lambda: torch.addmm(bias, big_a, big_b), calls=500))
        samples.setdefault("tessera.gemm 1x4096x4096 bf16, shipped logic (split-K)", []).append(
            per_call_us(lambda: gemm(row, weight), calls=500))
        samples.setdefault("torch.matmul 1x4096x4096 bf16", []).append(
            per_call_us(lambda: torch.matmul(row, weight), calls=500))
        samples.setdefault("tessera.gemm 1024^3 tf32 (B copied K-major each call)", []).append(
            per_call_us(lambda: gemm(f32_a, f32_b, precision="tf32"), calls=500))
        samples.setdefault("tessera.gemm 1024^3 tf32x3 (B copied K-major each call)", []).append(
            per_call_us(lambda: gemm(f32_a, f32_b, precision="tf32x3"), calls=500))
        samples.setdefault("  its K-major copy of B alone (column_major_copy)", []).append(
            per_call_us(lambda: column_major_copy(f32_b), calls=500))
        with torch_matmul_tf32_as(True):
            samples.setdefault("torch.matmul 1024^3 fp32, tf32 allowed", []).append(
                per_call_us(lambda: torch.matmul(f32_a, f32_b), calls=500))
        samples.setdefault("tessera.blas.explain (validation + selection only)", []).append(
            per_call_us(lambda: explain(a, b)))
        samples.setdefault("tessera.gemm fp8 256^3 fast, warp-specialized (gemm_scaled_ws)", []).append(
            per_call_us(fp8(ScaledWsConfig(128, 256, 128, 8, 8, 3))))
        samples.setdefault("tessera.gemm fp8 256^3 fast, descriptor family (gemm_scaled_tma)", []).append(
            per_call_us(fp8(ScaledTmaConfig(128, 256, 128, 8, 8, 4, False, 2, True))))
        samples.setdefault("torch._scaled_mm fp8 256^3 fast", []).append(per_call_us(
            lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                     use_fast_accum=True)))
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    v = torch.randn(64, device="cuda", dtype=torch.bfloat16)
    w = torch.empty(64, device="cuda", dtype=torch.bfloat16)
    wq = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    q, xq = blas.quantize_weight(wq, bits=4), torch.randn(1, 256, device="cuda", dtype=torch.bfloat16)
    q8, x16 = blas.quantize_weight(wq, bits=8), torch.randn(16, 256, device="cuda", dtype=torch.bfloat16)
    planes = WqConfig(16, 128, 128, 2, 8, 4, 3, byte_planes=True, early_scales=True)
    out16 = torch.empty(16, 256, device="cuda", dtype=torch.bfloat16)

    def wq_forced(config: space.Config, x: torch.Tensor,
                  out: torch.Tensor | None = None) -> Callable[[], object]:
        def call() -> object:
            with space.forced(config):
                return blas.gemm_wq(x, q8, out=out)
        return call
    xb, yb = x.view(16, 256), y.view(16, 256)
    calls = itertools.count()  # a new alpha every call, as an iterative solver's

    def alpha() -> float:
        return 0.5 + next(calls) * 2.0**-30

    level12 = {  # name: (tessera call, torch call); last the weight-only decode beside bf16 matmul
        "axpy 4096": (lambda: blas.axpy(0.5, x, y), lambda: y.add_(x, alpha=0.5)),
        "axpy 4096, a new alpha each call": (lambda: blas.axpy(alpha(), x, y),
                                             lambda: y.add_(x, alpha=alpha())),
        "dot 4096": (lambda: blas.dot(x, y), lambda: torch.dot(x, y)),
        "nrm2 4096": (lambda: blas.nrm2(x), lambda: torch.linalg.vector_norm(x)),
        "iamax 4096": (lambda: blas.iamax(x), lambda: x.abs().argmax()),
        "dot batched 16x256": (lambda: blas.dot(xb, yb), lambda: torch.linalg.vecdot(xb, yb)),
        "gemv 64x64 bf16": (lambda: blas.gemv(a, v, w), lambda: torch.mv(a, v, out=w)),
        "gemv T 64x64 bf16": (lambda: blas.gemv(a, v, w, trans=True), lambda: torch.mv(a.t(), v, out=w)),
        "gemv 64x64 bf16, a new alpha each call": (lambda: blas.gemv(a, v, w, alpha=alpha()),
                                                   lambda: torch.mv(a, v, out=w).mul_(alpha())),
        "symv 64x64 bf16": (lambda: blas.symv(a, v, w), lambda: torch.mv(a, v, out=w)),
        "ger 64x64 bf16": (lambda: blas.ger(1e-3, v, v, a), lambda: a.addr_(v, v, alpha=1e-3)),
        "gemm_wq W4A16 1x256x256": (lambda: blas.gemm_wq(xq, q), lambda: torch.matmul(xq, wq)),
        "gemm_wq W8A16 16x256x256 byte planes": (wq_forced(planes, x16), lambda: torch.matmul(x16, wq)),
        "gemm_wq W8A16 16x256x256 byte planes, out=": (wq_forced(planes, x16, out16),
                                                     lambda: torch.matmul(x16, wq, out=out16)),
        "gemm_wq W8A16 1x256x256 decode": (wq_forced(WqGemvConfig(256, 8, 4, 1, 2, unit_codes=True), xq),
                                           lambda: torch.matmul(xq, wq)),
    }
    for _ in range(3):
        for name, (ours, theirs) in level12.items():
            samples.setdefault(f"tessera.blas {name}", []).append(per_call_us(ours))
            samples.setdefault(f"torch {name}", []).append(per_call_us(theirs))
    rows = {name: sorted(values)[1] for name, values in samples.items()}  # median of 3
    try:
        anatomy = launch_anatomy(a, b, {"tile": tile, "tma": tma})
    except Exception:  # noqa: BLE001 - a diagnostic: its failure must not cost the rows above
        traceback.print_exc()
        anatomy = {}
    for name, us in anatomy.items():
        print(f"  step: {name:<50} {us:8.2f} us/call")
    for name, us in rows.items():
        print(f"{name:<52} {us:8.1f} us/call")
    profiled = {"tile family": forced(tile), "TMA family": forced(tma),
                "tf32 1024^3": lambda: gemm(f32_a, f32_b, precision="tf32"),
                "fp8 warp-specialized": fp8(ScaledWsConfig(128, 256, 128, 8, 8, 3)),
                "gemm_wq byte planes, out=": wq_forced(planes, x16, out16),
                "axpy 4096": level12["axpy 4096"][0], "gemv 64x64 bf16": level12["gemv 64x64 bf16"][0]}
    for name, call in profiled.items():
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(500):
            call()
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(28)
        print(f"--- cProfile, 500 calls, {name} ---")
        print("\n".join(text.getvalue().splitlines()[6:40]))
    if len(sys.argv) > 1:
        write_result(sys.argv[1], {"us_per_call": rows, "launch_steps_us": anatomy,
                                   "device": torch.cuda.get_device_name(), "git": git_revision(),
                                   "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                   "versions": {"torch": torch.__version__, "triton": triton.__version__},
                                   "settings": launch_settings()})


if __name__ == "__main__":
    main()
