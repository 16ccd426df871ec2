"""Where does symv's time go? Its two launches and plain reads of the same bytes, beside torch.

symv reads the stored triangle of an 8192² bf16 matrix once (64 MiB) where torch.mv reads the
whole matrix (128 MiB), yet at b4419df it ran at 0.95× torch (35.4 µs, 44 % of copy) with either
tile walk (down block rows, then down block columns). This script times, graph-replayed and
alternating over rounds:

- ``torch.mv`` on the full matrix, and a device-to-device copy of the triangle's bytes;
- ``shipped``: blas.symv; ``main`` and ``finish``: its two launches alone;
- ``tiles``: the shipped plan's tiles read and summed element-wise, nothing else (the floor of
  reading the triangle tile by tile), for a few tile edges and tiles per program;
- ``rows``: each program reads BS whole rows of the triangle from the diagonal block to the end
  (long contiguous runs), summed element-wise: the floor of a row walk.

Usage: python benchmarks/symv_floor.py OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from tessera import blas
from tessera._core.device import device_info
from tessera._core.launch import cdiv
from tessera._core.timing import git_revision, graph_ms
from tessera.blas import space
from tessera.blas.kernels import level2 as k

N = 8192
ROUNDS = 3
DEVICE = "cuda"


@triton.jit
def _tiles_kernel(a_ptr, plan_ptr, out_ptr, n, BS: tl.constexpr):
    """Read the plan's tiles (I0 … I1 − 1, J), summed element-wise; one value stored per program."""
    pid = tl.program_id(0)
    bj = tl.load(plan_ptr + 3 * pid)
    r = tl.arange(0, BS)
    cols = bj.to(tl.int64) * BS + r
    acc = tl.zeros((BS, BS), tl.float32)
    for bi in range(tl.load(plan_ptr + 3 * pid + 1), tl.load(plan_ptr + 3 * pid + 2)):
        rows = bi * BS + r.to(tl.int64)
        acc += tl.load(a_ptr + rows[:, None] * n + cols[None, :]).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(tl.sum(acc, 1), 0))


@triton.jit
def _rows_kernel(a_ptr, out_ptr, n, BS: tl.constexpr, WIDTH: tl.constexpr):
    """Rows I·BS … I·BS + BS − 1 from column I·BS to n, WIDTH columns a step, summed element-wise."""
    bi = tl.program_id(0)
    rows = bi.to(tl.int64) * BS + tl.arange(0, BS)
    acc = tl.zeros((BS, WIDTH), tl.float32)
    for j0 in range(bi * BS, n, WIDTH):
        cols = j0 + tl.arange(0, WIDTH).to(tl.int64)
        tile = tl.load(a_ptr + rows[:, None] * n + cols[None, :], mask=(cols < n)[None, :], other=0)
        acc += tile.to(tl.float32)
    tl.store(out_ptr + bi, tl.sum(tl.sum(acc, 1), 0))


def main() -> None:
    out = sys.argv[1]
    gen = torch.Generator(device=DEVICE).manual_seed(7)
    a = torch.randn(N, N, device=DEVICE, dtype=torch.bfloat16, generator=gen)
    x = torch.randn(N, device=DEVICE, dtype=torch.bfloat16, generator=gen)
    y = torch.empty(N, device=DEVICE, dtype=torch.bfloat16)
    triangle = N * (N + 1)  # bytes of the stored triangle (bf16)
    flat = torch.empty(triangle // 2, device=DEVICE, dtype=torch.bfloat16)
    flat_out = torch.empty_like(flat)
    config = space.shape_of("symv", (N,), a)
    tile = config.tile
    blocks = cdiv(N, tile)
    plan, first = k._symv_plan(blocks, config.per_program, a.device)
    programs = plan.numel() // 3
    ws_row = torch.empty(blocks * N, dtype=torch.float32, device=DEVICE)
    ws_col = torch.empty(programs * tile, dtype=torch.float32, device=DEVICE)
    sink = torch.empty(1 << 16, dtype=torch.float32, device=DEVICE)

    def main_only() -> None:
        k.symv_launch((programs,), (a, x, plan, ws_row, ws_col, N, N, 1, 0, 1),
                      {"FP64": False, "BS": tile}, config.num_warps, 3)

    def finish_only() -> None:
        k.symv_finish_launch((blocks,), (ws_row, ws_col, first, y, N, blocks, 0, 1, 1.0, 0.0),
                             k.symv_finish_constexprs(config, blocks, True, False), 4, 3)

    def tiles(bs: int, per_program: int, warps: int) -> Callable[[], object]:
        p, _ = k._symv_plan(cdiv(N, bs), per_program, a.device)
        return lambda: _tiles_kernel[(p.numel() // 3,)](a, p, sink, N, BS=bs, num_warps=warps)

    def rows(bs: int, width: int, warps: int) -> Callable[[], object]:
        return lambda: _rows_kernel[(cdiv(N, bs),)](a, sink, N, BS=bs, WIDTH=width, num_warps=warps)

    cases: dict[str, Callable[[], object]] = {
        "copy (triangle bytes)": lambda: flat_out.copy_(flat),
        "torch.mv (full matrix)": lambda: torch.mv(a, x, out=y),
        f"shipped symv ({config.short()})": lambda: blas.symv(a, x, y),
        "main launch alone": main_only,
        "finish launch alone": finish_only,
    }
    for bs, per_program, warps in ((64, 8, 4), (64, 16, 4), (128, 4, 8), (128, 8, 8), (32, 16, 4)):
        cases[f"tiles {bs} x{per_program} w{warps}"] = tiles(bs, per_program, warps)
    for bs, width, warps in ((16, 512, 4), (32, 256, 4), (64, 128, 4), (64, 256, 8)):
        cases[f"rows {bs} x {width} w{warps}"] = rows(bs, width, warps)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, fn in cases.items():
            times[name].append(graph_ms([fn]))
    rows_out = []
    copy_ms = statistics.median(times["copy (triangle bytes)"])
    for name in cases:
        ms = statistics.median(times[name])
        moved = {"copy": 2 * triangle, "torch": 2 * N * N}.get(name.split()[0], triangle)
        gbs = moved / ms / 1e6
        rows_out.append({"case": name, "graph_us": 1e3 * ms, "gbs": gbs,
                         "pct_copy": 100 * gbs / (2 * triangle / copy_ms / 1e6)})
        print(f"{name:<40} {1e3 * ms:8.1f} µs {gbs:7.0f} GB/s {rows_out[-1]['pct_copy']:6.1f}% copy")
    info = device_info()
    result = {"device": info.name, "arch": info.arch, "git": git_revision(),
              "versions": {"torch": torch.__version__, "triton": triton.__version__},
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "command": "python benchmarks/symv_floor.py OUT.json", "n": N, "rows": rows_out}
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
