"""Which sizes of a sweep two versions of a logic file choose differently for (nearest row, every
solution usable): the shapes an A/B of the two (``logic_rows_ab.py``) should time. Runs anywhere.

Usage: python benchmarks/logic_moves.py BEFORE.yaml AFTER.yaml [--sides 1024,1536,…] [--ms …] [--ks …]
                                       [--k-max K] [--multiprocessors N] [--sample N --seed S]
Prints the moved MxNxK, comma-separated (``logic_rows_ab.py``'s SHAPES; with ``--sample``, N of
them drawn at random, sorted), and a count by (before, after) kernel to standard error.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import random
import sys

from tessera.tuning import logic

SIDES = "1024,1536,2048,3072,4096,6144,8192"
KS = "1024,2048,4096,8192,12288,16384,24576,32768,49152,65536"
MULTIPROCESSORS = 132  # the H100 SXM's and the H200's


def kind(match: logic.Match | None) -> str:
    """The chosen configuration's family (its class name), or "none" beyond max_distance."""
    return "none" if match is None else type(match.config).__name__


def moved(before: logic.LogicFile, after: logic.LogicFile, sides: list[int], ks: list[int],
          multiprocessors: int = MULTIPROCESSORS, ms: list[int] | None = None
          ) -> tuple[list[str], collections.Counter]:
    """The MxNxK of the sweep (M from ``ms``, default ``sides``; N from ``sides``) whose choice
    differs, and a count by (before, after) family; a file with ``wave_slack`` weighs its rows for
    a device of ``multiprocessors`` SMs."""
    shapes, kinds = [], collections.Counter()
    for m, n, k in itertools.product(ms or sides, sides, ks):
        old, new = (version.nearest((m, n, k, 1), multiprocessors=multiprocessors)
                    for version in (before, after))
        if getattr(old, "config", None) != getattr(new, "config", None):
            shapes.append(f"{m}x{n}x{k}")
            kinds[(kind(old), kind(new))] += 1
    return shapes, kinds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--sides", default=SIDES, help="M and N values, comma-separated")
    parser.add_argument("--ms", default=None, help="M values apart from N's (default: the sides)")
    parser.add_argument("--ks", default=KS, help="K values, comma-separated")
    parser.add_argument("--k-max", type=int, default=None, help="only shapes with K at most this")
    parser.add_argument("--multiprocessors", type=int, default=MULTIPROCESSORS,
                        help="the device's SM count, for a file with wave_slack")
    parser.add_argument("--sample", type=int, default=None, help="print only this many, drawn at random")
    parser.add_argument("--seed", type=int, default=0, help="the draw's seed (with --sample)")
    args = parser.parse_args()
    sides = [int(x) for x in args.sides.split(",")]
    ms = [int(x) for x in args.ms.split(",")] if args.ms else sides
    ks = [int(x) for x in args.ks.split(",") if args.k_max is None or int(x) <= args.k_max]
    shapes, kinds = moved(logic.load_logic(args.before), logic.load_logic(args.after), sides, ks,
                          args.multiprocessors, ms)
    for (old_kind, new_kind), count in kinds.most_common():
        print(f"{count:4d} {old_kind} -> {new_kind}", file=sys.stderr)
    print(f"{len(shapes)} of {len(ms) * len(sides) * len(ks)} shapes moved", file=sys.stderr)
    print(",".join(sample(shapes, args.sample, args.seed)))


def sample(shapes: list[str], count: int | None, seed: int) -> list[str]:
    """``count`` of ``shapes`` drawn with ``seed`` (all of them without a count), in sweep order:
    an A/B of moved shapes that fits a device call, reproducible from its seed."""
    if count is None or count >= len(shapes):
        return shapes
    chosen = set(random.Random(seed).sample(shapes, count))
    return [shape for shape in shapes if shape in chosen]


if __name__ == "__main__":
    main()
