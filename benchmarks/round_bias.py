"""Is the first round of an A/B faster than the rest? Reads `logic_rows_ab.py` result JSONs (each
case's per-round graph times under ``rows[].ms``) and prints, per file, the geometric mean over
its shapes of torch's time in each round over its time in round 2, and the same for the A/A pair
(the first file against its second timing, ``again``) where there is one.

Why: in every such A/B of the sixty-second to sixty-fourth sessions (H100s), torch — the first
case timed for a shape, right after the GPU idled while the shape's operands were built — ran
0.3–5 % faster in round 1 than in round 2 (geometric means per file); since then
``graph_rounds`` warms the first case up before round 1 (``timing.warm_up``). The first five
A/Bs timed so (sixty-fifth session) read 0.972–0.999 in round 1 and 0.964–1.002 in round 3: torch
runs slower in round 2, the round that times it last, after Tessera's kernels, rather than
faster after an idle GPU (docs/architecture.md, "The first timing after an idle GPU").

Usage: python benchmarks/round_bias.py AB.json...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from statistics import geometric_mean as geomean


def round_ratios(rows: list[dict], case: str, reference: str | None = None) -> list[float]:
    """Per round, the geomean over shapes of ``case``'s time over round 2's (``reference`` None) or
    over ``reference``'s time in the same round."""
    rounds = len(rows[0]["ms"][case])
    if reference is None:
        return [geomean([r["ms"][case][i] / r["ms"][case][1] for r in rows]) for i in range(rounds)]
    return [geomean([r["ms"][case][i] / r["ms"][reference][i] for r in rows]) for i in range(rounds)]


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    for path in paths:
        rows = json.loads(Path(path).read_text()).get("rows") or [{}]
        if not all(isinstance(row.get("ms"), dict) for row in rows):
            print(f"{path}: not a logic_rows_ab.py result (no per-round times under rows[].ms)")
            continue
        cases = list(rows[0]["ms"])
        if "torch" not in cases or len(rows[0]["ms"]["torch"]) < 2:
            print(f"{path}: no torch case timed in two rounds or more")
            continue
        line = "torch / its round 2: " + " ".join(f"{x:.3f}" for x in round_ratios(rows, "torch"))
        if "again" in cases:
            first = cases[1]
            line += f"; {first} / again: " + " ".join(f"{x:.3f}" for x in round_ratios(rows, first, "again"))
        print(f"{path} ({len(rows)} shapes): {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
