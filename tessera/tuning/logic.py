"""Logic files: per-architecture tuning results as versioned YAML (data, not code).

One file per (arch, library, op, dtype): ``<dir>/<arch>/<library>.<op>.<dtype>.yaml``::

    schema: 1
    arch: sm_90
    library: blas
    op: gemm
    problem: {dtype: bf16}                           # optional layout: NT (file blas.gemm.bf16.NT.yaml)
    runtime: {triton: "3.6.0", backend: cuda}        # what it was tuned with
    solutions:                                       # a kernel family and its parameters
      - {id: 0, kernel: gemm_tma, block_m: 128, block_n: 256, block_k: 64, group_m: 8,
         num_warps: 8, num_stages: 3}
    table:                                           # benchmarked sizes → best solution, measured
      - {m: 4096, n: 4096, k: 4096, batch: 1, solution: 0, tflops: 701.2}
      - {m: 8192, n: 8192, k: 8192, batch: 1, solution: 0, tflops: 688.0,
         device: NVIDIA H100 80GB HBM3}              # optional: measured on another GPU of the arch
    distance: log_euclidean                          # how a size not in the table finds its nearest
    max_distance: 1.5                                # optional: farther than this, fall through
    wave_slack: 0.7                                  # optional: rows this much farther than the
                                                     # nearest compete, weighed by their waves
    wave_exponent: 0.8                               # optional, with wave_slack: the waves' ratio
                                                     # raised to this (under 1: trusted less)
    wave_ratio_max: 2.0                              # optional, with wave_slack: the waves' ratio
                                                     # taken at most this (before the exponent)
    min_split_depth: 512                             # optional: a row whose configuration splits
                                                     # the reduction serves only sizes where each
                                                     # slice is at least this deep (or its own); or
                                                     # steps by the first size key, each from its
                                                     # value up: [{m: 1, depth: 256}, {m: 32, depth: 512}]
    origin: tuned                                    # optional: tuned (measured) or heuristic

``wave_slack`` (ops that declare an ``efficiency``: blas.gemm's is
``tessera.blas.space.wave_efficiency``) makes :meth:`LogicFile.nearest` weigh rows, not just
rank them: where no row is at the asked size, each usable row within the nearest's distance plus
the slack is scored by its measured TFLOP/s times its configuration's efficiency (busy
multiprocessors) at the asked size over that at its own, and the best is taken; a row the
efficiency cannot judge (GEMM's stream-K) then serves only its own size, unless no row within reach
can be judged. The sm_90 bf16, fp16 and tf32 files ship 0.7 (docs/architecture.md, "Wave-weighed
rows"). ``wave_exponent`` raises that ratio to a power: over the picks timed through calls, a row
predicted to speed up by its waves sped up less and one predicted to slow down slowed less
(measured ≈ scale^0.78, ``benchmarks/results/wave-score-offline/``); bf16's and fp16's files ship
0.75 (``wave-exponent-h100-a2e6442/``). ``wave_ratio_max`` caps that ratio: a row timed on a grid far
under a wave, carried to a full one, was predicted 2.5× its figure where it ran 0.73× the row it
outbid (tf32's N = 1536 rows, ``tune-smalln1536-tf32-h100-e9b0826/``); replayed over every
committed A/B, a cap of 2 moves no pick of the shipped files in a 2090-shape sweep
(``wave-score-offline/replay_cap.txt``). No shipped file sets it yet.

``min_split_depth`` (ops that declare a ``split_depth``: blas.gemm's is split-K's K slice) keeps a
row whose configuration splits the reduction from serving sizes where a slice would be shallower
than that: split-K rows tuned at K = 4096 served K 768–1536 with 96–384-deep slices at 0.49–0.94×
the rows they displaced (``rows-shortk/`` and ``smalln-shortk/``, sixty-eighth session). A row
still serves its own size. The limit may step with the op's first size key (GEMM's M): a list of
``{m: FROM, depth: D}``, each step applying from its FROM up to the next step's, none below the
first — skinny GEMMs, memory-bound, gained from split-K at slices where M ≥ 32 lost
(``splitk-depth/``, sixty-ninth session). bf16's and fp16's sm_90 files ship steps of 256 from
M = 1 and 512 from M = 32, tf32's 128 from M = 1 and 512 from M = 32.

Solution parameters are the fields of the kernel family's config dataclass, so one declaration
feeds the tuner, the loader and the launcher: positive integers (0 where the default is 0,
"automatic"), bools, and names the family checks itself (``gemm_wq_ws``'s ``pdl: exit``).
Libraries declare their ops with :func:`register_op`. Files are read with ``yaml.safe_load``; any
defect raises :class:`LogicFileError` naming the file and the field. A parsed document is kept as
JSON under ``<TESSERA_HOME>/cache/logic/``, named by the sha256 of the file's bytes
(:func:`_parsed`): constructing a 6 KB file's objects from YAML took ~8 ms of a process's first
call, reading the JSON back ~0.1 ms; a file whose bytes change is another name. Lookup order
(:func:`logic_for`): the installed pack, then the logic shipped in the wheel; callers fall through
to their heuristic when neither has a file.

A problem may also name its operands' layout, as Tensile's problem types name their transposes:
``layout: NT`` (A row-major, B column-major, as in ``x @ W.t()``), in ``<library>.<op>.<dtype>.NT.yaml``.
Such a file refines its dtype's file (:func:`lookup`): a call in that layout takes the nearest of its
rows when one is within its max_distance, else the dtype's file decides, so a layout file can hold
only the sizes where the layout changes the best solution. Within a source (the installed pack, then
the shipped logic) the layout file comes first; a source's layout file never overrides an earlier
source's dtype file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import math
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tessera._core.errors import LogicFileError, TesseraError
from tessera._core.files import write_atomically
from tessera.tuning.paths import SHIPPED_LOGIC, cache_root, installed_logic

SCHEMA_VERSION = 1
# libyaml's safe loader where PyYAML has it (tens of ms faster on a first call), else the Python one
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# what a logic file may hold before it is parsed: libyaml recurses per nesting level and crashed
# the process (a segmentation fault) on 200000 nested brackets; block nesting needs indentation,
# so the size bounds it (~5000 levels in 16 MB; 20000 parsed fine)
MAX_FILE_BYTES = 16 << 20
MAX_FLOW_DEPTH = 64
DISTANCES = ("log_euclidean",)
ORIGINS = ("tuned", "heuristic")
# file-level fields that say how rows are chosen, not what was measured: a tune writes them
# (``Tuner``), a merge requires them equal
SELECTION_RULES = ("max_distance", "wave_slack", "wave_exponent", "wave_ratio_max", "min_split_depth")
# ``min_split_depth``: one depth for every size, or steps (from a first size key's value up, depth)
SplitDepthRule = float | tuple[tuple[int, float], ...]
# operand layouts a problem may name: A then B, N = row-major, T = column-major (stored transposed)
LAYOUTS = ("NN", "NT", "TN", "TT")


def problem_stem(library: str, op: str, dtype: str, layout: str | None = None) -> str:
    """A logic file's name without ``.yaml``: ``blas.gemm.tf32``, or ``blas.gemm.tf32.NT`` for a layout."""
    return f"{library}.{op}.{dtype}" + (f".{layout}" if layout else "")


