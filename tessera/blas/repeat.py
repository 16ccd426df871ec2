"""Repeat calls of a level-1 or level-2 routine replay the first call's launches, as ``gemm``'s
recipes do.

Such a call spends most of its host time validating its vectors, checking that the written one
shares no element with the others, selecting a launch shape and building launch arguments: on the
H200's host symv 8192² took 75.8 µs a call and gemv T 91.3 before its replay, where the GPU reads
the matrix in 21–33 µs (``benchmarks/results/eager-l2-h200-9678d9a/``). Every decision depends only
on the call's signature — the routine, each tensor's shape, strides, dtype, device and 16-byte
alignment (and which tensors are given twice), the flags, the forced configuration, the logic
generation, and of each scalar (alpha, beta, a rotation's c and s) only whether it is 0, 1 or −1 —
except whether a written tensor overlaps another, which depends on where they are, and the
scalars' values, which the launches take as plain arguments.

So the first call of a signature records its launches (``launch.recording``) and finds where each
scalar's value sits among their arguments. When each launch is a
:class:`~tessera._core.launch.Replay` (its tensors the call's tensors or views of them at fixed
offsets, buffers the call made for its result — y for y = None, a reduction's partials or index —,
kept scratch or constant buffers) and the result is a view of one of them, a repeat call checks the
byte ranges of the written tensors against the others (element by element where they meet: two
columns of one row-major matrix share no element), allocates the result's buffers anew and
replays the launches with its own scalars in those places. A scalar other than 0 and ±1 found in
no argument, or in one together with another scalar (alpha = beta), keys the recipe on the
scalars' values instead, as every scalar did before the seventy-fourth session: an iterative
solver's axpy, whose alpha changes every call, recorded every call then (65 µs of host time on the
CI CPU where a replay takes 8). What the recording cannot see — work done by torch operations
rather than launches — makes no replay: a tensor such an operation made is none of those kinds; a
routine records only paths whose GPU work is its launches, and the torch steps after them
(``finish``) are part of the recipe.

Refused for the fast path (the full path runs): tensor subclasses, non-Python scalars, a written
tensor that autograd tracks (the full path raises), a repeat call whose written tensor may share an
element with another (the same vector twice, which axpy, copy and swap take: then the full path
runs without recording again). A signature whose first call makes no recipe (a buffer not kept, a
launch on a view of another dtype) is marked so, and its later calls take the full path without
recording again (outside a CUDA graph capture, where scratch buffers are not kept).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from tessera._core import launch
from tessera._core.footprint import Footprint, footprints_meet
from tessera._core.recipes import RecipeTable
from tessera._core.validate import extent_offsets, mark_written
from tessera.blas import space
from tessera.tuning import logic

# (tensor index, shape, strides, storage offset from the tensor's), or (tensor index, None, None, 0):
# the tensor itself. Tensors are indexed as the call's given ones, then the ones it makes.
View = tuple[int, tuple[int, ...] | None, tuple[int, ...] | None, int]
Slots = tuple[tuple[tuple[int, int], ...], ...]  # each launch's (argument position, scalar index)s


def scalar_class(value: int | float) -> object:
    """What a routine's decisions see of a scalar: whether it is 0 (and its sign: β = −0.0 is
    passed on as such), 1 or −1; any other value is only a launch argument (module docstring)."""
    if value == 0:
        return type(value), 0, math.copysign(1.0, value)
    return (type(value), value) if value == 1 or value == -1 else type(value)


def signature(routine: str, tensors: Sequence[object], values: tuple, scalars: tuple = ()) -> tuple | None:
    """The key of a call whose decisions are fixed by it (module docstring), or None when the call
    takes the full path: ``tensors`` exact torch tensors (or None: absent, or a result the call
    makes; one given again is keyed by where it was given first), ``values`` None or Python bools,
    ints and floats, ``scalars`` Python ints and floats (keyed by :func:`scalar_class`)."""
    keys: list[object] = []
    for i, t in enumerate(tensors):
        if t is None:
            keys.append(None)
        elif type(t) is torch.Tensor:
            for j in range(i):  # one tensor given twice (ger(α, x, x, A), dot(x, x)): its place
                if tensors[j] is t:  # the recorded launches name it for both
                    keys.append(j)
                    break
            else:
                keys.append((*launch.layout_key(t), t.requires_grad))  # type: ignore[misc]
        else:
            return None
    for v in values:
        if v is not None and type(v) not in (bool, int, float):
            return None
    for s in scalars:
        if type(s) is not float and type(s) is not int:
            return None
        keys.append(scalar_class(s))
    return (routine, *keys, *values, torch.is_grad_enabled(), space.forced.config, logic.generation())


def _view(tensors: Sequence[torch.Tensor | None], spec: View) -> torch.Tensor:
    index, shape, strides, offset = spec
    t = tensors[index]
    assert t is not None  # a spec names a tensor the call had
    return t if shape is None else t.as_strided(shape, strides, t.storage_offset() + offset)  # type: ignore


def _spec(tensors: Sequence[torch.Tensor | None], view: torch.Tensor) -> View | None:
    """``view`` as one of ``tensors``, or a view of the one whose memory it lies in, or None (none
    or several do, or its dtype is another)."""
    for i, t in enumerate(tensors):
        if view is t:
            return (i, None, None, 0)
    storage = view.untyped_storage().data_ptr()
    found = [i for i, t in enumerate(tensors) if t is not None and t.untyped_storage().data_ptr() == storage]
    if len(found) != 1 or tensors[found[0]].dtype != view.dtype:  # type: ignore[union-attr]
        return None
    base = tensors[found[0]]
    return (found[0], tuple(view.shape), tuple(view.stride()), view.storage_offset() - base.storage_offset())  # type: ignore


@dataclass(frozen=True)
class Recipe:
    """A call's launches, repeatable on new tensors and scalars of its signature."""

    replays: tuple[launch.Replay, ...]
    views: tuple[View, ...]  # the replays' operands
    slots: Slots  # where each replay takes the call's scalars
    extents: tuple[tuple[int, int] | None, ...]  # the given tensors' byte ranges from their data pointers
    written: tuple[int, ...]  # the given tensors written in place (checked against the others)
    made: tuple[tuple[tuple[int, ...], tuple[int, ...], torch.dtype], ...]  # made: shape, strides, dtype
    result: View  # what the call returns, before ``finish`` and ``cast``
    finish: Callable[[torch.Tensor], torch.Tensor] | None  # the torch steps from it to the result
    cast: torch.dtype | None

    def apart(self, given: Sequence[torch.Tensor | None]) -> bool:
        """Whether each written tensor shares no element with another given one: their byte ranges
        from the data pointers, and where those meet, their elements (``footprint``)."""
        extents = self.extents
        for w in self.written:
            out = given[w]
            start = out.data_ptr()  # type: ignore[union-attr]
            lo, hi = extents[w]  # type: ignore[misc]
            lo, hi = start + lo, start + hi
            for i, t in enumerate(given):
                extent = extents[i]
                if i == w or t is None or lo == hi or extent[0] == extent[1]:  # type: ignore[index]
                    continue
                base = t.data_ptr()
                if (base + extent[0] < hi and lo < base + extent[1]  # type: ignore[index]
                        and footprints_meet(Footprint.of_tensor(out), Footprint.of_tensor(t))):  # type: ignore[arg-type]
                    return False
        return True

    def run(self, given: Sequence[torch.Tensor | None],
            scalars: Sequence[int | float] = ()) -> torch.Tensor | None:
        """The call's result after the launches on ``given`` with ``scalars`` (and new buffers for
        those it makes), or None (nothing launched) when a written tensor may share an element
        with another: the caller then takes the full path."""
        if self.written and not self.apart(given):
            return None
        tensors = list(given)
        if self.made:
            device = next(t for t in given if t is not None).device
            tensors += [torch.empty_strided(shape, strides, dtype=dtype, device=device)
                        for shape, strides, dtype in self.made]
        replay_each(self.replays, self.slots, [_view(tensors, spec) for spec in self.views], scalars)
        if self.written:
            mark_written(*[tensors[w] for w in self.written])  # type: ignore[misc]
        result = _view(tensors, self.result)
        if self.finish is not None:
            result = self.finish(result)
        return result if self.cast is None else result.to(self.cast)


