"""The wave rule's reach with a floor, replayed over every committed `logic_rows_ab.py` A/B.

A file with ``wave_slack`` lets the rows within (nearest distance + slack) compete, so a row very
near a shape narrows the competition: the sixty-seventh session's fp16 M = 320 rows
(`../tune-wide320-fp16-h100-0597fbf/`) took the M = 1024 rows' `gemm_ws` out of it at M 352-384
(0.60-0.94x). With a floor, the reach is max(nearest distance, FLOOR) + slack. For each run and
each of its files that weighs by waves, each shape's pick under a floor is looked up among the
configurations the run timed there and scored against that file's own (as measured) pick;
"untimed": picks no file of the run made. Offline; run from the repository root:
PYTHONPATH=$PWD python benchmarks/results/wave-score-offline/replay_reach.py
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
FLOORS = (0.2, 0.35, 0.5)
_spec = importlib.util.spec_from_file_location("replay_cap", Path(__file__).with_name("replay_cap.py"))
replay_cap = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(replay_cap)


def pick(file: logic.LogicFile, sizes: tuple[int, ...], floor: float | None) -> str:
    """The configuration ``file`` chooses at ``sizes`` with the reach floored (None: as shipped).
    The reach is the nearest distance plus the slack, so raising the slack by what the nearest
    row is short of the floor is the floored reach."""
    if floor is not None and file.wave_slack is not None:
        nearest = dataclasses.replace(file, wave_slack=None).nearest(sizes)
        if nearest is not None and 0 < nearest.distance < floor:
            file = dataclasses.replace(file, wave_slack=file.wave_slack + floor - nearest.distance)
    return repr(file.nearest(sizes, multiprocessors=MULTIPROCESSORS).config)


def replay(path: Path) -> None:
    run = json.loads(path.read_text())
    for name, device_path in run.get("files", {}).items():
        file = replay_cap.variant(path, Path(device_path).name)
        if name == "again" or file is None or file.wave_slack is None:
            continue
        cells = []
        for floor in FLOORS:
            ratios, untimed, moved = [], 0, 0
            for row in run["rows"]:
                times: dict[str, float] = {}
                for key, text in row["picks"].items():
                    config = text.split(", reason=")[0].removeprefix("Choice(config=")
                    if key == name:  # this file's own time where another picked alike
                        times[config] = row["tflops"][key]
                    else:
                        times.setdefault(config, row["tflops"][key])
                sizes = (row["m"], row["n"], row["k"], row.get("batch", 1))
                chosen = pick(file, sizes, floor)
                if chosen != pick(file, sizes, None):
                    moved += 1
                if chosen in times:
                    ratios.append(times[chosen] / row["tflops"][name])
                else:
                    untimed += 1
            worst = min(ratios, default=1.0)
            mean = statistics.geometric_mean(ratios)
            cells.append(f"{floor}: {mean:.3f} (moved {moved}, untimed {untimed}, least {worst:.3f})")
        print(f"{path.relative_to(RESULTS)} {name} ({len(run['rows'])} shapes) | " + " | ".join(cells))


def main() -> None:
    print("reach floored: geomean over each file's own picks (picks moved, untimed, least ratio)")
    for path in replay_cap.ab_runs():
        replay(path)


if __name__ == "__main__":
    main()
