"""Time candidate GEMM configurations on the GPU: the hand-run precursor of the tuner.

Each candidate is forced through :func:`tessera.blas.space.forced` and measured by the same
``run_case`` as ``tessera bench`` (checked against the vendor result, interleaved with it).
Results of earlier rounds: benchmarks/results/sweep-h200-round*.json.

    python benchmarks/sweep_gemm.py OUT.json [GROUP ...]
"""

from __future__ import annotations

import json
import sys

from tessera._core.timing import write_result
from tessera.blas import space
from tessera.blas.bench import GemmCase, run_case
from tessera.blas.kernels.gemm_splitk import SplitKConfig as K
from tessera.blas.kernels.gemm_streamk import StreamKConfig as S
from tessera.blas.kernels.gemm_tile import TileConfig as T
from tessera.blas.kernels.gemm_tma import TmaConfig as M

BIG_16BIT = [
    M(128, 256, 64, 8, 8, 3), M(128, 256, 64, 8, 8, 4, False, 2), M(256, 128, 64, 8, 8, 4, False, 2),
    M(256, 128, 64, 8, 8, 3, True, 2), M(128, 128, 64, 8, 4, 4),
]
GROUPS: dict[str, list[tuple[GemmCase, list[space.Config]]]] = {
    "bf16": [(GemmCase(s, s, s, "bf16"), BIG_16BIT) for s in (8192, 4096)],
    "fp16": [(GemmCase(s, s, s, "fp16"), BIG_16BIT) for s in (8192, 4096)],
    "tf32": [(GemmCase(8192, 8192, 8192, "tf32"), [
        M(128, 256, 32, 8, 8, 3, False, 2), M(128, 128, 32, 8, 8, 4), M(256, 128, 32, 8, 8, 3, False, 2)])],
    "fp32": [(GemmCase(4096, 4096, 4096, "fp32"), [
        T(64, 128, 32, 8, 8, 3), T(64, 64, 16, 8, 4, 4), T(128, 64, 32, 8, 8, 3)])],
    "fp64": [(GemmCase(4096, 4096, 4096, "fp64"), [
        T(64, 128, 16, 8, 4, 3), T(128, 64, 16, 8, 4, 3), T(64, 128, 16, 8, 4, 4)])],
    "batched": [(GemmCase(64, 64, 64, "bf16", batch=512), [
        T(64, 64, 64, 8, 4, 1), T(64, 64, 32, 8, 4, 3), T(32, 64, 64, 8, 4, 1)])],
    "kvproj": [(GemmCase(4096, 1024, 4096, "bf16"), [
        M(128, 128, 64, 8, 4, 4), M(128, 64, 64, 8, 4, 4), M(64, 128, 64, 8, 4, 4), M(128, 128, 64, 8, 8, 4),
        M(128, 256, 64, 8, 8, 3), M(128, 128, 64, 8, 8, 4, True)])],
    "tn": [(GemmCase(4096, 4096, 4096, "bf16", trans_a=True), [
        M(128, 256, 64, 8, 8, 3), M(128, 256, 64, 8, 8, 4, False, 2), M(256, 128, 64, 8, 8, 4, False, 2),
        M(128, 128, 64, 8, 4, 4), M(128, 256, 64, 8, 8, 3, True)])],
    "skinny": [(GemmCase(16, 8192, 8192, "bf16"), [
        T(16, 128, 64, 8, 4, 5), T(16, 64, 128, 8, 4, 4), T(16, 64, 64, 8, 4, 4)])],
    # split-K for M = 1 and 16 (a 16x128 tile grid is 64 programs on 132 multiprocessors)
    "skinny-splitk": [(GemmCase(m, 8192, 8192, "bf16"), [
        T(16, 128, 64, 8, 4, 5), T(16, 64, 128, 8, 4, 4),
        *(K(16, bn, bk, split, 4, s) for bn, bk in ((64, 128), (128, 64)) for split in (2, 4, 8)
          for s in (3, 4))]) for m in (1, 16)],
    # 8192³ in both 16-bit dtypes with each one's shipped configuration and the other's (bf16 ships
    # the 256×128 descriptor tile, fp16 stream-K on pointers): the fp16 8192³ target is 1.02×
    "square-8192": [(GemmCase(8192, 8192, 8192, dtype), [
        M(256, 128, 64, 8, 8, 4, False, 2), S(128, 256, 64, 0, 8, 3), S(128, 256, 64, 0, 8, 3, True),
        M(128, 256, 64, 8, 8, 3, False, 2)]) for dtype in ("fp16", "bf16")],
    "batched-graph": [(GemmCase(64, 64, 64, "bf16", batch=512), [
        T(64, 64, 64, 8, 4, 1), T(64, 64, 64, 8, 4, 2), T(64, 64, 32, 8, 4, 3), T(32, 64, 64, 8, 4, 1),
        T(64, 64, 64, 8, 8, 1)])],
}


def sweep(group: str) -> list[dict]:
    rows = []
    for case, configs in GROUPS[group]:
        for config in configs:
            try:
                with space.forced(config):
                    row = run_case(case, rounds=1)
                row["config"] = config.short()
            except Exception as exc:  # noqa: BLE001 - a failing candidate is a result, go on
                cause = f" <- {exc.__cause__!r}" if exc.__cause__ else ""
                row = {"problem": case.describe(), "config": config.short(),
                       "error": f"{type(exc).__name__}: {str(exc)[-400:]}{cause[:400]}"}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main() -> None:
    out_path, groups = sys.argv[1], sys.argv[2:] or list(GROUPS)
    results: list[dict] = []
    for group in groups:
        results += sweep(group)
        write_result(out_path, results)  # whole, after every group
    best: dict[str, dict] = {}
    for row in results:
        if "ratio" in row and row["ratio"] > best.get(row["problem"], {}).get("ratio", 0):
            best[row["problem"]] = row
    for problem, row in best.items():
        graph = f", graph x{row['ratio_graph']:.3f}" if "ratio_graph" in row else ""
        copy = f", {row['pct_copy_graph']:.1f}% copy (graph)" if "pct_copy_graph" in row else ""
        print(f"{problem:<28} {row['tessera_tflops']:7.1f} vs {row['vendor_tflops']:7.1f} TFLOP/s "
              f"x{row['ratio']:.3f}{graph}{copy}  {row['config']}")


if __name__ == "__main__":
    main()