def replay_each(replays: Sequence[launch.Replay], slots: Slots, operands: Sequence[torch.Tensor],
                scalars: Sequence[int | float]) -> None:
    """Each replay on ``operands``, the call's ``scalars`` written into its slots (``scalar_slots``;
    ``slots`` empty: no launch takes a free scalar)."""
    if not slots:
        for replay in replays:
            replay(operands)
        return
    for replay, places in zip(replays, slots, strict=True):
        replay(operands, [(place, float(scalars[index])) for place, index in places] if places else ())


_RECIPES: RecipeTable[Recipe] = RecipeTable(4096)


def replayed(routine: str, given: Sequence[object], values: tuple,
             scalars: tuple = ()) -> tuple[tuple | None, torch.Tensor | None]:
    """A call's key (:func:`signature`) for its full path to record under, and its result when a
    recipe replayed it — else None: no recipe for the key (the full path records one), or one
    whose written tensor may share an element with another (the key returned is then None: the
    full path decides, and records nothing again)."""
    key = signature(routine, given, values, scalars)
    recipe = None if key is None else _RECIPES.get(key, scalars)
    if recipe is None:
        return key, None
    result = recipe.run(given, scalars)  # type: ignore[arg-type]  # signature checked they are tensors
    return (key if result is not None else None), result


