"""Versions of one GEMM logic file against each other through ``gemm`` calls, in one process: for
each shape, the call selected by each FILE's rows and torch.matmul, each replayed from a CUDA graph
over cold operand copies, all interleaved for ROUNDS rounds (the GPU's clock drift spreads over
all of them; each round reverses the last one's order, so that no call always follows the same
one); ratios against the first file. A tf32 file is timed through ``precision="tf32"`` calls
beside torch.matmul with TF32 allowed. Each selection is what a real call picks: the
file is swapped in as the shipped logic (``logic.SHIPPED_LOGIC`` pointed at a copy of the shipped
tree holding it) and the recipes of earlier calls forgotten. Checks every call against torch first.

Usage: python benchmarks/logic_rows_ab.py SHAPES OUT.json FILE... [--rounds R]
  SHAPES: MxNxK, comma-separated; FILE: NAME=PATH.yaml (the first is the baseline), one dtype's
  (bf16 / fp16 / tf32 / fp32).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch
import yaml

from tessera._core.device import precision_of, torch_matmul_tf32_as
from tessera._core.timing import cold_copies, graph_rounds, run_record, write_result
from tessera.blas import api, explain, gemm
from tessera.tuning import logic
from tessera.tuning.paths import SHIPPED_LOGIC

DEVICE = os.environ.get("DEVICE", "cuda")  # "cpu" with TRITON_INTERPRET=1: a dry run of the host logic
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}


def logic_tree(file: Path, into: Path) -> Path:
    """A copy of the shipped logic tree with ``file`` in place of the shipped file of its name."""
    shutil.copytree(SHIPPED_LOGIC, into)
    doc = yaml.safe_load(file.read_text())
    problem = doc["problem"]
    stem = logic.problem_stem(doc["library"], doc["op"], problem["dtype"], problem.get("layout"))
    (into / doc["arch"]).mkdir(parents=True, exist_ok=True)  # an arch the wheel ships nothing for
    shutil.copy(file, into / doc["arch"] / f"{stem}.yaml")
    return into


def use(tree: Path | None) -> None:
    """Selection from ``tree`` (None: the shipped files) from the next call on."""
    logic.SHIPPED_LOGIC = tree or SHIPPED_LOGIC
    logic.reload()
    api._RECIPES.clear()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("shapes")
    parser.add_argument("out", type=Path)
    parser.add_argument("files", nargs="+", help="NAME=PATH.yaml")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    files = {name: Path(path) for name, path in (f.split("=", 1) for f in args.files)}
    base = next(iter(files))
    doc = yaml.safe_load(files[base].read_text())
    dtype = doc["problem"]["dtype"]
    stem = logic.problem_stem(doc["library"], doc["op"], dtype, doc["problem"].get("layout"))
    installed = logic.installed_logic() / doc["arch"] / f"{stem}.yaml"
    if installed.exists():  # it would be found before any file swapped in as the shipped one
        raise SystemExit(f"{installed}: an installed pack's logic takes precedence over the files compared; "
                         f"run with TESSERA_HOME pointing at an empty directory")
    element = DTYPES[dtype]
    record = {**run_record(" ".join(["python", *sys.argv])), "dtype": dtype,
              "files": {name: str(path) for name, path in files.items()}}
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as scratch, torch_matmul_tf32_as(dtype == "tf32"):
        trees = {name: logic_tree(path, Path(scratch) / name) for name, path in files.items()}
        try:
            for shape in args.shapes.split(","):
                rows.append(compare(shape, trees, base, element, precision_of(dtype), args.rounds))
                # after every shape, whole: a call killed at its time limit keeps the shapes done
                write_result(args.out, {**record, "rows": rows})
        finally:
            use(None)

    for key in files:
        print(f"geomean over {len(rows)} shapes, {key}: {geomean(rows, 'vs_base', key):.3f}x {base}, "
              f"{geomean(rows, 'vs_torch', key):.3f}x torch")


def compare(shape: str, trees: dict[str, Path], base: str, element: torch.dtype, precision: str,
            rounds: int) -> dict:
    """One shape's row: each tree's pick, checked against torch, then every call timed."""
    m, n, k = (int(x) for x in shape.split("x"))
    a = torch.randn(m, k, device=DEVICE).to(element)
    b = torch.randn(k, n, device=DEVICE).to(element)
    copies = cold_copies((a, b))
    reference = torch.matmul(a, b).float()
    picks: dict[str, str] = {}
    for name, tree in trees.items():
        use(tree)
        picks[name] = str(explain(a, b, precision=precision))
        result = gemm(a, b, precision=precision).float()
        worst = ((result - reference).abs().max() / reference.abs().max()).item()
        if not worst < 1e-2:
            raise SystemExit(f"{shape} {name}: relative error {worst:.3g} against torch")
    ours = [lambda x=x, y=y: gemm(x, y, precision=precision) for x, y in copies]
    cases = {"torch": [lambda x=x, y=y: torch.matmul(x, y) for x, y in copies], **dict.fromkeys(trees, ours)}
    times = graph_rounds(cases, rounds, before=lambda name: use(trees[name]) if name in trees else None)
    best = {key: min(values) for key, values in times.items()}
    tflops = {key: 2.0 * m * n * k / ms / 1e9 for key, ms in best.items()}
    row = dict(m=m, n=n, k=k, picks=picks, ms=times, tflops=tflops,
               vs_base={key: best[base] / best[key] for key in trees},
               vs_torch={key: best["torch"] / best[key] for key in trees})
    print(f"{shape}: torch {tflops['torch']:.0f} TFLOP/s; " + ", ".join(
        f"{key} {tflops[key]:.0f} ({row['vs_base'][key]:.3f}x, {row['vs_torch'][key]:.3f}x torch)"
        for key in trees), flush=True)
    return row


def geomean(rows: list[dict], ratio: str, key: str) -> float:
    return math.exp(sum(math.log(r[ratio][key]) for r in rows) / len(rows))


if __name__ == "__main__":
    main()
