"""Repeat calls of a level-2 routine or a level-1 reduction replay the first call's launches, as
``gemm``'s recipes do.

Such a call spends most of its host time validating its vectors, checking that the written one
shares no element with the others, selecting a launch shape and building launch arguments: on the
H200's host symv 8192² took 75.8 µs a call and gemv T 91.3 before its replay, where the GPU reads
the matrix in 21–33 µs (``benchmarks/results/eager-l2-h200-9678d9a/``). Every decision depends only
on the call's signature — the routine, each tensor's shape, strides, dtype, device and 16-byte
alignment, the scalars and flags, the forced configuration and the logic generation — except
whether the written tensor overlaps a read one, which depends on where they are. So the first call
of a signature records its launches (``launch.recording``); when each is a
:class:`~tessera._core.launch.Replay` (its tensors the call's tensors or views of them at fixed
offsets, buffers the call made for its result — y for y = None, a reduction's partials or index —,
kept scratch or constant buffers) and the result is a view of one of them, a repeat call checks the
byte ranges of the written tensor against the others (the full path decides element by element
where they meet), allocates the result's buffers anew and replays the launches. What the recording
cannot see — work done by torch operations rather than launches — makes no replay: a tensor such an
operation made is none of those kinds (a dot whose partials torch adds returns such a tensor); a
routine records only paths whose GPU work is its launches.

Refused for the fast path (the full path runs): tensor subclasses, non-Python scalars, a written
tensor that autograd tracks (the full path raises), a repeat call whose tensors' ranges meet. A
signature whose first call makes no recipe (a result torch computed, a buffer not kept) is marked so,
and its later calls take the full path without recording again (outside a CUDA graph capture, where
scratch buffers are not kept).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from tessera._core import launch
from tessera._core.validate import extent_offsets, extents_meet, mark_written
from tessera.blas import space
from tessera.tuning import logic

# (tensor index, shape, strides, storage offset from the tensor's), or (tensor index, None, None, 0):
# the tensor itself. Tensors are indexed as the call's given ones, then the ones it makes.
View = tuple[int, tuple[int, ...] | None, tuple[int, ...] | None, int]
_RECIPES_MAX = 512


def signature(routine: str, tensors: Sequence[object], values: tuple) -> tuple | None:
    """The key of a call whose decisions are fixed by it (module docstring), or None when the call
    takes the full path: ``tensors`` exact torch tensors (or None: absent, or a result the call
    makes), ``values`` None or Python bools, ints and floats."""
    keys = []
    for t in tensors:
        if t is None:
            keys.append(None)
        elif type(t) is torch.Tensor:
            keys.append((*launch.layout_key(t), t.requires_grad))  # type: ignore[misc]
        else:
            return None
    if any(v is not None and type(v) not in (bool, int, float) for v in values):
        return None
    return (routine, *keys, *values, torch.is_grad_enabled(), space.forced.config, logic.generation())


def _view(tensors: Sequence[torch.Tensor | None], spec: View) -> torch.Tensor:
    index, shape, strides, offset = spec
    t = tensors[index]
    assert t is not None  # a spec names a tensor the call had
    return t if shape is None else t.as_strided(shape, strides, t.storage_offset() + offset)  # type: ignore


def _spec(tensors: Sequence[torch.Tensor | None], view: torch.Tensor) -> View | None:
    """``view`` as a view of the one tensor of ``tensors`` whose memory it lies in, or None (none
    or several do, or its dtype is another)."""
    storage = view.untyped_storage().data_ptr()
    found = [i for i, t in enumerate(tensors) if t is not None and t.untyped_storage().data_ptr() == storage]
    if len(found) != 1 or tensors[found[0]].dtype != view.dtype:  # type: ignore[union-attr]
        return None
    base = tensors[found[0]]
    if view is base:
        return (found[0], None, None, 0)
    return (found[0], tuple(view.shape), tuple(view.stride()), view.storage_offset() - base.storage_offset())  # type: ignore


@dataclass(frozen=True)
class Recipe:
    """A call's launches, repeatable on new tensors of its signature."""

    replays: tuple[launch.Replay, ...]
    views: tuple[View, ...]  # the replays' operands
    extents: tuple[tuple[int, int] | None, ...]  # the given tensors' byte ranges from their data pointers
    written: int | None  # the given tensor written in place (checked against the others), or None
    made: tuple[tuple[tuple[int, ...], tuple[int, ...], torch.dtype], ...]  # made: shape, strides, dtype
    result: View  # what the call returns, before ``finish`` and ``cast``
    finish: Callable[[torch.Tensor], torch.Tensor] | None  # the torch steps from it to the result
    cast: torch.dtype | None

    def run(self, given: Sequence[torch.Tensor | None]) -> torch.Tensor | None:
        """The call's result after the launches on ``given`` (and new buffers for those it makes),
        or None (nothing launched) when the written tensor's bytes meet another's: the caller then
        takes the full path."""
        if self.written is not None:
            out = given[self.written]
            start = out.data_ptr()  # type: ignore[union-attr]
            lo, hi = self.extents[self.written]  # type: ignore[misc]
            reads = [(t.data_ptr() + extent[0], t.data_ptr() + extent[1])
                     for i, (t, extent) in enumerate(zip(given, self.extents, strict=True))
                     if i != self.written and t is not None and extent is not None]
            if extents_meet((start + lo, start + hi), reads):
                return None
        tensors = list(given)
        if self.made:
            device = next(t for t in given if t is not None).device
            tensors += [torch.empty_strided(shape, strides, dtype=dtype, device=device)
                        for shape, strides, dtype in self.made]
        operands = [_view(tensors, spec) for spec in self.views]
        for replay in self.replays:
            replay(operands)
        if self.written is not None:
            mark_written(tensors[self.written])  # type: ignore[arg-type]
        result = _view(tensors, self.result)
        if self.finish is not None:
            result = self.finish(result)
        return result if self.cast is None else result.to(self.cast)


