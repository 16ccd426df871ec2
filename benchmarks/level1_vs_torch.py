"""Level-1 routines at 2^26 fp32 beside torch, both timed two ways over five rounds.

For deciding a change to a level-1 kernel: run it once per variant, in one device call, variants
alternating (a variant being the kernel file swapped in between processes). Each routine is timed
graph-replayed (``graph_ms``; every operand exceeds the L2 cache, so replays are cold) and eagerly
with the L2 flushed before each call (``flushed_ms``), its torch equivalent likewise in the same
round. ``--map-sweep``: also axpy, scal and copy forced to each element-wise launch shape (block,
warps; the element-wise kernel takes one block a program), beside torch in the same round (three
rounds each), and swap and rot (no torch equivalent); ``--map-shapes "B,W;…"`` these shapes only.

First used (as a helper script of the same loop) for the eviction hints of the thirty-first
session (``l1-hints-h200-7171676/``); ``--map-sweep`` for the element-wise launch shapes
(``l1-map-sweep-h200-*.json``).

Usage: python benchmarks/level1_vs_torch.py OUT.json [--map-sweep [--map-shapes "B,W;…"]]
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable

import torch

from tessera import blas
from tessera._core.timing import flushed_ms, graph_ms, run_record, write_result
from tessera.blas import space
from tessera.blas.kernels.level1 import VectorConfig

N = 1 << 26
ROUNDS = 5
SWEEP_ROUNDS = 3
MAP_SHAPES = [(block, warps) for block in (1024, 2048, 4096, 8192) for warps in (2, 4, 8)
              if block // (32 * warps) >= 4]


def timed(ours: Callable[[], object], theirs: Callable[[], object] | None,
          rounds: int = ROUNDS) -> dict[str, float]:
    """Median graph-replayed and flushed milliseconds of ours (and theirs) over ``rounds`` rounds."""
    keys = ("graph_ms", "eager_ms", "graph_torch_ms", "eager_torch_ms")
    times: dict[str, list[float]] = {key: [] for key in keys}
    for _ in range(rounds):
        times["graph_ms"].append(graph_ms([ours]))
        times["eager_ms"].append(flushed_ms(ours))
        if theirs is not None:
            times["graph_torch_ms"].append(graph_ms([theirs]))
            times["eager_torch_ms"].append(flushed_ms(theirs))
    row = {key: statistics.median(values) for key, values in times.items() if values}
    if theirs is not None:
        row["graph_vs_torch"] = row["graph_torch_ms"] / row["graph_ms"]
        row["eager_vs_torch"] = row["eager_torch_ms"] / row["eager_ms"]
    return row


def _map_shapes() -> list[tuple[int, int]]:
    """``--map-shapes "B,W;…"`` if given, else every shape of MAP_SHAPES."""
    if "--map-shapes" not in sys.argv:
        return MAP_SHAPES
    spec = sys.argv[sys.argv.index("--map-shapes") + 1]
    return [(int(b), int(w)) for b, w in (shape.split(",") for shape in spec.split(";") if shape.strip())]


def show(name: str, row: dict[str, float]) -> None:
    ratio = (f" | vs torch graph {row['graph_vs_torch']:.3f} eager {row['eager_vs_torch']:.3f}"
             if "graph_vs_torch" in row else "")
    print(f"{name:<28} graph {1000 * row['graph_ms']:8.2f} µs  eager {1000 * row['eager_ms']:8.2f} µs{ratio}",
          flush=True)


def main() -> None:
    out, sweep = sys.argv[1], "--map-sweep" in sys.argv
    x, y = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    maps = {"axpy": (lambda: blas.axpy(0.5, x, y), lambda: y.add_(x, alpha=0.5)),
            "scal": (lambda: blas.scal(1.0001, x), lambda: x.mul_(1.0001)),
            "copy": (lambda: blas.copy(x, y), lambda: y.copy_(x)),
            "swap": (lambda: blas.swap(x, y), None),
            "rot": (lambda: blas.rot(x, y, 0.6, 0.8), None)}
    cases = {**maps,
             "dot": (lambda: blas.dot(x, y), lambda: torch.dot(x, y)),
             "nrm2": (lambda: blas.nrm2(x), lambda: torch.linalg.vector_norm(x)),
             "asum": (lambda: blas.asum(x), lambda: torch.linalg.vector_norm(x, 1)),
             "iamax": (lambda: blas.iamax(x), lambda: x.abs().argmax())}
    rows = {}
    for name, (ours, theirs) in cases.items():
        rows[name] = timed(ours, theirs)
        show(name, rows[name])
    shapes = []
    if sweep:
        for block, warps in _map_shapes():
            for name, (ours, theirs) in maps.items():
                with space.forced(VectorConfig(block, 1, warps)):
                    row = timed(ours, theirs, SWEEP_ROUNDS)
                shapes.append({"routine": name, "block": block, "num_warps": warps, **row})
                show(f"{name} block {block} w{warps}", row)
    shapes_arg = sys.argv[sys.argv.index("--map-shapes") + 1] if "--map-shapes" in sys.argv else None
    command = "python benchmarks/level1_vs_torch.py OUT.json" + (" --map-sweep" if sweep else "") + (
        f' --map-shapes "{shapes_arg}"' if shapes_arg else "")
    write_result(out, {**run_record(command), "n": N, "rounds": ROUNDS, "sweep_rounds": SWEEP_ROUNDS,
                       "rows": rows, "map_shapes": shapes})


if __name__ == "__main__":
    main()
