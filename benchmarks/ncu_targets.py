"""Kernels to read with Nsight Compute (``ncu``), ours beside the vendor's of the same problem.

Each case is warmed up (compiled, selected, replayed once) outside the profiled region, then
called once between ``cudaProfilerStart`` and ``cudaProfilerStop``, so ``ncu --profile-from-start
off`` reads exactly one call of ours and one of torch's. Run on the GPU, e.g.::

    ncu --profile-from-start off --clock-control none --section SpeedOfLight \\
        --section WarpStateStats python3 benchmarks/ncu_targets.py w4m1 gemm1024

Cases: w4m1, w8m1, w4m16, w8m16 (weight-only decode, 8192², group 128), gemm1024 (bf16 1024³),
fp8 (e4m3 8192³, per-tensor scales, fast accumulation), symv (bf16 8192²), tf32nn and tf32nt
(tf32 4096³, B row-major: ours multiplied swapped; B column-major, x @ W.t(): ours on the K-major
kernel — the two tf32 kernels whose gap the fifty-second session left open), fp32 (IEEE float32
4096³: ours on the FMA units, ``gemm_fma`` by the shipped logic, beside cuBLAS's SGEMM).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from tessera import blas
from tessera._core.device import torch_matmul_tf32_as

N = K = 8192


def _wq(bits: int, m: int) -> tuple[Callable[[], object], Callable[[], object]]:
    w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(m, K, device="cuda", dtype=torch.bfloat16)
    q = blas.quantize_weight(w, bits=bits, group_size=128)
    return (lambda: blas.gemm_wq(x, q)), (lambda: torch.matmul(x, w))


def _gemm1024() -> tuple[Callable[[], object], Callable[[], object]]:
    a, b = (torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return (lambda: blas.gemm(a, b)), (lambda: torch.matmul(a, b))


def _fp8() -> tuple[Callable[[], object], Callable[[], object]]:
    a = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    return (lambda: blas.gemm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, fast_accum=True),
            lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                     use_fast_accum=True))


def _symv() -> tuple[Callable[[], object], Callable[[], object]]:
    a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    return (lambda: blas.symv(a, v)), (lambda: torch.mv(a, v))


def _tf32(b_col_major: bool) -> tuple[Callable[[], object], Callable[[], object]]:
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    b = b.t() if b_col_major else b

    def theirs() -> object:
        with torch_matmul_tf32_as(True):
            return torch.matmul(a, b)

    return (lambda: blas.gemm(a, b, precision="tf32")), theirs


def _fp32() -> tuple[Callable[[], object], Callable[[], object]]:
    a, b = (torch.randn(4096, 4096, device="cuda") for _ in range(2))

    def theirs() -> object:
        with torch_matmul_tf32_as(False):
            return torch.matmul(a, b)

    return (lambda: blas.gemm(a, b)), theirs


CASES: dict[str, Callable[[], tuple[Callable[[], object], Callable[[], object]]]] = {
    "w4m1": lambda: _wq(4, 1), "w8m1": lambda: _wq(8, 1), "w4m16": lambda: _wq(4, 16),
    "w8m16": lambda: _wq(8, 16),
    "gemm1024": _gemm1024, "fp8": _fp8, "symv": _symv,
    "tf32nn": lambda: _tf32(False), "tf32nt": lambda: _tf32(True), "fp32": _fp32,
}


def main() -> None:
    names = sys.argv[1:] or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; expected some of {list(CASES)}")
    for name in names:
        ours, theirs = CASES[name]()
        for _ in range(3):  # compile, select, record the replay
            ours(), theirs()
        torch.cuda.synchronize()
        print(f"== {name}: profiling one call of ours, then one of torch's", flush=True)
        torch.cuda.profiler.start()
        ours()
        theirs()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