@dataclass(frozen=True)
class OpSpec:
    """What a library declares about one op: its table's size keys, its kernel families, and how
    to write heuristic logic documents for a device nobody has tuned (used by pack builds)."""

    size_keys: tuple[str, ...]
    families: Mapping[str, type]  # kernel name → frozen config dataclass
    heuristic: Callable[[Any], list[dict]] | None = None
    # the share of a device's multiprocessors a configuration keeps busy at some sizes, in (0, 1],
    # or None where it cannot say (config, sizes, multiprocessors): what ``wave_slack`` weighs by
    efficiency: Callable[[Any, tuple[int, ...], int], float | None] | None = None
    # how deep each slice of the reduction is where a configuration splits it (config, sizes), or
    # None where it does not split: what ``min_split_depth`` limits
    split_depth: Callable[[Any, tuple[int, ...]], float | None] | None = None


_OPS: dict[tuple[str, str], OpSpec] = {}


def register_op(library: str, op: str, size_keys: tuple[str, ...], families: Mapping[str, type],
                heuristic: Callable[[Any], list[dict]] | None = None,
                efficiency: Callable[[Any, tuple[int, ...], int], float | None] | None = None,
                split_depth: Callable[[Any, tuple[int, ...]], float | None] | None = None) -> None:
    _OPS[(library, op)] = OpSpec(tuple(size_keys), dict(families), heuristic, efficiency, split_depth)


def _load_libraries() -> None:
    """Import every Tessera library once, so each has registered its ops."""
    import importlib

    from tessera import _LIBRARIES

    for name in _LIBRARIES:
        importlib.import_module(f"tessera.{name}")


def registered_ops() -> Mapping[tuple[str, str], OpSpec]:
    _load_libraries()
    return dict(_OPS)


@dataclass(frozen=True)
class Row:
    sizes: tuple[int, ...]
    solution: int
    measured: Mapping[str, float]
    device: str | None = None  # the GPU the row was measured on, where not the file's runtime device


