"""Repeat calls of a level-2 routine replay the first call's launches, as ``gemm``'s recipes do.

A level-2 call spends most of its host time validating its vectors, checking that the written one
shares no element with the others, selecting a launch shape and building arguments: 35–45 µs of
Python a gemv on the CI machine before its launches, more on a slow host, where the GPU reads an
8192² bf16 matrix in 21–33 µs. Every decision depends only on the call's signature — the routine,
each tensor's shape, strides, dtype, device and 16-byte alignment, the scalars and flags, the
forced configuration and the logic generation — except whether the written tensor overlaps a
read one, which depends on where they are. So the first call of a signature records its launches
(``launch.recording``); when each is a :class:`~tessera._core.launch.Replay` (its tensors the
call's operands, views of them at fixed offsets, kept scratch or constant buffers), a repeat call
checks the byte ranges of its tensors against each other (the full path decides element by element
where they meet) and replays them. What the recording cannot see — work done by torch operations
rather than launches — makes no replay: a tensor such an operation made is none of those kinds, and
``Replay.of`` refuses it; a routine records only paths whose GPU work is its launches.

Refused for the fast path (the full path runs): tensor subclasses, non-Python scalars, a written
tensor that autograd tracks (the full path raises), a repeat call whose tensors' ranges meet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tessera._core import launch
from tessera._core.validate import extent_offsets, extents_meet, mark_written
from tessera.blas import space
from tessera.tuning import logic

# (operand index, shape, strides, storage offset from the operand's), or (operand index, None):
# the operand itself
View = tuple[int, tuple[int, ...] | None, tuple[int, ...] | None, int]
_RECIPES_MAX = 512


def signature(routine: str, tensors: Sequence[torch.Tensor | None], values: tuple) -> tuple | None:
    """The key of a call whose decisions are fixed by it (module docstring), or None when the call
    takes the full path: ``tensors`` exact torch tensors (or None: a result the call makes),
    ``values`` Python bools, ints and floats."""
    keys = []
    for t in tensors:
        if t is None:
            keys.append(None)
        elif type(t) is torch.Tensor:
            keys.append((*launch.layout_key(t), t.requires_grad))  # type: ignore[misc]
        else:
            return None
    if any(type(v) not in (bool, int, float) for v in values):
        return None
    return (routine, *keys, *values, torch.is_grad_enabled(), space.forced.config, logic.generation())


@dataclass(frozen=True)
class Recipe:
    """A call's launches, repeatable on new tensors of its signature."""

    replays: tuple[launch.Replay, ...]
    views: tuple[View, ...]  # the replays' operands, from the call's tensors
    extents: tuple[tuple[int, int], ...]  # the call's tensors' byte ranges, from their data pointers
    written: int  # which of the call's tensors is written
    made: tuple[tuple[int, ...], torch.dtype] | None  # the written tensor's shape and dtype, if made

    def run(self, tensors: Sequence[torch.Tensor | None]) -> torch.Tensor | None:
        """The written tensor after the launches on ``tensors``, or None (nothing launched) when
        their byte ranges meet: the caller then takes the full path."""
        tensors = list(tensors)
        if self.made is not None:
            first = next(t for t in tensors if t is not None)
            tensors[self.written] = torch.empty(self.made[0], dtype=self.made[1], device=first.device)
        else:
            out = tensors[self.written]
            start = out.data_ptr()  # type: ignore[union-attr]
            lo, hi = self.extents[self.written]
            reads = [(t.data_ptr() + r_lo, t.data_ptr() + r_hi)  # type: ignore[union-attr]
                     for i, (t, (r_lo, r_hi)) in enumerate(zip(tensors, self.extents, strict=True))
                     if i != self.written]
            if extents_meet((start + lo, start + hi), reads):
                return None
        operands = [tensors[i] if shape is None else
                    tensors[i].as_strided(shape, strides, tensors[i].storage_offset() + offset)  # type: ignore
                    for i, shape, strides, offset in self.views]
        for replay in self.replays:
            replay(operands)
        written = tensors[self.written]
        mark_written(written)  # type: ignore[arg-type]
        return written  # type: ignore[return-value]


_RECIPES: dict[tuple, Recipe] = {}


def run(key: tuple | None, tensors: Sequence[torch.Tensor | None]) -> torch.Tensor | None:
    """The written tensor of a repeat call replayed, or None: no recipe for ``key``, or one whose
    tensors' ranges meet (the caller takes the full path)."""
    recipe = None if key is None else _RECIPES.get(key)
    return None if recipe is None else recipe.run(tensors)


def remember(key: tuple | None, calls: Sequence[launch.Call], tensors: Sequence[torch.Tensor],
             views: Sequence[tuple[int, torch.Tensor]] | None, written: int, made: bool) -> None:
    """Keep the launches ``calls`` of a first call for ``key``'s repeat calls, if each replays:
    ``tensors`` the call's (the written one as it was made, when ``made``), ``views`` the
    tensors its launches take, each with the index of the one it views (None: ``tensors``
    themselves)."""
    if key is None or not calls:
        return
    if views is None:
        views = list(enumerate(tensors))
    specs: list[View] = []
    for index, view in views:
        base = tensors[index]
        if view is base:
            specs.append((index, None, None, 0))
        elif (view.dtype != base.dtype
              or view.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()):
            return
        else:
            specs.append((index, tuple(view.shape), tuple(view.stride()),
                          view.storage_offset() - base.storage_offset()))
    replays = launch.Replay.each_of(calls, [view for _, view in views])
    if replays is None:
        return
    out = tensors[written]
    if len(_RECIPES) >= _RECIPES_MAX:
        _RECIPES.clear()
    _RECIPES[key] = Recipe(replays, tuple(specs), tuple(extent_offsets(t) for t in tensors), written,
                           (tuple(out.shape), out.dtype) if made else None)
