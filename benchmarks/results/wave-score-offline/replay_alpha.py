"""The shipped wave rule replayed with the efficiency ratio damped, scale^alpha (what
prediction_error.py fits), and with the slack widened, over the picks the prefill A/B
(tune-prefill-h100-d919754/ab) and the fresh-shape wave A/B (tune-waves-fresh-h100-e8cc820) timed:
each rule's pick is looked up among the configurations the run's variants picked there and scored
against the shipped file's pick; a pick no variant made is not counted ("timed" says how many were).
Offline; run from the repository root:
PYTHONPATH=$PWD python benchmarks/results/wave-score-offline/replay_alpha.py
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

from tessera.blas import space
from tessera.tuning import logic

RESULTS = Path("benchmarks/results")
DTYPES = ("bf16", "fp16")
RUNS = [(RESULTS / f"tune-prefill-h100-d919754/ab/ab-{dt}.json", "prefill", dt) for dt in DTYPES] + \
       [(RESULTS / f"tune-waves-fresh-h100-e8cc820/ab-{dt}.json", "shipped", dt) for dt in DTYPES]
MULTIPROCESSORS = 132
GEMM = ("blas", "gemm")


def damped(alpha: float) -> logic.OpSpec:
    """blas.gemm's registration with its efficiency raised to alpha (so its ratios are)."""
    def efficiency(config: object, sizes: tuple[int, ...], multiprocessors: int) -> float | None:
        busy = space.wave_efficiency(config, sizes, multiprocessors)
        return None if busy is None else busy ** alpha
    return dataclasses.replace(logic.registered_ops()[GEMM], efficiency=efficiency)


def main() -> None:
    files = {dt: logic.load_logic(Path(f"tessera/logic/sm_90/blas.gemm.{dt}.yaml")) for dt in DTYPES}
    shipped = logic.registered_ops()[GEMM]
    for alpha in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5):
        for slack in (0.7, 1.0):
            logic._OPS[GEMM] = damped(alpha)
            line = []
            for path, base, dt in RUNS:
                rows, ratios = json.loads(path.read_text())["rows"], []
                rule = dataclasses.replace(files[dt], wave_slack=slack)
                for row in rows:
                    times = {re.match(r"Choice\(config=(.*?\)), reason=", text).group(1): row["tflops"][v]
                             for v, text in row["picks"].items()}
                    pick = repr(rule.nearest((row["m"], row["n"], row["k"], 1),
                                             multiprocessors=MULTIPROCESSORS).config)
                    if pick in times:
                        ratios.append(times[pick] / row["tflops"][base])
                geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
                line.append(f"{path.parent.name[:16]}/{dt} timed {len(ratios)}/{len(rows)} {geomean:.3f}x "
                            f"<0.95 {sum(r < 0.95 for r in ratios)}")
            print(f"alpha {alpha}, slack {slack}: " + "; ".join(line))
    logic._OPS[GEMM] = shipped


if __name__ == "__main__":
    main()
