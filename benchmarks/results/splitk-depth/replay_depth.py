"""``min_split_depth`` replayed over every committed `logic_rows_ab.py` A/B: each run's files with
the limit set pick a configuration for each timed shape; where that pick differs from the file's
own (the limit moved it) and the run timed it (some file of the run picked it there), its time is
compared with the file's own pick's. Offline; run from the repository root:
PYTHONPATH=$PWD python benchmarks/results/splitk-depth/replay_depth.py
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import statistics
from pathlib import Path

from tessera.tuning import logic

RESULTS = Path("benchmarks/results")
MULTIPROCESSORS = 132
# one depth, or steps by M (from M up: depth); the steps added in the sixty-ninth session, after
# its A/B found the skinny (M 1-16) moves of 512 mixed: wins at K <= 768, losses at K 1024-1536
DEPTHS = (256, 512, 1024, ((1, 256), (32, 512)), ((1, 128), (32, 512)), ((1, 128), (32, 256)))
_spec = importlib.util.spec_from_file_location("replay_cap", RESULTS / "wave-score-offline" / "replay_cap.py")
replay_cap = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(replay_cap)  # type: ignore[union-attr]


def main() -> None:
    moved_all: dict[tuple[str, object], list[float]] = {}  # (dtype, depth) → timed moves' ratios
    untimed_all: dict[tuple[str, object], int] = {}
    print("run file | per depth: moved picks, timed, their time over the file's own pick (geomean), "
          "under 0.95")
    for path in replay_cap.ab_runs():
        run = json.loads(path.read_text())
        dtype = run.get("dtype")
        if dtype not in ("bf16", "fp16", "tf32", "fp32"):
            continue
        for name, device_path in run.get("files", {}).items():
            file = replay_cap.variant(path, Path(device_path).name)
            if name == "again" or file is None:
                continue
            cells = []
            for depth in DEPTHS:
                ruled = dataclasses.replace(file, min_split_depth=depth)
                ratios, moved = [], 0
                for row in run["rows"]:
                    times = replay_cap.timed(row)
                    sizes = (row["m"], row["n"], row["k"], row.get("batch", 1))
                    own = file.nearest(sizes, multiprocessors=MULTIPROCESSORS)
                    new = ruled.nearest(sizes, multiprocessors=MULTIPROCESSORS)
                    if own is None or new is None or own.config == new.config:
                        continue
                    moved += 1
                    mine, theirs = times.get(repr(own.config)), times.get(repr(new.config))
                    if mine and theirs:
                        ratios.append(theirs / mine)
                    else:
                        untimed_all[dtype, depth] = untimed_all.get((dtype, depth), 0) + 1
                moved_all.setdefault((dtype, depth), []).extend(ratios)
                if moved:
                    mean = statistics.geometric_mean(ratios) if ratios else float("nan")
                    cells.append(f"{logic.rule_text(depth)}: {moved} moved, {len(ratios)} timed, {mean:.3f}, "
                                 f"{sum(r < 0.95 for r in ratios)}")
            if cells:
                print(f"{path.relative_to(RESULTS)} {name} | " + " | ".join(cells))
    for dtypes in (("bf16", "fp16", "tf32"), ("bf16", "fp16"), ("tf32",)):
        print(f"\n{' + '.join(dtypes)}:")
        for depth in DEPTHS:
            ratios = [r for dtype in dtypes for r in moved_all.get((dtype, depth), [])]
            untimed = sum(untimed_all.get((dtype, depth), 0) for dtype in dtypes)
            mean = statistics.geometric_mean(ratios) if ratios else float("nan")
            print(f"min_split_depth {logic.rule_text(depth)}: {len(ratios)} timed moves, geomean {mean:.3f} "
                  f"over the file's own pick, under 0.95: {sum(r < 0.95 for r in ratios)}, over 1.05: "
                  f"{sum(r > 1.05 for r in ratios)}, untimed moves {untimed}")


if __name__ == "__main__":
    main()
