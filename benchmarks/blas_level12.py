"""BLAS level 1 and 2 on the GPU beside the torch equivalent and the copy bandwidth of the same run.

Level 1 at 2^26 fp32 elements, level 2 on 8192 × 8192 bf16 (gemv both ways, symv, ger) and fp32
trsv; batched rows (the same bytes as 4096 vectors of 2^14, 1024 matrices of 256²). GB/s counts
the bytes a routine must move at least (e.g. dot reads x and y; nrm2 reads x once,
though its scaling pass reads it twice; symv the stored triangle — runs before 5759988 counted the
whole matrix there); the copy figure counts read + write. Both sides are timed two ways, Tessera
and torch alternating over rounds: eager with triton.testing.do_bench (median, L2 flushed), and
replayed from a CUDA graph (``graph_*`` keys, from 2026-12-02 on). Every operand here exceeds the
L2 cache, so graph replays are cold too; they carry neither the host's launch cost (a 35 µs gemv
is host-bound when called eagerly) nor the write-back of the dirty lines do_bench's flush leaves
in L2 (≈10 µs added to any kernel timed after it). Usage: python benchmarks/blas_level12.py OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable

import torch

from tessera import blas
from tessera._core.timing import flushed_ms, graph_ms, run_record
from tessera.blas import space
from tessera.blas.kernels.level2 import GemvConfig

N = 1 << 26
M = 8192
ROUNDS = 3


def graphed_ms(fn: Callable[[], object]) -> float | None:
    """Milliseconds per call replayed from a CUDA graph, None if the call cannot be captured."""
    try:
        return graph_ms([fn])
    except RuntimeError as exc:
        print(f"  (no graph: {str(exc).splitlines()[0][:100]})")
        return None


def case(name: str, nbytes: int, ours: Callable[[], object], theirs: Callable[[], object] | None,
         torch_name: str) -> dict:
    mine, vendor, mine_graph, vendor_graph = [], [], [], []
    for _ in range(ROUNDS):
        mine.append(flushed_ms(ours))
        mine_graph.append(graphed_ms(ours))
        if theirs is not None:
            vendor.append(flushed_ms(theirs))
            vendor_graph.append(graphed_ms(theirs))
    ms = statistics.median(mine)
    row = {"routine": name, "bytes": nbytes, "ms": ms, "gbs": nbytes / ms / 1e6, "torch": torch_name}
    if vendor:
        row["torch_ms"] = statistics.median(vendor)
        row["torch_gbs"] = nbytes / row["torch_ms"] / 1e6
        row["vs_torch"] = row["torch_ms"] / ms
    if None not in mine_graph:
        row["graph_ms"] = statistics.median(mine_graph)
        row["graph_gbs"] = nbytes / row["graph_ms"] / 1e6
        if vendor_graph and None not in vendor_graph:
            row["graph_torch_ms"] = statistics.median(vendor_graph)
            row["graph_vs_torch"] = row["graph_torch_ms"] / row["graph_ms"]
    return row


def main() -> None:
    out = sys.argv[1]
    x, y = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    xb, yb = x.view(4096, -1), y.view(4096, -1)
    copy_ms = statistics.median(flushed_ms(lambda: y.copy_(x)) for _ in range(ROUNDS))
    copy_gbs = 2 * 4 * N / copy_ms / 1e6
    copy_graph_ms = statistics.median(graph_ms([lambda: y.copy_(x)]) for _ in range(ROUNDS))
    copy_graph_gbs = 2 * 4 * N / copy_graph_ms / 1e6
    f4 = 4 * N
    rows = [
        case("axpy", 3 * f4, lambda: blas.axpy(0.5, x, y), lambda: y.add_(x, alpha=0.5), "y.add_(x, alpha)"),
        case("scal", 2 * f4, lambda: blas.scal(1.0001, x), lambda: x.mul_(1.0001), "x.mul_(a)"),
        case("copy", 2 * f4, lambda: blas.copy(x, y), lambda: y.copy_(x), "y.copy_(x)"),
        case("swap", 4 * f4, lambda: blas.swap(x, y), None, "-"),
        case("rot", 4 * f4, lambda: blas.rot(x, y, 0.6, 0.8), None, "-"),
        case("dot", 2 * f4, lambda: blas.dot(x, y), lambda: torch.dot(x, y), "torch.dot"),
        case("nrm2", f4, lambda: blas.nrm2(x), lambda: torch.linalg.vector_norm(x), "vector_norm"),
        case("asum", f4, lambda: blas.asum(x), lambda: torch.linalg.vector_norm(x, 1), "vector_norm(x, 1)"),
        case("iamax", f4, lambda: blas.iamax(x), lambda: x.abs().argmax(), "x.abs().argmax()"),
        case("dot incx=2 (2^25)", 2 * f4 // 2, lambda: blas.dot(x, y, incx=2, incy=2),
             lambda: torch.dot(x[::2], y[::2]), "torch.dot(x[::2], y[::2])"),
        # strided-batched: 4096 rows of 2^14 (the same 2^26 elements), one result a row
        case("dot batched 4096×2^14", 2 * f4, lambda: blas.dot(xb, yb), lambda: torch.linalg.vecdot(xb, yb),
             "linalg.vecdot"),
        case("nrm2 batched 4096×2^14", f4, lambda: blas.nrm2(xb),
             lambda: torch.linalg.vector_norm(xb, dim=-1), "vector_norm(dim=-1)"),
    ]
    a = torch.randn(M, M, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(M, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(M, device="cuda", dtype=torch.bfloat16)
    mat = 2 * M * M
    ab = a.view(1024, 256, 256)
    vb = torch.randn(1024, 256, device="cuda", dtype=torch.bfloat16)
    wb = torch.empty_like(vb)
    sweep = []  # gemv tiles (the evidence behind space.GEMV_HEURISTIC; `tessera tune gemv` goes wider)
    candidates = {False: ((16, 256, 4, 4), (16, 512, 4, 4), (32, 512, 8, 4), (64, 256, 8, 4),
                          (16, 512, 4, 2), (32, 512, 8, 2), (16, 1024, 8, 2)),  # per_sm 2: no column split
                  True: ((64, 128, 4, 8), (64, 128, 4, 4), (32, 256, 8, 4), (128, 64, 4, 8), (256, 64, 8, 4),
                         (64, 128, 4, 16), (128, 128, 8, 8), (64, 256, 8, 8),
                         (512, 16, 4, 4), (1024, 8, 4, 4), (512, 16, 8, 8))}  # 1-2 KiB runs of each row
    for contiguous, trans in ((False, False), (True, True)):
        for tile in candidates[contiguous]:  # (BLOCK_M, BLOCK_N, num_warps, programs per SM)
            with space.forced(GemvConfig(*tile)):
                ms = flushed_ms(lambda trans=trans: blas.gemv(a, v, w, trans=trans))
                graphed = graph_ms([lambda trans=trans: blas.gemv(a, v, w, trans=trans)])
            sweep.append({"trans": trans, "tile": tile, "gbs": mat / ms / 1e6,
                          "graph_gbs": mat / graphed / 1e6})
    for row in sweep:
        print(f"gemv {'T' if row['trans'] else 'N'} tile {row['tile']}: {row['gbs']:.0f} GB/s")
    rows += [
        case("gemv N bf16 8192²", mat, lambda: blas.gemv(a, v, w), lambda: torch.mv(a, v, out=w), "torch.mv"),
        case("gemv T bf16 8192²", mat, lambda: blas.gemv(a, v, w, trans=True),
             lambda: torch.mv(a.t(), v, out=w), "torch.mv(a.t())"),
        case("symv bf16 8192²", M * (M + 1), lambda: blas.symv(a, v, w), lambda: torch.mv(a, v, out=w),
             "torch.mv (full matrix)"),  # bytes: the stored triangle, read once (from 5759988 on)
        case("ger bf16 8192²", 2 * mat, lambda: blas.ger(0.001, v, w, a), lambda: a.addr_(v, w, alpha=0.001),
             "a.addr_"),
        # strided-batched: the same bytes as 1024 matrices of 256², one vector each
        case("gemv batched 1024×256² bf16", mat, lambda: blas.gemv(ab, vb, wb),
             lambda: torch.bmm(ab, vb[:, :, None]), "torch.bmm"),
    ]
    t = (torch.randn(M, M, device="cuda") * 0.01 + torch.eye(M, device="cuda")).triu()
    b = torch.randn(M, device="cuda")
    rows.append(case("trsv fp32 8192² upper", 4 * M * M // 2, lambda: blas.trsv(t, b.clone()),
                     lambda: torch.linalg.solve_triangular(t, b[:, None], upper=True),
                     "solve_triangular"))
    result = {**run_record("python benchmarks/blas_level12.py OUT.json"),

              "copy_gbs": copy_gbs, "copy_graph_gbs": copy_graph_gbs, "rows": rows,
              "gemv_sweep": sweep}
    for row in rows:
        row["pct_copy"] = 100 * row["gbs"] / copy_gbs
        ratio = f"{row['vs_torch']:.2f}" if "vs_torch" in row else "-"
        graphed = ""
        if "graph_gbs" in row:
            row["graph_pct_copy"] = 100 * row["graph_gbs"] / copy_graph_gbs
            graphed = f" | graph {row['graph_gbs']:6.0f} GB/s {row['graph_pct_copy']:5.1f}% copy"
            if "graph_vs_torch" in row:
                graphed += f" vs torch {row['graph_vs_torch']:.2f}"
        print(f"{row['routine']:<24} {row['gbs']:8.0f} GB/s {row['pct_copy']:6.1f}% copy  vs torch {ratio}"
              + graphed)
    print(f"copy {copy_gbs:.0f} GB/s eager, {copy_graph_gbs:.0f} GB/s graph")
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