_RECIPES: dict[tuple, Recipe] = {}
_NONE = Recipe((), (), (), None, (), (0, None, None, 0), None, None)  # the key's calls make no recipe


def replayed(routine: str, given: Sequence[object],
             values: tuple) -> tuple[tuple | None, torch.Tensor | None]:
    """A call's :func:`signature`, and its result when a recipe replayed it — else None: no recipe
    for the signature, or one whose written tensor's bytes meet another's (the caller takes the
    full path, recording it under the signature)."""
    key = signature(routine, given, values)
    recipe = None if key is None else _RECIPES.get(key)
    if recipe is None or recipe is _NONE:
        return key, None
    return key, recipe.run(given)  # type: ignore[arg-type]  # signature checked they are tensors


def wanted(key: tuple | None) -> bool:
    """Whether a full-path call of ``key`` should record its launches for a recipe: not when an
    earlier call of it made none (its result came from torch, not a launch: recording and trying
    again would only cost the host time a recipe is meant to save)."""
    return key is not None and _RECIPES.get(key) is not _NONE


def recording(key: tuple | None) -> contextlib.AbstractContextManager[list[launch.Call]]:
    """Where a full-path call of ``key`` launches: recorded when a recipe is :func:`wanted`."""
    return launch.recording() if wanted(key) else contextlib.nullcontext([])


def remember(key: tuple | None, calls: Sequence[launch.Call], given: Sequence[torch.Tensor | None],
             result: torch.Tensor, *, made: Sequence[torch.Tensor] = (), written: int | None = None,
             launched: Sequence[torch.Tensor] | None = None,
             finish: Callable[[torch.Tensor], torch.Tensor] | None = None,
             cast: torch.dtype | None = None) -> None:
    """Keep the launches ``calls`` of a first call for ``key``'s repeat calls, if each replays.
    ``given``: the call's tensors as :func:`replayed` will be given them; ``made``: the buffers it made
    for its result (uninitialized: its launches write them); ``written``: which given tensor it
    wrote in place; ``launched``: the tensors its launches took, each a view of one given or made
    tensor (None: those tensors themselves); ``result``: a view of one of them, from which
    ``finish`` (torch steps the call took, holding no tensor) and ``cast`` make what it returns."""
    if not wanted(key) or not calls:
        return
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        return  # scratch is not kept under a graph capture: no recipe now says nothing of later calls
    if len(_RECIPES) >= _RECIPES_MAX:
        _RECIPES.clear()
    tensors = [*given, *made]
    operands = list(launched) if launched is not None else [t for t in tensors if t is not None]
    views = [_spec(tensors, t) for t in operands]
    result_view = _spec(tensors, result)
    replays = (None if result_view is None or any(v is None for v in views) else
               launch.Replay.each_of(calls, operands))
    if replays is None:
        _RECIPES[key] = _NONE  # type: ignore[index]
        return
    extents = tuple(None if t is None else extent_offsets(t) for t in given)
    buffers = tuple((tuple(t.shape), tuple(t.stride()), t.dtype) for t in made)
    _RECIPES[key] = Recipe(replays, tuple(views), extents, written, buffers, result_view,  # type: ignore[arg-type]
                           finish, cast)
