"""Give a tuned logic file's stream-K rows their best data-parallel candidate where it ran within
a margin of them: stream-K rows generalize badly to their neighbours (docs/architecture.md,
"Long-K rows"), so a row nearly as fast without it serves more sizes well. Runs anywhere.

Usage: python benchmarks/logic_dp_rows.py JOURNAL.jsonl LOGIC.yaml -o OUT.yaml [--within 0.95]
                                          [--wave-slack S]
Prints each swapped row; OUT is written atomically.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import yaml

from tessera._core.files import write_atomically


def measured(journal: Path) -> dict[tuple[int, ...], dict[str, float]]:
    """TFLOP/s of every configuration the tune timed correct, by sizes (the journal's config text)."""
    timed: dict[tuple[int, ...], dict[str, float]] = collections.defaultdict(dict)
    for line in journal.read_text().splitlines():
        entry = json.loads(line)
        if entry["status"] == "ok":
            timed[tuple(entry["sizes"])][entry["config"]] = entry["tflops"]
    return timed


def swap_rows(doc: dict, timed: dict[tuple[int, ...], dict[str, float]], within: float) -> list[str]:
    """Point each stream-K row of ``doc`` whose best data-parallel candidate ran at least ``within``
    of it at that candidate (a solution of its own when no equal one exists); the lines to print."""
    by_id = {solution["id"]: solution for solution in doc["solutions"]}
    swapped = []
    for row in doc["table"]:
        sizes = (row["m"], row["n"], row["k"], row["batch"])
        if by_id[row["solution"]]["kernel"] != "gemm_streamk" or sizes not in timed:
            continue
        tflops, config = max((t, json.loads(c)) for c, t in timed[sizes].items()
                             if json.loads(c)["kernel"] != "gemm_streamk")
        if tflops < within * row["tflops"]:
            continue
        same = [i for i, solution in by_id.items() if {**solution, "id": 0} == {**config, "id": 0}]
        if not same:
            same = [max(by_id) + 1]
            by_id[same[0]] = {"id": same[0], **config}
            doc["solutions"].append(by_id[same[0]])
        swapped.append(f"{sizes}: stream-K {row['tflops']} -> {config['kernel']} "
                       f"{config['block_m']}x{config['block_n']} {tflops:.1f}")
        row["solution"], row["tflops"] = same[0], round(tflops, 1)
    return swapped


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("journal", type=Path)
    parser.add_argument("logic", type=Path)
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("--within", type=float, default=0.95, help="the data-parallel pick's least share")
    parser.add_argument("--wave-slack", type=float, default=None, help="also set the file's wave_slack")
    args = parser.parse_args()
    doc = yaml.safe_load(args.logic.read_text())
    for line in swap_rows(doc, measured(args.journal), args.within):
        print(line)
    if args.wave_slack is not None:
        doc["wave_slack"] = args.wave_slack
    write_atomically(args.out, yaml.safe_dump(doc, sort_keys=False))


if __name__ == "__main__":
    main()
