"""The M = 128 rows of `../tune-narrow128-{bf16,fp16}-h100-0597fbf/` replayed in every subset:
each subset's file (the file before plus those rows) picks a configuration for every shape the
two A/Bs timed (the tuned rows' own moves and the fresh draw); a pick that either file of the run
picked there is scored by that run's time, against the file before ("untimed": a pick neither
made). Offline; run from the repository root:
PYTHONPATH=$PWD python benchmarks/results/narrow128-offline/replay_rows.py
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import statistics
from pathlib import Path

from tessera.tuning import logic

RESULTS = Path("benchmarks/results")
MULTIPROCESSORS = 132
SHIPPED = ((128, 1536, 4096, 1), (128, 2048, 4096, 1))  # the subset shipped: its shapes under 1.0 listed


def timed(run: dict) -> list[tuple[tuple[int, ...], dict[str, float], float, float]]:
    """Each row's sizes, its picks' TFLOP/s by configuration, the file before's and torch's."""
    rows = []
    for row in run["rows"]:
        times: dict[str, float] = {}
        for key, text in row["picks"].items():  # the file before first: its own time where picked alike
            if match := re.match(r"Choice\(config=(.*?\)), reason=", text):
                times.setdefault(match.group(1), row["tflops"][key])
        sizes = (row["m"], row["n"], row["k"], row.get("batch", 1))
        rows.append((sizes, times, row["tflops"]["before"], row["tflops"]["torch"]))
    return rows


def main() -> None:
    for dtype in ("fp16", "bf16"):
        folder = RESULTS / f"tune-narrow128-{dtype}-h100-0597fbf"
        before = logic.load_logic(folder / "variants" / f"{dtype}-before.yaml")
        narrow = logic.load_logic(folder / "variants" / f"{dtype}-narrow.yaml")
        old = {row.sizes for row in before.table}
        new = [row.sizes for row in narrow.table if row.sizes not in old]
        shapes = timed(json.loads((folder / f"ab-{dtype}.json").read_text()))
        shapes += timed(json.loads((folder / "fresh" / f"ab-{dtype}.json").read_text()))
        print(f"{dtype}: {len(shapes)} shapes (the subset's geomean over the file before, its least,")
        print("  picks under 0.95, picks neither file made)")
        for count in range(len(new) + 1):
            for kept in itertools.combinations(new, count):
                dropped = set(new) - set(kept)
                table = tuple(row for row in narrow.table if row.sizes not in dropped)
                file = dataclasses.replace(narrow, table=table)
                ratios, untimed = [], 0
                for sizes, times, base, _ in shapes:
                    chosen = repr(file.nearest(sizes, multiprocessors=MULTIPROCESSORS).config)
                    if chosen in times:
                        ratios.append(times[chosen] / base)
                    else:
                        untimed += 1
                        ratios.append(float("nan"))
                if set(kept) == set(SHIPPED):
                    shipped = [(ratio, sizes) for (sizes, *_), ratio in zip(shapes, ratios, strict=True)]
                    torch = [(base * ratio / vendor, base / vendor) for (_, _, base, vendor), ratio
                             in zip(shapes, ratios, strict=True) if ratio == ratio]
                names = " + ".join("x".join(map(str, sizes[:3])) for sizes in kept) or "none"
                scored = [r for r in ratios if r == r]
                print(f"  {names:<60} {statistics.geometric_mean(scored):.3f} min {min(scored):.3f} "
                      f"<0.95 {sum(r < 0.95 for r in scored):2d} untimed {untimed}")
        losers = [f"{'x'.join(map(str, sizes[:3]))} {ratio:.3f}"
                  for ratio, sizes in sorted(shipped) if ratio < 1]
        print("  the shipped subset under 1.0:", ", ".join(losers))
        print(f"  the shipped subset against torch: {statistics.geometric_mean(b for _, b in torch):.3f} → "
              f"{statistics.geometric_mean(a for a, _ in torch):.3f} (its timed shapes)")


if __name__ == "__main__":
    main()
