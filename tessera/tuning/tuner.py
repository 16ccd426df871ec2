"""The tuner: time every candidate configuration of an op on a set of sizes and write logic files.

Op-agnostic: a library supplies a :class:`TunableOp` (its problems, its candidates per problem, a
correctness check and a timer). For each (problem, candidate) the tuner checks correctness first,
then times; every result is appended to a journal (one JSON line, flushed and fsynced) before the
next, so a crash or kill loses at most the candidate in flight and ``resume`` skips what is done.
The logic file is rewritten from the journal after each problem, atomically (temporary file and
rename) under a file lock, so two tuners sharing a directory never corrupt a file.

Single timings are noisy, and the best of many noisy timings is biased upward (the winner's curse,
seen on the H200: a tuned pick re-measured 2 % under the default). So after a problem's sweep the
top ``retime_top`` candidates are timed ``retimes`` more times, in interleaved rounds, and the
choice is the candidate with the best median over all its timings.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tessera._core.errors import InvalidArgumentError
from tessera._core.files import write_atomically
from tessera.tuning import binaries, logic


@dataclass(frozen=True)
class TunableOp:
    """What a library provides so its op can be tuned."""

    library: str
    op: str
    arch: str
    dtype: str
    problems: Sequence[tuple[int, ...]]
    candidates: Callable[[tuple[int, ...]], Sequence[Any]]  # configs that can run a problem
    check: Callable[[tuple[int, ...], Any], str | None]  # None when correct, else what is wrong
    measure: Callable[[tuple[int, ...], Any], float]  # the figure to maximise (e.g. TFLOP/s)
    figure: str = "tflops"
    runtime: dict[str, Any] = dataclasses.field(default_factory=dict)
    warm: Callable[[tuple[int, ...], Sequence[Any]], None] | None = None  # compile ahead, in parallel
    layout: str | None = None  # the operands' layout, for a layout logic file (``logic.LAYOUTS``)
    # a configuration (as journaled: its fields and "kernel") whose figure does not carry to nearby
    # sizes, which a logic file's nearest-row rule gives it too (GEMM: stream-K, cost set by its fix-up)
    local: Callable[[dict[str, Any]], bool] | None = None


def runtime_of(device: Any) -> dict[str, Any]:
    """What a logic file records about the run that measured it (``TunableOp.runtime``): Triton's
    version, the backend and the device's name."""
    import triton

    return {"triton": triton.__version__, "backend": device.backend, "device": device.name}


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def config_key(config: Any) -> str:
    """A configuration as the journal names it (kernel family and every parameter, sorted)."""
    return json.dumps({"kernel": config.kernel, **dataclasses.asdict(config)}, sort_keys=True)


