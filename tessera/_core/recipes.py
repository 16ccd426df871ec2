"""The tables that keep repeat calls' recipes, one for each family of calls (``gemm``, its fp8 /
int8 form, ``gemm_wq``, the level-1/2 routines of ``blas.repeat``).

A recipe is what a first call decided and launched, minus its tensors (``launch.Replay``s); a
repeat call of the same signature runs it instead of validating and selecting again. Every family
keeps them the same way, so the rules live here once: a table is bounded (emptied when full: a
caller of ever new layouts must not grow it without end), a signature whose first call made no
recipe can be marked so (its later calls then take the full path without recording again), and a
recipe that replays only the scalar values it was recorded with — where a launch takes a value
made of the scalars, or two scalars are equal, so a new value has no one place to go — is kept
under the signature and those values (the signature marked as keyed by value).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

R = TypeVar("R")

_NONE = object()  # the signature's first call made no recipe
_BY_VALUE = object()  # the signature's recipes are kept under their scalar values too


class RecipeTable(Generic[R]):
    """Recipes by call signature (module docstring); ``limit`` entries at most."""

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int) -> None:
        self._entries: dict[Hashable, object] = {}
        self._limit = limit

    def get(self, key: Hashable, values: tuple = ()) -> R | None:
        """The recipe for ``key`` — for a signature keyed by value, the one recorded with these
        scalar ``values`` — or None (none recorded, or the signature makes none)."""
        recipe = self._entries.get(key)
        if recipe is _BY_VALUE:
            recipe = self._entries.get((key, values))
        return None if recipe is _NONE else recipe  # type: ignore[return-value]

    def wanted(self, key: Hashable | None) -> bool:
        """Whether a full-path call of ``key`` should record a recipe: not when an earlier call
        of it made none (recording again would only cost the host time a recipe saves)."""
        return key is not None and self._entries.get(key) is not _NONE

    def put(self, key: Hashable, recipe: R, by_value: tuple | None = None) -> None:
        """Keep ``recipe`` for ``key``, or, given the scalar values it replays (``by_value``),
        for ``key`` with those values only."""
        self._make_room()
        if by_value is not None:
            self._entries[key] = _BY_VALUE
            key = (key, by_value)
        self._entries[key] = recipe

    def refuse(self, key: Hashable) -> None:
        """Mark ``key`` as making no recipe."""
        self._make_room()
        self._entries[key] = _NONE

    def clear(self) -> None:
        self._entries.clear()

    def keys(self) -> Iterator[Hashable]:
        """The entries' keys (a signature keyed by value: it, and it with each recipe's values)."""
        return iter(self._entries)

    def recipes(self) -> Iterator[R]:
        """The recipes kept (the markers left out)."""
        return (r for r in self._entries.values() if r is not _NONE and r is not _BY_VALUE)  # type: ignore[misc]

    def __len__(self) -> int:
        """The entries: recipes and signatures marked as making none or keyed by value."""
        return len(self._entries)

    def _make_room(self) -> None:
        if len(self._entries) >= self._limit:
            self._entries.clear()
