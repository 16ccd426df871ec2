"""tf32 with a row-major B: copy B K-major first (what gemm does on Hopper) or let the kernel read it?

Hopper's wgmma reads tf32 operands only K-major. ``gemm`` copies a row-major B column-major on
every call (``_k_major``): one extra launch and K·N·8 bytes moved, and most of a small call's host
time (host-overhead-h200-ee71c40.json: 93 µs per 1024³ tf32 call, 34 of them in the copy, against
21 for torch). Triton 3.6 also compiles the TMA kernel for a row-major fp32 B: the tile comes in by
TMA as it lies and goes through registers into a K-major shared buffer before each wgmma (its
TTGIR: local_load + local_alloc per K step). This script times both on square problems, eager
(do_bench, L2 flushed), back to back (host-bound for small sizes) and from CUDA graphs, beside
torch.matmul with tf32 allowed, each variant checked against fp64 first. At ee71c40 reading B
row-major was 3.9–4.5× slower than copy-then-GEMM at every size in graphs (the copy stays).

The pointer tile family, which needs no copy (one launch per call), is timed on the row-major B
too. So is the swapped product Dᵀ = Bᵀ·Aᵀ (``gemm(b.t(), a.t())``: both operands column-major, so
the descriptor kernel computes ``tl.dot(b.T, a.T)`` on tiles loaded as they lie; Bᵀ, not K-major,
may go through registers as wgmma's A operand), written to a row-major Dᵀ: what an in-kernel swap
would cost apart from storing the tile transposed. ``--swapped``: only that and the baselines.
At d3c72af (``tf32-layout-h200-d3c72af.json``) the swapped product was 2.5–2.6× slower than
copy-then-GEMM from 2048³ up in graphs (8192³: 8.41 against 3.20 ms; 1024³: 23.7 against 10.9 µs):
dropped, the copy stays.
Usage: python benchmarks/tf32_layout.py OUT.json [SIZE,SIZE,...] [--swapped]
"""

from __future__ import annotations

import json
import sys

import torch

from tessera._core.timing import back_to_back_ms, flushed_ms, graph_ms, run_record, write_result
from tessera.blas import api, explain, gemm, space
from tessera.blas.kernels.gemm_tile import TileConfig
from tessera.blas.kernels.gemm_tma import TmaConfig

SIZES = (1024, 2048, 4096, 8192)
DEVICE = "cuda"
CONFIGS = (None, TmaConfig(128, 256, 32, 8, 8, 3, epilogue_split=2), TmaConfig(128, 128, 32, 8, 8, 4),
           TmaConfig(128, 128, 32, 8, 4, 4), TmaConfig(64, 128, 32, 8, 4, 4),
           TmaConfig(128, 128, 64, 8, 8, 3),
           # the pointer tile family: one launch (no copy), Ampere-style tf32 MMAs on a row-major B
           TileConfig(128, 128, 32, 8, 8, 3), TileConfig(64, 128, 32, 8, 4, 3),
           TileConfig(128, 64, 32, 8, 4, 3))


def reads_row_major_b(on: bool) -> None:
    """Make gemm read B as it lies (on) or copy it K-major (off, the shipped behaviour)."""
    space.tf32_wants_k_major = (lambda info: False) if on else _shipped_rule
    api._RECIPES.clear()


_shipped_rule = space.tf32_wants_k_major


def timings(fn: object) -> dict[str, float]:
    return {"eager_ms": flushed_ms(fn), "b2b_ms": back_to_back_ms(fn, target_ms=20.0, repeats=3),
            "graph_ms": graph_ms([fn])}


def main() -> None:
    args = [arg for arg in sys.argv[1:] if arg != "--swapped"]
    swapped_only = "--swapped" in sys.argv
    out = args[0]
    sizes = tuple(int(s) for s in args[1].split(",")) if len(args) > 1 else SIZES
    torch.backends.cuda.matmul.allow_tf32 = True
    rows = []
    for size in sizes:
        a = torch.randn(size, size, device=DEVICE)
        b = torch.randn(size, size, device=DEVICE)
        want = (a.double() @ b.double())
        scale = float(want.abs().max())
        cases = {"torch.matmul (tf32)": lambda a=a, b=b: torch.matmul(a, b)}
        for row_major in (False, True):
            for config in CONFIGS if row_major and not swapped_only else (None,):
                name = ("B read row-major" if row_major else "B copied K-major") + (
                    f", {config.short()}" if config else ", shipped logic")
                cases[name] = (row_major, config, False)
        for config in (c for c in CONFIGS if not isinstance(c, TileConfig)):
            cases["swapped Dᵀ = Bᵀ·Aᵀ" + (f", {config.short()}" if config else ", shipped logic")] = (
                True, config, True)
        for name, case in cases.items():
            row = {"size": size, "case": name}
            if callable(case):
                fn = case
                reads_row_major_b(False)
            else:
                row_major, config, swap = case
                reads_row_major_b(row_major)
                x, y = (b.t(), a.t()) if swap else (a, b)

                def fn(x=x, y=y, config=config) -> torch.Tensor:
                    if config is None:
                        return gemm(x, y, precision="tf32")
                    with space.forced(config):
                        return gemm(x, y, precision="tf32")
            try:
                got = fn()
                torch.cuda.synchronize()
                if not callable(case):
                    row["kernel"] = (config or explain(x, y, precision="tf32").config).short()
                    got = got.t() if swap else got
                row["relative_error"] = float((got.double() - want).abs().max()) / scale
                if row["relative_error"] > 5e-3:
                    row["error"] = "wrong result"
                else:
                    row.update(timings(fn))
            except Exception as exc:  # noqa: BLE001 - a config that does not fit is a result too
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
        reads_row_major_b(False)
    command = "python benchmarks/tf32_layout.py OUT.json " + ",".join(map(str, sizes))
    result = {**run_record(command + (" --swapped" if swapped_only else "")),
              "rows": rows}
    write_result(out, result)


if __name__ == "__main__":
    main()
