"""BLAS level 1 and 2 on the GPU beside the torch equivalent and the copy bandwidth of the same run:
the issue's rows (``tessera.blas.bench_level12``'s full preset, as ``tessera bench blas --preset
full`` runs them) and a sweep of gemv tiles, written as one committed result.

Level 1 at 2^26 fp32 elements (dot also with incx = 2 and strided-batched on 4096 rows of 2^14,
nrm2 batched alike), level 2 on 8192 × 8192 bf16 (gemv both ways, symv, ger; gemv batched on 1024
matrices of 256²) and fp32 trsv. Each routine is checked against fp64 first; then Tessera, torch
and the copy alternate over rounds, eagerly with the L2 flushed and replayed from CUDA graphs
(every operand exceeds L2, so replays are cold too; they carry no host launch cost). GB/s count
the bytes a routine must move at least (symv and trsv the stored triangle), the copy read + write.
Results before the fifty-first session came from this script's own timing loop (the copy timed
once a run, rows named by routine); ``render.py`` reads both. Usage: python
benchmarks/blas_level12.py OUT.json
"""

from __future__ import annotations

import statistics
import sys

import torch

from tessera import blas
from tessera._core.timing import flushed_ms, graph_ms, run_record, write_result
from tessera.blas import space
from tessera.blas.bench_level12 import PRESETS, ceiling_copy, format_table, run_case
from tessera.blas.kernels.level2 import GemvConfig

ROUNDS = 3
# (BLOCK_M, BLOCK_N, num_warps, programs per SM): the evidence behind space.GEMV_HEURISTIC
# (`tessera tune gemv` goes wider); per_sm 2: no column split; T: 1-2 KiB runs of each row
GEMV_TILES = {False: ((16, 256, 4, 4), (16, 512, 4, 4), (32, 512, 8, 4), (64, 256, 8, 4), (16, 512, 4, 2),
                      (32, 512, 8, 2), (16, 1024, 8, 2)),
              True: ((64, 128, 4, 8), (64, 128, 4, 4), (32, 256, 8, 4), (128, 64, 4, 8), (256, 64, 8, 4),
                     (64, 128, 4, 16), (128, 128, 8, 8), (64, 256, 8, 8), (512, 16, 4, 4), (1024, 8, 4, 4),
                     (512, 16, 8, 8))}


def gemv_sweep(m: int = 8192) -> list[dict]:
    """gemv N and T on m × m bf16 under each forced tile: GB/s eager (L2 flushed) and replayed."""
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(m, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(m, device="cuda", dtype=torch.bfloat16)
    rows = []
    for trans in (False, True):
        for tile in GEMV_TILES[trans]:
            with space.forced(GemvConfig(*tile)):
                eager = flushed_ms(lambda trans=trans: blas.gemv(a, v, w, trans=trans))
                graphed = graph_ms([lambda trans=trans: blas.gemv(a, v, w, trans=trans)])
            rows.append({"trans": trans, "tile": tile, "gbs": 2 * m * m / eager / 1e6,
                         "graph_gbs": 2 * m * m / graphed / 1e6})
            print(f"gemv {'T' if trans else 'N'} tile {tile}: {rows[-1]['gbs']:.0f} GB/s eager, "
                  f"{rows[-1]['graph_gbs']:.0f} replayed")
    return rows


def main() -> None:
    out = sys.argv[1]
    cases = PRESETS["full"]
    copy = ceiling_copy(cases)  # one ceiling (a copy of 2^26 fp32), timed beside every row
    rows = [run_case(case, ROUNDS, copy) for case in cases]
    print(format_table(rows))
    result = {**run_record("python benchmarks/blas_level12.py OUT.json"), "rows": rows,
              # the run's copy for the section's header: each row's % copy uses its own rounds'
              "copy_gbs": statistics.median(r["copy_gbs"] for r in rows),
              "gemv_sweep": gemv_sweep()}
    if all("copy_gbs_graph" in r for r in rows):
        result["copy_graph_gbs"] = statistics.median(r["copy_gbs_graph"] for r in rows)
    wrong = [r["problem"] for r in rows if not r["correct"]]
    write_result(out, result)
    if wrong:
        sys.exit(f"wrong results (relative error over the dtype's bound): {', '.join(wrong)}")


if __name__ == "__main__":
    main()
