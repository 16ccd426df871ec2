"""Strided-batched gemv tiles against torch.bmm on the GPU, replayed from CUDA graphs.

The issue's batched row (1024 matrices of 256² bf16, 2^26 elements) ran at 78 % of copy and 0.87×
torch.bmm on the H200 (41.2 against 35.9 µs, `blas-l12-h200-9678d9a.json`; 95 % and 1.05× on an
H100): the gemv kernel's heuristic tile, cut to the matrix (16 × 256 on 4 warps, 8 KiB a program,
16384 programs), was set from 8192² sweeps. This times every tile of a small space on a few batched
shapes, N and T, each checked against fp64 first, beside torch.bmm in the same rounds (alternating,
vendor first), and the call as the library makes it ("call": the tile it launched, read from the
recorded launch). Usage:
python benchmarks/gemv_batched_probe.py OUT.json [--rounds N]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
from collections.abc import Callable

import torch

from tessera import blas
from tessera._core import launch
from tessera._core.timing import graph_ms, run_record, write_result
from tessera.blas import space
from tessera.blas.kernels.level2 import GemvConfig

CASES = ((256, 256, 1024, False), (256, 256, 1024, True), (128, 128, 4096, False), (512, 512, 256, False))
TILES = tuple(GemvConfig(bm, bn, w, 2)
              for bm, bn, w in itertools.product((16, 32, 64, 128), (64, 128, 256, 512), (4, 8)))


def _copies(m: int, n: int, batch: int, trans: bool) -> list[tuple[torch.Tensor, ...]]:
    """Two sets of operands (each larger than L2 at these sizes: cold replays)."""
    rows, cols = (n, m) if trans else (m, n)
    return [(torch.randn(batch, m, n, device="cuda", dtype=torch.bfloat16),
             torch.randn(batch, cols, device="cuda", dtype=torch.bfloat16),
             torch.empty(batch, rows, device="cuda", dtype=torch.bfloat16)) for _ in range(2)]


def _ours(ops: tuple[torch.Tensor, ...], trans: bool) -> object:
    a, x, y = ops
    return blas.gemv(a, x, y, trans=trans)


def _torch(ops: tuple[torch.Tensor, ...], trans: bool) -> object:
    a, x, y = ops
    return torch.bmm(a.transpose(1, 2) if trans else a, x[..., None], out=y[..., None])


def _replayed_ms(call: Callable[[tuple[torch.Tensor, ...], bool], object],
                 copies: list[tuple[torch.Tensor, ...]], trans: bool) -> float:
    return graph_ms([lambda ops=ops: call(ops, trans) for ops in copies])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for m, n, batch, trans in CASES:
        copies = _copies(m, n, batch, trans)
        a, x, y = copies[0]
        want = torch.bmm((a.transpose(1, 2) if trans else a).double(), x.double()[..., None])[..., 0]
        nbytes = 2 * (a.numel() + x.numel() + y.numel())
        rows_, cols = (n, m) if trans else (m, n)
        with launch.recording() as calls:
            _ours(copies[0], trans)
        made = calls[0].constexprs  # the tile the call launched (the gemv kernel's block shape)
        shipped = f"{made['BLOCK_M']}x{made['BLOCK_N']} w{calls[0].num_warps}"
        tiles = [None, *(t for t in TILES if t.block_m <= max(16, rows_) and t.block_n <= max(64, cols))]
        times: dict[object, list[float]] = {}
        errors: dict[object, float] = {}
        for tile in tiles:  # checked first (and compiled)
            with space.forced(tile) if tile is not None else contextlib.nullcontext():
                _ours(copies[0], trans)
            errors[tile] = float((y.double() - want).norm() / want.norm())
        for _ in range(args.rounds):  # torch first in each round, then every tile
            times.setdefault("torch", []).append(_replayed_ms(_torch, copies, trans))
            for tile in tiles:
                if errors[tile] > 2e-2:
                    continue
                with space.forced(tile) if tile is not None else contextlib.nullcontext():
                    times.setdefault(tile, []).append(_replayed_ms(_ours, copies, trans))
        theirs_ms = min(times["torch"])
        for tile in tiles:
            name = "call " + shipped if tile is None else tile.short()
            if tile not in times:
                print(f"{m}x{n} x{batch} {'T' if trans else 'N'} {name}: wrong ({errors[tile]:.2e})")
                continue
            ours_ms = min(times[tile])
            row = {"m": m, "n": n, "batch": batch, "trans": trans, "tile": name, "us": ours_ms * 1e3,
                   "torch_us": theirs_ms * 1e3, "vs_torch": theirs_ms / ours_ms,
                   "gbs": nbytes / ours_ms / 1e6, "rel_err": errors[tile]}
            rows.append(row)
            print(f"{m}x{n} x{batch} {'T' if trans else 'N'} {name:<34} {row['us']:7.1f} µs "
                  f"{row['gbs']:6.0f} GB/s  torch {row['torch_us']:7.1f}  {row['vs_torch']:.3f}×", flush=True)
        record = run_record("python benchmarks/gemv_batched_probe.py OUT.json")
        write_result(args.out, {**record, "rows": rows})


if __name__ == "__main__":
    main()
