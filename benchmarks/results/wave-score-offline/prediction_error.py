"""How well the wave rule's score predicts a row's speed away from its size, over every pick the
committed A/B runs timed (logic_rows_ab.py's JSONs under benchmarks/results/): a pick served by a
row at another size, whose configuration ``space.wave_efficiency`` judges at both sizes, was
predicted to run the row's TFLOP/s times the efficiency here over the efficiency at the row; the
error is measured / predicted. Grouped by the predicted scale (efficiency here / at the row), it
shows whether the scale is to be trusted, and the exponent alpha that fits measured ≈ row ·
scale^alpha best (least squares in logs). Offline; run from the repository root:
PYTHONPATH=$PWD python benchmarks/results/wave-score-offline/prediction_error.py
"""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

from tessera.blas import space
from tessera.tuning import logic

MULTIPROCESSORS = 132  # every run was on an H100 SXM
RESULTS = Path("benchmarks/results")
PICK = re.compile(r"Choice\(config=(\w+)\((.*?)\), reason=.*row (\d+)x(\d+)x(\d+)x(\d+) solution")


def row_speeds() -> dict[tuple, float]:
    """(dtype, row sizes, config repr) -> the row's measured TFLOP/s, from every GEMM logic file
    shipped or kept with a result (a row's figure never changes once tuned)."""
    speeds: dict[tuple, float] = {}
    paths = sorted(Path("tessera/logic/sm_90").glob("blas.gemm.*.yaml")) + sorted(RESULTS.glob("**/*.yaml"))
    for path in paths:
        try:
            lf = logic.load_logic(path)
        except Exception:  # noqa: BLE001 - results hold other ops' files and journals' leftovers
            continue
        if (lf.library, lf.op) != ("blas", "gemm"):
            continue
        for row in lf.table:
            key = (lf.problem.get("dtype"), tuple(row.sizes), repr(lf.solutions[row.solution]))
            speeds.setdefault(key, row.measured.get("tflops"))
    return speeds


def picks() -> list[tuple[float, float, float]]:
    """(row TFLOP/s, predicted scale, measured TFLOP/s), one per distinct timed pick."""
    speeds, seen = row_speeds(), {}
    families = {cls.__name__: cls for cls in logic.registered_ops()[("blas", "gemm")].families.values()}
    for path in sorted(RESULTS.glob("**/*.json")):
        if "ieee-by-mistake" in str(path):
            continue
        try:
            doc = json.loads(path.read_text())
        except ValueError:
            continue
        rows = doc.get("rows") if isinstance(doc, dict) else None
        if not (isinstance(rows, list) and rows and isinstance(rows[0], dict) and "picks" in rows[0]):
            continue
        dtype = doc.get("dtype") or ("fp16" if "fp16" in path.name else "bf16")
        for r in rows:
            here = (r["m"], r["n"], r["k"], 1)
            for variant, text in r["picks"].items():
                found = PICK.match(text)
                if not found or found.group(1) not in families:
                    continue
                config = eval(f"{found.group(1)}({found.group(2)})", dict(families))  # our own reprs
                row = tuple(int(x) for x in found.group(3, 4, 5, 6))
                speed = speeds.get((dtype, row, repr(config)))
                here_eff, row_eff = (space.wave_efficiency(config, s, MULTIPROCESSORS) for s in (here, row))
                if row == here or speed is None or here_eff is None or row_eff is None:
                    continue
                seen[(dtype, here, repr(config), row)] = (speed, here_eff / row_eff, r["tflops"][variant])
    return list(seen.values())


def main() -> None:
    data = picks()
    xs = [math.log(scale) for _, scale, _ in data]
    ys = [math.log(measured / speed) for speed, _, measured in data]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    alpha = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    errors = [y - x for x, y in zip(xs, ys, strict=True)]
    print(f"{len(data)} picks served by a row at another size; measured / predicted, geomean "
          f"{math.exp(sum(errors) / len(errors)):.3f}")
    print(f"fit: measured = row * scale^{alpha:.2f} * {math.exp(my - alpha * mx):.3f}")
    print("predicted scale          picks  measured / predicted")
    bounds = (0, 0.74, 0.90, 0.98, 1.02, 1.105, 1.35, 99)
    for low, high in itertools.pairwise(bounds):
        chosen = [e for x, e in zip(xs, errors, strict=True) if math.log(low or 1e-9) <= x < math.log(high)]
        if chosen:
            error = math.exp(sum(chosen) / len(chosen))
            print(f"  {low:5.2f} – {high:<5.2f}           {len(chosen):5d}  {error:.3f}")


if __name__ == "__main__":
    main()