@dataclass(frozen=True)
class LogicFile:
    path: Path
    arch: str
    library: str
    op: str
    problem: Mapping[str, Any]
    runtime: Mapping[str, Any]
    solutions: Mapping[int, Any]  # id → config dataclass instance
    table: tuple[Row, ...]
    distance: str
    max_distance: float | None
    origin: str = "tuned"
    wave_slack: float | None = None  # rows this much farther than the nearest compete (below)
    wave_exponent: float | None = None  # the waves' ratio raised to this (None: 1)
    wave_ratio_max: float | None = None  # the waves' ratio taken at most this (None: uncapped)
    min_split_depth: SplitDepthRule | None = None  # split rows serve only slices this deep (or as their own)

    @property
    def unnamed_solutions(self) -> list[int]:
        """The ids of solutions no row names: valid, but a pack built from the file compiles each
        for no call (a file cut down by hand can leave them; merge and the tuner never do)."""
        named = {row.solution for row in self.table}
        return sorted(sid for sid in self.solutions if sid not in named)

    @property
    def stem(self) -> str:
        """The file name (without ``.yaml``) its content belongs under: :func:`problem_stem`."""
        return problem_stem(self.library, self.op, str(self.problem.get("dtype")), self.problem.get("layout"))

    def nearest(self, sizes: tuple[int, ...], usable: Callable[[Any], bool] = lambda _: True,
                multiprocessors: int | None = None) -> Match | None:
        """The table row nearest to ``sizes`` whose solution is ``usable``, within max_distance.

        With ``wave_slack`` (and the device's ``multiprocessors`` and the op's ``efficiency``
        known), when no row is at ``sizes`` itself, the usable rows up to that much farther than
        the nearest compete: each by its measured TFLOP/s scaled by its configuration's
        efficiency at ``sizes`` over that at its own sizes (that ratio capped at ``wave_ratio_max``,
        then raised to ``wave_exponent``).
        A row's winner was chosen for its own tile count; a neighbour with another count would
        otherwise inherit it whatever its waves.
        A row whose configuration the efficiency cannot judge, at the row or at ``sizes``
        (stream-K; for GEMM also a main loop too short for waves to tell), does not compete. A
        nearest row judged at neither (stream-K) gives way to the judged rows within reach (GEMM
        stream-K rows serving other sizes ran 0.32–0.99× the rows that replaced them at 28
        shapes) and is taken only where none can be judged; one judged at one end only is taken
        as without the slack.

        With ``min_split_depth``, a row whose configuration splits the reduction into slices
        shallower than that at ``sizes`` (and than at its own sizes) is passed over."""
        ranked = sorted((_log_distance(sizes, row.sizes), i) for i, row in enumerate(self.table))
        matches = (Match(self, self.table[i], self.solutions[self.table[i].solution], distance)
                   for distance, i in ranked
                   if self.max_distance is None or distance <= self.max_distance)
        deep_enough = self._deep_enough(sizes)
        usable_matches = (match for match in matches if usable(match.config) and deep_enough(match))
        first = next(usable_matches, None)
        if first is None or first.distance == 0 or self.wave_slack is None or not multiprocessors:
            return first
        efficiency = registered_ops()[(self.library, self.op)].efficiency
        if efficiency is None:
            return first

        def busy(match: Match) -> tuple[float | None, float | None]:
            """The efficiency of the match's configuration here and at its row."""
            return efficiency(match.config, sizes, multiprocessors), \
                efficiency(match.config, match.row.sizes, multiprocessors)

        here, there = busy(first)
        if (here is None) != (there is None):
            return first  # waves tell at one end only (a short main loop): as without the slack
        reach = first.distance + self.wave_slack
        within = itertools.takewhile(lambda match: match.distance <= reach, usable_matches)
        scored = []  # each judged row's TFLOP/s carried here by the efficiency here over at the row
        exponent = 1.0 if self.wave_exponent is None else self.wave_exponent
        cap = math.inf if self.wave_ratio_max is None else self.wave_ratio_max
        for match in (first, *within):
            here, there = busy(match)
            if here is not None and there is not None:
                scale = min(here / there, cap) ** exponent
                scored.append((match.row.measured.get("tflops", 0.0) * scale, match))
        if not scored or [match for _, match in scored] == [first]:
            return first
        best = max(scored, key=lambda entry: entry[0])[1]  # the nearest of equals
        return dataclasses.replace(best, weighed=len(scored))

    def _deep_enough(self, sizes: tuple[int, ...]) -> Callable[[Match], bool]:
        """Whether a match's slices of the reduction at ``sizes`` are as deep as
        ``min_split_depth`` asks, or as at its own row's sizes (always where its configuration
        does not split, or the file sets no limit)."""
        limit = split_depth_limit(self.min_split_depth, sizes)
        split_depth = None if limit is None else registered_ops()[(self.library, self.op)].split_depth
        if limit is None or split_depth is None:
            return lambda _: True

        def deep(match: Match) -> bool:
            depth = split_depth(match.config, sizes)
            if depth is None or depth >= limit:
                return True
            own = split_depth(match.config, match.row.sizes)
            return own is not None and depth >= own

        return deep


