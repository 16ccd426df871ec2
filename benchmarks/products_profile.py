"""Kernel times of float32 calls as bf16 products beside SGEMM (torch.profiler): where a call's time goes.

Usage: python benchmarks/products_profile.py OUT.json   (a CUDA GPU; see
results/products-profile-h100-f861167/README.md). A launch with programmatic dependent launch
early is counted from its start, while the kernel before it still runs: its time is not all its own.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from tessera._core.timing import write_result
from tessera.blas import explain, gemm

CALLS = 20


def kernel_times(call: Callable[[], object]) -> dict[str, tuple[int, float]]:
    """Each CUDA kernel's (count, mean µs) over CALLS calls after three warm-up calls."""
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            call()
        torch.cuda.synchronize()
    times = {}
    for event in prof.key_averages():
        total = getattr(event, "device_time_total", 0) or getattr(event, "cuda_time_total", 0)
        if total:
            times[event.key[:90]] = (event.count, total / max(event.count, 1))
    return times


def main(path: str) -> None:
    out = {}
    for n in (1024, 2048):
        a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        for precision in ("bf16x9", "bf16x6", "ieee"):
            ours = kernel_times(lambda: gemm(a, b, precision=precision))  # noqa: B023 (called at once)
            vendor = kernel_times(lambda: torch.matmul(a, b))  # noqa: B023
            out[f"{precision} {n}"] = {"tessera": ours, "sgemm": vendor,
                                       "explain": str(explain(a, b, precision=precision))[:400]}
            print(precision, n, ours, "SGEMM", vendor, flush=True)
    write_result(path, out)


if __name__ == "__main__":
    main(sys.argv[1])
