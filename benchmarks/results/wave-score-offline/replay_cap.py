"""The shipped wave rule replayed with the efficiency ratio capped (a row's TFLOP/s scaled up at
most CAP times), over every committed `logic_rows_ab.py` A/B whose variant weighs rows by waves:
each variant's pick under the capped rule is looked up among the configurations the run timed and
scored against the run's first file ("untimed": picks no file of the run made). Then how many
picks of the shipped files a cap moves over a sweep. Offline; run from the repository root:
PYTHONPATH=$PWD python benchmarks/results/wave-score-offline/replay_cap.py
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import re
import statistics
from collections.abc import Iterator
from pathlib import Path

from tessera.tuning import logic

RESULTS = Path("benchmarks/results")
GEMM = ("blas", "gemm")
MULTIPROCESSORS = 132
CAPS = (None, 3.0, 2.0, 1.6, 1.4)
SWEEP = ([64, 128, 160, 192, 256, 288, 320, 384, 512, 640, 768, 1024, 1280, 1536, 2048, 3072, 4096, 6144,
          8192],
         [1024, 1536, 2048, 3072, 4096, 5120, 6144, 8192, 11008, 13824, 14336],
         [1024, 2048, 3072, 4096, 5120, 8192, 11008, 14336, 16384, 32768])


@contextlib.contextmanager
def capped(cap: float | None, sizes: tuple[int, ...]) -> Iterator[None]:
    """blas.gemm's efficiency with a row's efficiency raised to at least that at ``sizes`` / cap,
    so the ratio a row is scaled by at ``sizes`` is at most ``cap``."""
    shipped = logic.registered_ops()[GEMM]

    def efficiency(config: object, at: tuple[int, ...], multiprocessors: int) -> float | None:
        busy = shipped.efficiency(config, at, multiprocessors)
        if cap is None or busy is None or tuple(at) == tuple(sizes):
            return busy
        here = shipped.efficiency(config, sizes, multiprocessors)
        return busy if here is None else max(busy, here / cap)  # judged at one end: as shipped

    logic._OPS[GEMM] = dataclasses.replace(shipped, efficiency=efficiency)
    try:
        yield
    finally:
        logic._OPS[GEMM] = shipped


def pick(file: logic.LogicFile, sizes: tuple[int, ...], cap: float | None) -> str:
    with capped(cap, sizes):
        return repr(file.nearest(sizes, multiprocessors=MULTIPROCESSORS).config)


def timed(row: dict) -> dict[str, float]:
    """An A/B row's TFLOP/s by the configuration each file picked (its repr), as
    ``logic_rows_ab.py`` writes the picks."""
    return {match.group(1): row["tflops"][key] for key, text in row["picks"].items()
            if (match := re.match(r"Choice\(config=(.*?\)), reason=", text))}


def variant(path: Path, name: str) -> logic.LogicFile | None:
    """The run's file ``name`` (a device path in the JSON) among the copies beside it."""
    up = path.parent.parent
    for folder in (path.parent, path.parent / "variants", up / "variants", up):
        if (folder / name).exists():
            return logic.load_logic(folder / name)
    return None


def replay(path: Path) -> None:
    run = json.loads(path.read_text())
    names = list(run.get("files", {}))
    for name in names[1:]:
        file = variant(path, Path(run["files"][name]).name)
        if name == "again" or file is None or file.wave_slack is None:
            continue
        cells = []
        for cap in CAPS:
            ratios, untimed = [], 0
            for row in run["rows"]:
                times = timed(row)
                chosen = pick(file, (row["m"], row["n"], row["k"], row.get("batch", 1)), cap)
                if chosen in times:
                    ratios.append(times[chosen] / row["tflops"][names[0]])
                else:
                    untimed += 1
            cells.append(f"{cap or 'none'}: {statistics.geometric_mean(ratios):.3f} "
                         f"(untimed {untimed}, <0.95 {sum(r < 0.95 for r in ratios)})")
        print(f"{path.relative_to(RESULTS)} {name} ({len(run['rows'])} shapes) | " + " | ".join(cells))


def ab_runs() -> Iterator[Path]:
    """Every committed `logic_rows_ab.py` result (a JSON with the files' picks), in path order."""
    for path in sorted(RESULTS.rglob("*.json")):
        if '"picks"' in path.read_text(errors="ignore"):
            yield path


def main() -> None:
    print("cap on the waves' ratio: geomean over the run's first file (untimed picks, picks under 0.95)")
    for path in ab_runs():
        replay(path)
    print("\npicks of the shipped files a cap moves over M x N x K =", " x ".join(str(len(s)) for s in SWEEP))
    for dtype in ("bf16", "fp16", "tf32"):
        file = logic.load_logic(Path(f"tessera/logic/sm_90/blas.gemm.{dtype}.yaml"))
        for cap in CAPS[1:]:
            moved = [sizes for sizes in itertools.product(*SWEEP, [1])
                     if pick(file, sizes, None) != pick(file, sizes, cap)]
            first = ", ".join("x".join(map(str, sizes[:3])) for sizes in moved[:6])
            print(f"{dtype} cap {cap}: {len(moved)} moved", first)


if __name__ == "__main__":
    main()