class Tuner:
    def __init__(self, op: TunableOp, out_dir: Path, *, resume: bool = False,
                 budget_s: float | None = None, progress: bool = True, retime_top: int = 3,
                 retimes: int = 2, max_distance: float | None = None,
                 wave_slack: float | None = None, wave_exponent: float | None = None,
                 wave_ratio_max: float | None = None,
                 min_split_depth: logic.SplitDepthRule | None = None,
                 local_margin: float | None = None) -> None:
        self.op, self.resume, self.budget_s, self.progress = op, resume, budget_s, progress
        self.max_distance = max_distance  # written into the logic file: beyond it, the heuristic decides
        self.wave_slack = wave_slack  # written into the logic file: nearby rows weighed by waves
        self.wave_exponent = wave_exponent  # and their waves' ratio raised to this
        self.wave_ratio_max = wave_ratio_max  # after capping it at this
        self.min_split_depth = min_split_depth  # split rows serve only slices this deep
        # an op's local configuration takes a row only where it beats every other by more than this
        self.local_margin = local_margin
        self.retime_top, self.retimes = retime_top, retimes
        self.folder = Path(out_dir) / op.arch
        self.folder.mkdir(parents=True, exist_ok=True)
        stem = logic.problem_stem(op.library, op.op, op.dtype, op.layout)
        self.logic_path = self.folder / f"{stem}.yaml"
        self.journal_path = self.folder / f"{stem}.journal.jsonl"
        if self.journal_path.exists() and not resume:
            raise InvalidArgumentError(
                f"{self.journal_path} exists: pass --resume to continue that run, or choose another --out")

    def _lock(self) -> Any:
        from filelock import FileLock

        return FileLock(str(self.folder / ".tune.lock"), timeout=600)

    def journal(self) -> list[dict[str, Any]]:
        """Completed results; a line cut short by a kill, or any other line that is no result
        (edited, or from another tool), is ignored: its candidate is timed again."""
        if not self.journal_path.exists():
            return []
        entries = []
        for line in self.journal_path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if self._is_result(entry):
                entries.append(entry)
        return entries

    def _is_result(self, entry: Any) -> bool:
        """A journal entry as :meth:`_evaluate` writes it: sizes, a configuration key that is a JSON
        object, and for a correct candidate a finite figure."""
        if not (isinstance(entry, dict) and isinstance(entry.get("config"), str)
                and isinstance(entry.get("sizes"), list)
                and all(type(size) is int and size >= 0 for size in entry["sizes"])):
            return False
        try:
            if not isinstance(json.loads(entry["config"]), dict):
                return False
        except (ValueError, RecursionError):
            return False
        figure = logic.as_float(entry.get(self.op.figure))
        return entry.get("status") != "ok" or (figure is not None and math.isfinite(figure))

    def _append(self, entry: dict[str, Any]) -> None:
        with self._lock(), open(self.journal_path, "a") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def run(self) -> Path:
        """Tune every problem (skipping journaled work), write the logic file, return its path. The
        candidates' binaries stay out of the kernel cache (hundreds nobody calls again)."""
        with binaries.not_cached():
            return self._run()

    def _run(self) -> Path:
        from tqdm import tqdm

        done = {(tuple(e["sizes"]), e["config"]) for e in self.journal()}
        work = [(p, c) for p in self.op.problems for c in self.op.candidates(p)]
        started = time.monotonic()
        bar = tqdm(total=len(work), initial=sum((p, config_key(c)) in done for p, c in work),
                   desc=f"tune {self.logic_path.stem}", unit="candidate",
                   disable=not self.progress)
        try:
            for problem in self.op.problems:
                todo = [c for c in self.op.candidates(problem) if (problem, config_key(c)) not in done]
                if todo and self.op.warm is not None:
                    self.op.warm(problem, todo)
                for config in todo:
                    if not self._step(problem, config, bar, started):
                        return self.write_logic()
                extra = self._retime_plan(problem)
                bar.total += len(extra)
                for config in extra:
                    if not self._step(problem, config, bar, started):
                        return self.write_logic()
                self.write_logic()
        finally:
            bar.close()
        return self.write_logic()

    def _step(self, problem: tuple[int, ...], config: Any, bar: Any, started: float) -> bool:
        """Evaluate and journal one candidate; False when the time budget is spent."""
        if self.budget_s is not None and time.monotonic() - started > self.budget_s:
            bar.write("time budget reached: progress saved, continue with --resume")
            return False
        self._append(self._evaluate(problem, config))
        bar.update()
        return True

    def _retime_plan(self, problem: tuple[int, ...]) -> list[Any]:
        """Configs to time again for ``problem`` (the current top ones, minus re-times done), in
        rounds: each round times every one of them once, so a GPU whose clock drifts (one at its
        power limit heats over a run) drifts under all of them alike."""
        by_key = {config_key(c): c for c in self.op.candidates(problem)}
        figures = {k: v for k, v in self._figures().get(problem, {}).items() if k in by_key}
        top = sorted(figures, key=lambda key: -_median(figures[key]))[: self.retime_top]
        owed = {key: max(0, 1 + self.retimes - len(figures[key])) for key in top}
        return [by_key[key] for round_ in range(max(owed.values(), default=0))
                for key in top if owed[key] > round_]

    def _evaluate(self, problem: tuple[int, ...], config: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"sizes": list(problem), "config": config_key(config)}
        try:
            wrong = self.op.check(problem, config)
            if wrong is not None:
                return {**entry, "status": "incorrect", "reason": wrong}
            return {**entry, "status": "ok", self.op.figure: self.op.measure(problem, config)}
        except Exception as exc:  # noqa: BLE001 - a candidate that fails to compile or run is a result
            return {**entry, "status": "failed", "reason": f"{type(exc).__name__}: {str(exc)[-300:]}"}

    def _figures(self) -> dict[tuple[int, ...], dict[str, list[float]]]:
        """Every timing of every correct candidate, by problem and config (journal order)."""
        figures: dict[tuple[int, ...], dict[str, list[float]]] = {}
        for e in self.journal():
            if e.get("status") == "ok":
                by_config = figures.setdefault(tuple(e["sizes"]), {})
                by_config.setdefault(e["config"], []).append(e[self.op.figure])
        return figures

    def unsolved(self) -> dict[tuple[int, ...], tuple[int, str]]:
        """Per journaled problem with no correct candidate: how many candidates failed or were
        wrong, and the first one's reason (what a user needs to see, e.g. an allocation refused)."""
        outcomes: dict[tuple[int, ...], list[dict[str, Any]]] = {}
        for e in self.journal():
            outcomes.setdefault(tuple(e["sizes"]), []).append(e)
        return {sizes: (len(entries), entries[0].get("reason", "?")) for sizes, entries in outcomes.items()
                if not any(e.get("status") == "ok" for e in entries)}

    def medians(self) -> dict[tuple[int, ...], dict[str, float]]:
        """The median figure of every correct candidate, by problem and :func:`config_key` (journal
        order), from one read of the journal."""
        return {sizes: {key: _median(values) for key, values in by_config.items()}
                for sizes, by_config in self._figures().items()}

    def best(self) -> dict[tuple[int, ...], tuple[dict[str, Any], float]]:
        """Per problem, the correct configuration with the best median figure (ties: first journaled);
        with ``local_margin``, a configuration the op calls local (``TunableOp.local``) only where it
        beats the best other by more than that share: a row's pick serves its neighbours too, and
        an fp16 long-K stream-K row 2 % ahead at its own size ran 0.40× at a neighbour's."""
        best: dict[tuple[int, ...], tuple[dict[str, Any], float]] = {}
        local = self.op.local if self.local_margin is not None else None
        for sizes, by_config in self.medians().items():
            key = max(by_config, key=by_config.__getitem__)
            if local is not None and local(json.loads(key)):
                others = [other for other in by_config if not local(json.loads(other))]
                rival = max(others, key=by_config.__getitem__, default=None)
                if rival is not None and by_config[key] <= (1 + self.local_margin) * by_config[rival]:
                    key = rival
            best[sizes] = (json.loads(key), by_config[key])
        return best

    def write_logic(self) -> Path:
        best = self.best()
        ids: dict[str, int] = {}
        solutions, table = [], []
        spec = logic.registered_ops()[(self.op.library, self.op.op)]
        for sizes in sorted(best):
            config, figure = best[sizes]
            key = json.dumps(config, sort_keys=True)
            if key not in ids:
                ids[key] = len(ids)
                solutions.append({"id": ids[key], **config})
            row = dict(zip(spec.size_keys, sizes, strict=True))
            table.append({**row, "solution": ids[key], self.op.figure: float(f"{figure:.4g}")})
        doc = {"schema": logic.SCHEMA_VERSION, "arch": self.op.arch, "library": self.op.library,
               "op": self.op.op, "problem": {"dtype": self.op.dtype, **({"layout": self.op.layout}
                                                                       if self.op.layout else {})},
               "origin": "tuned",
               "runtime": self.op.runtime, "solutions": solutions, "table": table,
               "distance": "log_euclidean"}
        for name in logic.SELECTION_RULES:
            if getattr(self, name) is not None:
                doc[name] = logic.rule_document(spec, name, getattr(self, name))
        with self._lock():
            # loaded back before it replaces the old file: a tuner never leaves logic the loader refuses
            write_atomically(self.logic_path, yaml.safe_dump(doc, sort_keys=False), check=logic.load_logic)
        return self.logic_path


def parse_sizes(text: str, presets: dict[str, Iterable[tuple[int, ...]]],
                width: int) -> list[tuple[int, ...]]:
    """``preset`` names or ``MxNxK[xB],…`` → problems (missing trailing sizes default to 1)."""
    problems: list[tuple[int, ...]] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if part in presets:
            problems += [tuple(p) for p in presets[part]]
            continue
        try:
            values = [int(v) for v in part.lower().split("x")]
        except ValueError:
            values = []
        if not 1 <= len(values) <= width or any(v <= 0 for v in values):
            raise InvalidArgumentError(
                f"--sizes entry {part!r} must be a preset ({', '.join(presets)}) or positive sizes "
                f"joined by 'x' (up to {width})")
        problems.append(tuple(values + [1] * (width - len(values))))
    return list(dict.fromkeys(problems))