@dataclass(frozen=True)
class Match:
    logic: LogicFile
    row: Row
    config: Any
    distance: float
    passed: tuple[str, ...] = ()  # why each earlier source (an installed pack's file) was passed over
    weighed: int = 0  # the rows weighed by waves this one was the fastest of (0: the nearest alone)

    def describe(self) -> str:
        """The selection's reason: each source passed over, then this file, row and distance."""
        sizes = "x".join(str(s) for s in self.row.sizes)
        how = (f", the fastest of {self.weighed} rows weighed by waves" if self.weighed > 1 else
               ", the one row within reach whose waves tell" if self.weighed else "")
        return "; ".join([*self.passed, f"logic {self.logic.path} row {sizes} solution {self.row.solution} "
                                        f"(distance {self.distance:.2f}{how})"])


def _log_distance(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    return math.sqrt(sum((math.log(max(x, 1)) - math.log(max(y, 1))) ** 2
                         for x, y in zip(a, b, strict=True)))


def split_depth_limit(rule: SplitDepthRule | None, sizes: tuple[int, ...]) -> float | None:
    """The slice depth ``rule`` (a ``min_split_depth``) asks at ``sizes``: its one depth, or the
    depth of the last step whose start is at most the first size; None below the first step."""
    if not isinstance(rule, tuple):
        return rule
    limit = None
    for start, depth in rule:
        if sizes[0] >= start:
            limit = depth
    return limit


def rule_text(rule: Any) -> str:
    """A selection rule's value as the tune flag takes it: ``0.7``, or steps as ``1:256,32:512``."""
    if isinstance(rule, tuple):
        return ",".join(f"{start}:{depth:g}" for start, depth in rule)
    return str(rule)


def rule_document(spec: OpSpec, name: str, rule: Any) -> Any:
    """A selection rule's value as a logic file holds it: steps as mappings named by the first size
    key, and ``min_split_depth``'s depths (loaded as floats) whole where whole, ``512`` not ``512.0``."""
    if name != "min_split_depth":
        return rule

    def whole(depth: float) -> float | int:
        return int(depth) if float(depth).is_integer() else depth

    if isinstance(rule, tuple):
        return [{spec.size_keys[0]: start, "depth": whole(depth)} for start, depth in rule]
    return whole(rule)


def step_start_problem(start: Any, before: int | None, key: str) -> str | None:
    """What is wrong with a ``min_split_depth`` step's start, or None: it must be a non-negative
    integer above the step before's start (``before``). The loader and the tune flag both ask."""
    if not _typed(start, int) or start < 0:
        return f"must be a non-negative integer (actual: {_shown(start)})"
    if before is not None and start <= before:
        return f"must be above the step before's {before}: steps go up in {key}"
    return None


def _split_depth_rule(path: Path, doc: Mapping[str, Any], spec: OpSpec) -> SplitDepthRule | None:
    """``min_split_depth``: a number, or a list of steps ``{<first size key>: start, depth: D}``
    with starts going up."""
    steps = doc.get("min_split_depth")
    if not isinstance(steps, list):
        return _number(path, doc, "min_split_depth", lambda x: 1 <= x < math.inf,
                       "a finite number of at least 1, or a list of steps")
    key = spec.size_keys[0]
    if not steps:
        raise _fail(path, "min_split_depth", f"an empty list of steps; give at least one {{{key}: FROM, "
                                             f"depth: D}} or remove the field")
    rule: list[tuple[int, float]] = []
    for i, step in enumerate(steps):
        where = f"min_split_depth[{i}]"
        if not isinstance(step, dict) or set(step) != {key, "depth"}:
            raise _fail(path, where, f"must be a mapping of {key} (the smallest {key} the step applies "
                                     f"from) and depth (actual: {_shown(step)})")
        start = step[key]
        problem = step_start_problem(start, rule[-1][0] if rule else None, key)
        if problem:
            raise _fail(path, f"{where}.{key}", problem)
        depth = _number(path, step, "depth", lambda x: 1 <= x < math.inf, "a finite number of at least 1",
                        where)
        rule.append((start, depth))
    return tuple(rule)


def _fail(path: Path, field: str, problem: str) -> LogicFileError:
    return LogicFileError(f"{path}: field '{field}': {problem}")


def _typed(value: Any, kind: type | tuple[type, ...]) -> bool:
    """``isinstance(value, kind)``, except that a YAML true / false is no number (bool is an int)."""
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def as_float(value: Any) -> float | None:
    """A YAML or JSON number as a float; None for anything else (a bool, a string, an integer
    beyond a float's range, which ``float`` would raise OverflowError on)."""
    if not _typed(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _shown(value: Any) -> str:
    """``repr(value)`` for an error message, cut short (an integer's may run to thousands of digits)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _number(path: Path, doc: Mapping[str, Any], key: str, valid: Callable[[float], bool],
            expected: str, where: str = "") -> float | None:
    """``doc[key]`` as a float (None where absent); a value that is no number, or fails ``valid``
    (NaN fails every comparison), names the field as ``where.key`` and ``expected``."""
    value = doc.get(key)
    if value is None:
        return None
    number = as_float(value)
    if number is None or not valid(number):
        raise _fail(path, f"{where}.{key}" if where else key, f"must be {expected} (actual: {_shown(value)})")
    return number


def _require(doc: Mapping[str, Any], path: Path, key: str, kind: type, where: str = "") -> Any:
    """``doc[key]`` of type ``kind``; errors name the field as ``where.key``."""
    field = f"{where}.{key}" if where else key
    if key not in doc:
        raise _fail(path, field, "missing")
    value = doc[key]
    if not _typed(value, kind):
        raise _fail(path, field, f"must be {kind.__name__} (actual: {value!r})")
    return value


def _parsed(path: Path) -> Any:
    """The YAML document in ``path`` (safe loading), from the parse cache when these very bytes were
    parsed before (see the module docstring), else parsed and kept there if JSON holds it exactly.
    The cache only ever saves time: unreadable or unwritable, the file is parsed. A file too large
    or nested too deep (:data:`MAX_FILE_BYTES`, :data:`MAX_FLOW_DEPTH`) is refused unparsed."""
    data = path.read_bytes()
    if len(data) > MAX_FILE_BYTES:
        raise LogicFileError(f"{path}: {len(data)} bytes, over the {MAX_FILE_BYTES} a logic file may hold "
                             f"(the shipped ones hold tens of KB); not a logic file")
    memo = cache_root() / "logic" / f"{hashlib.sha256(data).hexdigest()}.json"
    with contextlib.suppress(OSError, ValueError, RecursionError):
        return json.loads(memo.read_bytes())
    source = data.decode()
    depth = 0  # a flow collection's depth, brackets inside strings counted too (a logic file has none)
    if source.count("[") + source.count("{") > MAX_FLOW_DEPTH:  # else it cannot nest deeper
        brackets = re.sub(r"[^\[\]{}]", "", source)
        depth = max(itertools.accumulate((c in "[{") - (c in "]}") for c in brackets), default=0)
    if depth > MAX_FLOW_DEPTH:
        raise LogicFileError(f"{path}: brackets nested {depth} deep, over the {MAX_FLOW_DEPTH} a logic file "
                             f"may use (the shipped ones nest at most 2); not a logic file")
    doc = yaml.load(source, Loader=_SAFE_LOADER)
    with contextlib.suppress(OSError, TypeError, ValueError, RecursionError):
        text = json.dumps(doc)
        if json.loads(text) == doc:  # not, e.g., with integer keys (JSON's are strings) or dates
            write_atomically(memo, text)
    return doc


def load_logic(path: str | Path) -> LogicFile:
    """Read and validate one logic file."""
    path = Path(path)
    try:
        doc = _parsed(path)
    except OSError as exc:
        raise LogicFileError(f"{path}: cannot be read ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise LogicFileError(f"{path}: not UTF-8 text, so not a logic file ({exc.reason} at byte "
                             f"{exc.start})") from exc
    except yaml.YAMLError as exc:
        raise LogicFileError(f"{path}: not valid YAML ({exc})") from exc
    except (ValueError, RecursionError) as exc:  # an integer of over 4300 digits; nesting too deep
        raise LogicFileError(f"{path}: YAML that cannot be read into values ({exc})") from exc
    if not isinstance(doc, dict):
        raise LogicFileError(f"{path}: must be a YAML mapping (actual: {type(doc).__name__})")
    schema = _require(doc, path, "schema", int)
    if schema != SCHEMA_VERSION:
        raise _fail(path, "schema", f"version {schema} is not supported; this Tessera reads "
                                    f"version {SCHEMA_VERSION} (upgrade Tessera or regenerate the file)")
    arch = _require(doc, path, "arch", str)
    library = _require(doc, path, "library", str)
    op = _require(doc, path, "op", str)
    ops = _OPS if (library, op) in _OPS else registered_ops()  # import other libraries only if needed
    spec = ops.get((library, op))
    if spec is None:
        known = ", ".join(f"{lib}.{name}" for lib, name in sorted(ops)) or "none registered"
        raise _fail(path, "op", f"{library}.{op} is unknown; known: {known}")
    problem = _require(doc, path, "problem", dict)
    if problem.get("layout", LAYOUTS[0]) not in LAYOUTS:
        raise _fail(path, "problem.layout", f"{problem['layout']!r} is unknown; known: {', '.join(LAYOUTS)} "
                                            f"(A then B; N row-major, T column-major)")
    runtime = doc.get("runtime", {})
    if not isinstance(runtime, dict):
        raise _fail(path, "runtime", f"must be a mapping (actual: {runtime!r})")
    distance = doc.get("distance", "log_euclidean")
    if distance not in DISTANCES:
        raise _fail(path, "distance", f"{distance!r} is unknown; known: {', '.join(DISTANCES)}")
    origin = doc.get("origin", "tuned")
    if origin not in ORIGINS:
        raise _fail(path, "origin", f"{origin!r} is unknown; known: {', '.join(ORIGINS)}")
    max_distance = _number(path, doc, "max_distance", lambda x: x >= 0, "a non-negative number")
    wave_slack = _number(path, doc, "wave_slack", lambda x: x >= 0, "a non-negative number")
    if wave_slack is not None and spec.efficiency is None:
        raise _fail(path, "wave_slack", f"{library}.{op} declares no efficiency to weigh rows by; "
                                        f"remove the field")
    wave_exponent = _number(path, doc, "wave_exponent", lambda x: 0 < x <= 1, "a number in (0, 1]")
    wave_ratio_max = _number(path, doc, "wave_ratio_max", lambda x: 1 <= x < math.inf,
                             "a finite number of at least 1 (under 1 it would scale down even rows "
                             "whose waves fill better at the asked size)")
    for name, value in (("wave_exponent", wave_exponent), ("wave_ratio_max", wave_ratio_max)):
        if value is not None and wave_slack is None:
            raise _fail(path, name, "weighs rows only with a wave_slack; add one or remove it")
    min_split_depth = _split_depth_rule(path, doc, spec)
    if min_split_depth is not None and spec.split_depth is None:
        raise _fail(path, "min_split_depth", f"{library}.{op} declares no split of its reduction to limit; "
                                             f"remove the field")

    solutions = {}
    for i, entry in enumerate(_require(doc, path, "solutions", list)):
        where = f"solutions[{i}]"
        if not isinstance(entry, dict):
            raise _fail(path, where, "must be a mapping")
        sid = _require(entry, path, "id", int, where)
        if sid in solutions:
            raise _fail(path, f"{where}.id", f"{sid} is used twice")
        kernel = _require(entry, path, "kernel", str, where)
        solutions[sid] = _solution(path, where, spec, kernel, entry)
    table = []
    for i, entry in enumerate(_require(doc, path, "table", list)):
        where = f"table[{i}]"
        if not isinstance(entry, dict):
            raise _fail(path, where, "must be a mapping")
        sizes = []
        for key in spec.size_keys:
            value = entry.get(key)
            if not _typed(value, int) or value < 0:
                raise _fail(path, f"{where}.{key}", f"must be a non-negative integer (actual: {value!r})")
            sizes.append(value)
        sid = entry.get("solution")
        if not _typed(sid, int) or sid not in solutions:
            raise _fail(path, f"{where}.solution", f"{sid!r} is not a solution id; ids: {sorted(solutions)}")
        measured = {key: _number(path, entry, key, math.isfinite, "a finite number", where)
                    for key, value in entry.items()  # every other number of the row (tflops, …)
                    if key not in spec.size_keys and key != "solution" and _typed(value, (int, float))}
        device = entry.get("device")
        if device is not None and not (isinstance(device, str) and device):
            raise _fail(path, f"{where}.device", f"must be a GPU's name (actual: {device!r})")
        table.append(Row(tuple(sizes), sid, measured, device))
    return LogicFile(path, arch, library, op, problem, runtime, solutions, tuple(table), distance,
                     max_distance, origin, wave_slack, wave_exponent, wave_ratio_max, min_split_depth)


def _solution(path: Path, where: str, spec: OpSpec, kernel: str, entry: Mapping[str, Any]) -> Any:
    family = spec.families.get(kernel)
    if family is None:
        raise _fail(path, f"{where}.kernel", f"{kernel!r} is not a kernel family of this op; "
                                             f"known: {', '.join(sorted(spec.families))}")
    fields = {f.name: f for f in dataclasses.fields(family)}
    params = {k: v for k, v in entry.items() if k not in ("id", "kernel")}
    unknown = sorted(set(params) - set(fields))
    if unknown:
        raise _fail(path, f"{where}.{unknown[0]}", f"not a parameter of {kernel}; parameters: "
                                                  f"{', '.join(fields)}")
    required = [name for name, f in fields.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    for name in required:
        if name not in params:
            raise _fail(path, f"{where}.{name}", f"missing (required by {kernel})")
    for name, value in params.items():
        kind = fields[name].type
        default = fields[name].default  # 0 as a default means "automatic" (stream-K's programs: one per SM)
        if kind in ("bool", bool):
            ok, wanted = isinstance(value, bool), "a bool"
        elif kind in ("str", str):  # a name from a set the family checks itself (gemm_wq_ws's pdl mode)
            ok, wanted = isinstance(value, str), "a string"
        else:
            ok = type(value) is int and (value > 0 or value == default == 0)
            wanted = f"a positive integer{' or 0 (automatic)' if default == 0 else ''}"
        if not ok:
            raise _fail(path, f"{where}.{name}", f"must be {wanted} (actual: {value!r})")
    try:
        return family(**params)
    except TesseraError as exc:  # a family's own check of its parameters (e.g. allowed values)
        raise _fail(path, where, str(exc)) from exc


def _candidates(arch: str, library: str, op: str, dtype: str, layout: str | None) -> list[tuple[str, Path]]:
    name = f"{problem_stem(library, op, dtype, layout)}.yaml"
    return [("installed pack", installed_logic() / arch / name), ("shipped", SHIPPED_LOGIC / arch / name)]


class Override:
    """A configuration that a library's selection returns instead of looking anything up while
    ``with override(config):`` is active (tests, the tuner, sweeps)."""

    def __init__(self) -> None:
        self.config: Any = None

    @contextlib.contextmanager
    def __call__(self, config: Any) -> Iterator[None]:
        previous, self.config = self.config, config
        try:
            yield
        finally:
            self.config = previous


_generation = 0
_ignoring = False


@contextlib.contextmanager
def ignored() -> Iterator[None]:
    """Inside the block no logic file is found, so every op's selection falls to its heuristic: the
    untuned baseline that benchmarks time tuned logic against, in the same run."""
    global _ignoring
    previous, _ignoring = _ignoring, True
    reload()
    try:
        yield
    finally:
        _ignoring = previous
        reload()


def reload() -> None:
    """Forget cached logic (after a pack is installed or files change)."""
    global _generation
    _generation += 1
    _logic_for_cached.cache_clear()


def generation() -> int:
    """Changes whenever :func:`reload` runs; selection caches include it in their keys."""
    return _generation


def logic_for(arch: str, library: str, op: str, dtype: str, layout: str | None = None
              ) -> tuple[LogicFile | None, list[str]]:
    """The logic file to use for the problem (dtype, and a layout for a layout file), and why each
    earlier source was passed over (for trace logs)."""
    if _ignoring:
        return None, ["logic files ignored (tessera.tuning.logic.ignored)"]
    return _logic_for_cached(arch, library, op, dtype, layout)


def heuristic_document(arch: str, backend: str, library: str, op: str, dtype: str,
                       rows: Iterable[tuple[Mapping[str, int], Any]]) -> dict:
    """A logic document holding what a heuristic picks, one ``(sizes, config)`` row at a time: what
    a pack ships for an op nobody has tuned on ``arch`` (``origin: heuristic``); equal configs
    share one solution."""
    ids: dict[Any, int] = {}
    table = [{**sizes, "solution": ids.setdefault(config, len(ids))} for sizes, config in rows]
    return {"schema": SCHEMA_VERSION, "arch": arch, "library": library, "op": op, "problem": {"dtype": dtype},
            "origin": "heuristic", "runtime": {"backend": backend},
            "solutions": _solution_entries(ids), "table": table, "distance": "log_euclidean"}


def _solution_entries(ids: Mapping[Any, int]) -> list[dict[str, Any]]:
    """A document's ``solutions`` list from {config: id}."""
    return [{"id": sid, "kernel": config.kernel, **dataclasses.asdict(config)} for config, sid in ids.items()]


def merge(base: LogicFile, update: LogicFile) -> dict:
    """A logic document: ``base``'s table with ``update``'s rows replacing the rows at the same
    sizes and adding the sizes ``base`` lacks (a partial re-tune folded into a full file, as
    Tensile merges logic). Both must describe the same arch, op and problem, with the same
    origin, runtime, distance and selection rules (:data:`SELECTION_RULES`); equal configurations
    share one solution. The runtimes may name different GPUs of the arch (the same Triton and
    backend): ``update``'s rows then name theirs (``Row.device``), so that a figure never passes
    for the file's GPU's."""
    for name in ("arch", "library", "op", "problem", "origin", "runtime", "distance", *SELECTION_RULES):
        mine, theirs = getattr(base, name), getattr(update, name)
        if name == "runtime":  # the GPU may differ; its rows then say which
            mine, theirs = ({k: v for k, v in r.items() if k != "device"} for r in (mine, theirs))
        if mine != theirs:
            remedy = (f"tune the update with --{name.replace('_', '-')} {rule_text(mine)} (a selection rule "
                      f"of the file, not of its rows)" if name in SELECTION_RULES and mine is not None
                      else "merge files tuned for the same problem with the same runtime, or tune the "
                           "missing sizes again")
            raise LogicFileError(f"{update.path} cannot be merged into {base.path}: their {name} differ "
                                 f"({theirs!r} against {mine!r}); {remedy}")
    own, other = base.runtime.get("device"), update.runtime.get("device")
    spec = registered_ops()[(base.library, base.op)]
    rows = {row.sizes: (row, base.solutions[row.solution]) for row in base.table}
    rows.update({row.sizes: (dataclasses.replace(row, device=row.device or (other if other != own else None)),
                             update.solutions[row.solution]) for row in update.table})
    ids: dict[Any, int] = {}
    table = []
    for sizes, (row, config) in sorted(rows.items()):
        table.append({**dict(zip(spec.size_keys, sizes, strict=True)),
                      "solution": ids.setdefault(config, len(ids)), **row.measured,
                      **({"device": row.device} if row.device and row.device != own else {})})
    doc = {"schema": SCHEMA_VERSION, "arch": base.arch, "library": base.library, "op": base.op,
           "problem": dict(base.problem), "origin": base.origin, "runtime": dict(base.runtime),
           "solutions": _solution_entries(ids), "table": table, "distance": base.distance}
    for name in SELECTION_RULES:
        if getattr(base, name) is not None:
            doc[name] = rule_document(spec, name, getattr(base, name))
    return doc


def lookup(arch: str, library: str, op: str, dtype: str, sizes: tuple[int, ...],
           usable: Callable[[Any], bool] = lambda _: True, layout: str | None = None,
           multiprocessors: int | None = None) -> tuple[Match | None, list[str]]:
    """The nearest usable row of the logic file for (arch, library, op, dtype), and why each source
    was passed over: the first half of every library's selection (its heuristic is the second).
    With a ``layout``, that layout's file first, when its source is not behind the dtype file's.
    ``multiprocessors``: the device's, for a file that weighs rows by waves (``wave_slack``)."""
    found, passed = logic_for(arch, library, op, dtype)
    if layout is not None:
        refined, refined_passed = logic_for(arch, library, op, dtype, layout)
        if refined is not None and (found is None or _from_pack(refined) or not _from_pack(found)):
            match = refined.nearest(sizes, usable, multiprocessors)
            if match is not None:
                return dataclasses.replace(match, passed=tuple(refined_passed)), list(refined_passed)
            passed = [f"{refined.path}: no usable row within its max_distance", *passed]
    if found is None:
        return None, list(passed)
    match = found.nearest(sizes, usable, multiprocessors)
    if match is None:
        return None, [*passed, f"{found.path}: no usable row within its max_distance"]
    return dataclasses.replace(match, passed=tuple(passed)), list(passed)


def _from_pack(logic: LogicFile) -> bool:
    """Whether ``logic`` was read from the installed pack (else it is the wheel's)."""
    return installed_logic() in logic.path.parents


@functools.lru_cache(maxsize=256)
def _logic_for_cached(arch: str, library: str, op: str, dtype: str, layout: str | None
                      ) -> tuple[LogicFile | None, list[str]]:
    passed: list[str] = []
    wanted = f"{arch}/{problem_stem(library, op, dtype, layout)}"
    for source, path in _candidates(arch, library, op, dtype, layout):
        if not path.is_file():
            passed.append(f"no {source} logic for {wanted}")
            continue
        try:
            logic = load_logic(path)
            found = f"{logic.arch}/{logic.stem}"
            if found != wanted:
                raise LogicFileError(f"{path}: its content is for {found}, its location for {wanted}")
        except LogicFileError as exc:  # a broken file must not break every call: say so, fall through
            warnings.warn(f"ignoring {source} logic: {exc} (run `tessera logic validate {path}`)",
                          stacklevel=2)
            passed.append(f"{source} logic {path} is invalid")
            continue
        return logic, passed
    return None, passed
