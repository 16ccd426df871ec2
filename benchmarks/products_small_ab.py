"""bf16x9 / bf16x6 with the small products on ``emulated.SMALL_TILE`` ("new") against ``gemm``'s
selection ("old"), alternating in one process, SGEMM beside (results/products-small-ws-*/).

Usage: python benchmarks/products_small_ab.py OUT.json   (a CUDA sm_90 GPU)
"""

from __future__ import annotations

import sys

import torch
import triton

from tessera._core.device import torch_matmul_tf32_as
from tessera._core.timing import write_result
from tessera.blas import api, emulated, gemm

NEW = emulated.SMALL_TILE_WAVES
OLD = (float("inf"), float("inf"))  # never on SMALL_TILE: gemm's selection, as before it
ROUNDS = 2


def timed(a: torch.Tensor, b: torch.Tensor, precision: str, waves: tuple[float, float]) -> float:
    """do_bench's milliseconds of a bf16-product call with ``SMALL_TILE_WAVES`` = ``waves`` (no recipe
    kept from the other mode)."""
    emulated.SMALL_TILE_WAVES = waves
    api._RECIPES.clear()
    try:
        gemm(a, b, precision=precision)
        return triton.testing.do_bench(lambda: gemm(a, b, precision=precision), warmup=20, rep=200)
    finally:
        emulated.SMALL_TILE_WAVES = NEW


def main(path: str) -> None:
    rows = []
    for n in (2048, 4096, 8192):
        a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        with torch_matmul_tf32_as(False):
            sgemm = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=20, rep=200)  # noqa: B023
        for precision in ("bf16x9", "bf16x6"):
            times: dict[str, list[float]] = {"new": [], "old": []}
            for _ in range(ROUNDS):
                for mode, waves in (("new", NEW), ("old", OLD)):
                    times[mode].append(timed(a, b, precision, waves))
            new, old = min(times["new"]), min(times["old"])
            rows.append(dict(n=n, precision=precision, sgemm_ms=sgemm, new_ms=new, old_ms=old, all=times,
                             new_vs_sgemm=sgemm / new, old_vs_sgemm=sgemm / old, speedup=old / new))
            print(f"{precision} {n}: new {new * 1e3:.1f} us ({sgemm / new:.3f}x SGEMM), old {old * 1e3:.1f} "
                  f"us ({sgemm / old:.3f}x): {old / new:.3f}x", flush=True)
    write_result(path, dict(device=torch.cuda.get_device_name(), rows=rows))


if __name__ == "__main__":
    main(sys.argv[1])
