"""Write a GEMM tune's logic file again from its journal with a stream-K margin: the file
``tessera tune gemm --stream-k-margin M`` would have written (``Tuner.best``: a stream-K
configuration keeps a size's row only where its median beats the best data-parallel one's by
more than M), for a tune run without one. Stream-K rows generalize badly to their neighbours
(docs/architecture.md, "Long-K rows"). Nothing is timed: runs anywhere.

Usage: python benchmarks/logic_dp_rows.py TUNED.yaml --stream-k-margin M -o OUT.yaml [--wave-slack S]
  TUNED.yaml: the tuner's file, its journal beside it (<stem>.journal.jsonl). Prints each row
  whose configuration changed; OUT is written atomically.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from tessera._core.files import write_atomically
from tessera.blas.tune import stream_k_is_local
from tessera.tuning import logic
from tessera.tuning.tuner import TunableOp, Tuner


def _untimed(*_: object) -> None:
    raise AssertionError("a rewrite from the journal times nothing")


def rewrite(tuned: Path, margin: float, wave_slack: float | None = None) -> str:
    """``tuned`` (a GEMM tuner's logic file) written again from its journal by the tuner with
    ``margin`` as its stream-K margin (and ``wave_slack``, default the file's own): the YAML text."""
    file = logic.load_logic(tuned)
    op = TunableOp(file.library, file.op, file.arch, file.problem["dtype"], (), lambda _: (), _untimed,
                   _untimed, runtime=dict(file.runtime), layout=file.problem.get("layout"),
                   local=stream_k_is_local)
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / file.arch).mkdir()
        journal = tuned.with_suffix(".journal.jsonl")
        shutil.copy(journal, Path(scratch) / file.arch / journal.name)
        rules = {name: getattr(file, name) for name in logic.SELECTION_RULES}  # the file's, every one
        if wave_slack is not None:
            rules["wave_slack"] = wave_slack
        tuner = Tuner(op, Path(scratch), resume=True, progress=False, **rules, local_margin=margin)
        return tuner.write_logic().read_text()


def changed_rows(before: logic.LogicFile, after: logic.LogicFile) -> list[str]:
    """One line per row whose configuration differs between the two files."""
    configs = {row.sizes: (before.solutions[row.solution], row.measured) for row in before.table}
    lines = []
    for row in after.table:
        config, measured = configs[row.sizes]
        new = after.solutions[row.solution]
        if new != config:
            lines.append(f"{row.sizes}: {config.short()} {measured} -> {new.short()} {row.measured}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tuned", type=Path)
    parser.add_argument("--stream-k-margin", type=float, required=True, metavar="M",
                        help="share by which stream-K must beat the best data-parallel candidate")
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("--wave-slack", type=float, default=None,
                        help="the file's wave_slack (default: TUNED's)")
    args = parser.parse_args()
    write_atomically(args.out, rewrite(args.tuned, args.stream_k_margin, args.wave_slack),
                     check=logic.load_logic)
    for line in changed_rows(logic.load_logic(args.tuned), logic.load_logic(args.out)):
        print(line)


if __name__ == "__main__":
    main()