def wanted(key: tuple | None) -> bool:
    """Whether a full-path call of ``key`` should record its launches for a recipe: not when an
    earlier call of it made none (its result came from torch, not a launch: recording and trying
    again would only cost the host time a recipe is meant to save)."""
    return _RECIPES.wanted(key)


def recording(key: tuple | None) -> contextlib.AbstractContextManager[list[launch.Call]]:
    """Where a full-path call of ``key`` launches: recorded when a recipe is :func:`wanted`."""
    return launch.recording() if wanted(key) else contextlib.nullcontext([])


def scalar_slots(calls: Sequence[launch.Call], scalars: tuple) -> Slots | None:
    """For each launch, the argument positions holding a scalar's value, and which scalar: every
    float argument equal to a scalar other than 0 and ±1 (whose values the key fixes). None — the
    recipe is then keyed by value — when such a scalar is in no argument, an argument equals two of
    them (which is which cannot be told), or a float argument is none of the scalars and not 0 or
    ±1 (a value made of them, −α or α·β, would be replayed stale)."""
    free = [i for i, s in enumerate(scalars) if scalar_class(s) is type(s)]
    if not free:
        return tuple(() for _ in calls)
    fixed = {0.0, 1.0, -1.0, *(s for i, s in enumerate(scalars) if i not in free)}
    found, slots = set(), []
    for call in calls:
        mine = []
        for position, arg in enumerate(call.args):
            if type(arg) is not float:
                continue
            equal = [i for i in free if arg == scalars[i]]
            if len(equal) > 1 or (not equal and arg not in fixed):
                return None
            if equal:
                mine.append((position, equal[0]))
                found.add(equal[0])
        slots.append(tuple(mine))
    return tuple(slots) if len(found) == len(free) else None


def remember(key: tuple | None, calls: Sequence[launch.Call], given: Sequence[torch.Tensor | None],
             result: torch.Tensor, *, made: Sequence[torch.Tensor] = (), written: tuple[int, ...] = (),
             launched: Sequence[torch.Tensor] | None = None, scalars: tuple = (),
             finish: Callable[[torch.Tensor], torch.Tensor] | None = None,
             cast: torch.dtype | None = None) -> None:
    """Keep the launches ``calls`` of a first call for ``key``'s repeat calls, if each replays.
    ``given``: the call's tensors as :func:`replayed` will be given them; ``made``: the buffers it made
    for its result (uninitialized: its launches write them); ``written``: which given tensors it
    wrote in place; ``launched``: the tensors its launches took, each a view of one given or made
    tensor (None: those tensors themselves); ``scalars``: as given to :func:`replayed`; ``result``:
    a view of one of them, from which ``finish`` (torch steps the call took, holding no tensor) and
    ``cast`` make what it returns."""
    if not wanted(key) or not calls:
        return
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        return  # scratch is not kept under a graph capture: no recipe now says nothing of later calls
    tensors = [*given, *made]
    operands: list[torch.Tensor] = []
    for t in launched if launched is not None else tensors:  # each once: Replay needs one slot a tensor
        if t is not None and not any(t is seen for seen in operands):
            operands.append(t)
    views = [_spec(tensors, t) for t in operands]
    result_view = _spec(tensors, result)
    replays = (None if result_view is None or any(v is None for v in views) else
               launch.Replay.each_of(calls, operands))
    if replays is None:
        _RECIPES.refuse(key)
        return
    slots = scalar_slots(calls, scalars)
    extents = tuple(None if t is None else extent_offsets(t) for t in given)
    buffers = tuple((tuple(t.shape), tuple(t.stride()), t.dtype) for t in made)
    recipe = Recipe(replays, tuple(views), slots or tuple(() for _ in calls), extents,  # type: ignore[arg-type]
                    written, buffers, result_view, finish, cast)  # type: ignore[arg-type]
    _RECIPES.put(key, recipe, scalars if slots is None else None)  # by value: these values only
