"""The bf16-product precisions with a₀·b₀'s sums promoted per K step (``emulated.PROMOTED_TILE``)
against the same call with one plain bf16 GEMM there (what the fifty-seventh session shipped) and
cuBLAS's SGEMM, one run: accuracy against fp64 (max |D − D64| / |A|·|B| elementwise, norm-wise),
then time (CUDA graphs and eager, ``do_bench`` medians) of the whole call and of the a₀·b₀ GEMM
alone, for each promoted tile named.

Usage: python benchmarks/promote_probe.py OUT.json [--sizes 2048,4096,8192] [--accuracy-sizes 4096,8192]
       [--tiles '128x128x64 s4,128x128x128 s3 split2']
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

import torch
import triton.testing
from fp32_products_probe import errors  # this folder is on sys.path when run as a script

from tessera._core.device import torch_matmul_tf32_as
from tessera._core.timing import run_record, write_result
from tessera.blas import emulated, gemm
from tessera.blas.kernels.gemm_tma import TmaConfig

TILES = {  # the first run's four (H100, 19ee4e4), then 128-deep steps (one promotion a 128 of K)
    "128x128x64 s4": TmaConfig(128, 128, 64, 8, 8, 4),
    "128x128x64 s3": TmaConfig(128, 128, 64, 8, 8, 3),
    "128x128x64 s5": TmaConfig(128, 128, 64, 8, 8, 5),
    "128x256x64 s3 split2": TmaConfig(128, 256, 64, 8, 8, 3, False, 2),
    "128x128x64 s5 split2": TmaConfig(128, 128, 64, 8, 8, 5, False, 2),
    "256x128x64 s3 split2": TmaConfig(256, 128, 64, 8, 8, 3, False, 2),
    "128x128x128 s3 split2": TmaConfig(128, 128, 128, 8, 8, 3, False, 2),
    "128x256x128 s2 split2": TmaConfig(128, 256, 128, 8, 8, 2, False, 2),
}


@contextlib.contextmanager
def plain() -> Iterator[None]:
    """a₀·b₀ as one plain bf16 GEMM (the tensor cores' truncated sums)."""
    kept = emulated.promoting_target
    emulated.promoting_target = lambda *args: None
    try:
        yield
    finally:
        emulated.promoting_target = kept


@contextlib.contextmanager
def tile(config: TmaConfig) -> Iterator[None]:
    kept = emulated.PROMOTED_TILE
    emulated.PROMOTED_TILE = config
    try:
        yield
    finally:
        emulated.PROMOTED_TILE = kept


def times(fn) -> dict[str, float]:
    fn()
    torch.cuda.synchronize()
    return {"graph_ms": triton.testing.do_bench_cudagraph(fn, rep=200, return_mode="median"),
            "eager_ms": triton.testing.do_bench(fn, warmup=50, rep=200, return_mode="median")}


def time_row(n: int, tiles: list[str]) -> dict:
    """Every method's time at n³ (randn operands), SGEMM's ratio printed beside each."""
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    row: dict = {"case": "time", "n": n, "flop": 2 * n ** 3}
    with torch_matmul_tf32_as(False):
        row["sgemm"] = times(lambda: torch.matmul(a, b))
    for precision in emulated.SMALL_PRODUCTS:
        with plain():
            row[precision + " plain"] = times(lambda p=precision: gemm(a, b, precision=p))
        for name in tiles:
            with tile(TILES[name]):
                row[f"{precision} {name}"] = times(lambda p=precision: gemm(a, b, precision=p))
    # the a₀·b₀ GEMM alone, promoted against plain
    pieces = emulated.operand_pieces("bf16x9")
    a0, b0 = emulated.first_pieces(emulated.pieces_of_a(a, pieces[0]), emulated.pieces_of_b(b, pieces[1]),
                                   "bf16x9", n)
    c, d = torch.zeros(n, n, device="cuda"), torch.empty(n, n, device="cuda")
    row["a0b0 plain"] = times(lambda: gemm(a0, b0, c, beta=1.0, out_dtype=torch.float32, out=d))
    target = emulated.promoting_target(a0, b0, d)
    assert target is not None
    for name in tiles:
        with tile(TILES[name]):
            row[f"a0b0 {name}"] = times(lambda: emulated.promoted_product(a0, b0, c, d, 1.0, target,
                                                                          clean=False))
    sgemm = row["sgemm"]["graph_ms"]
    print(n, " ".join(f"{k} {v['graph_ms']:.3f}ms({sgemm / v['graph_ms']:.2f}x)"
                      for k, v in row.items() if isinstance(v, dict)), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--sizes", default="2048,4096,8192")
    parser.add_argument("--accuracy-sizes", default="4096,8192")
    parser.add_argument("--tiles", default=",".join(TILES), help="names of TILES, comma-separated")
    args = parser.parse_args()
    tiles = args.tiles.split(",")
    rows = []
    for n in (int(v) for v in args.accuracy_sizes.split(",")):
        for kind in ("randn", "uniform"):
            g = torch.Generator(device="cuda").manual_seed(n)
            make = torch.randn if kind == "randn" else torch.rand
            a, b = (make(n, n, device="cuda", generator=g) for _ in range(2))
            exact, scale = a.double() @ b.double(), a.double().abs() @ b.double().abs()
            row = {"case": "accuracy", "n": n, "operands": kind}
            with torch_matmul_tf32_as(False):
                row["sgemm"] = errors(torch.matmul(a, b), exact, scale)
            for precision in emulated.SMALL_PRODUCTS:
                with plain():
                    row[precision + " plain"] = errors(gemm(a, b, precision=precision), exact, scale)
                for name in tiles:
                    with tile(TILES[name]):
                        row[f"{precision} {name}"] = errors(gemm(a, b, precision=precision), exact, scale)
            rows.append(row)
            print(n, kind, " ".join(f"{k} {v['max_rel_elementwise']:.2e}/{v['norm_rel']:.2e}"
                                    for k, v in row.items() if isinstance(v, dict)), flush=True)
            del exact, scale
    for n in (int(v) for v in args.sizes.split(",")):
        rows.append(time_row(n, tiles))
    record = run_record("benchmarks/promote_probe.py " + " ".join(f"{k}={v}" for k, v in vars(args).items()))
    record["rows"] = rows
    write_result(args.out, record)


if __name__ == "__main__":
    main()
