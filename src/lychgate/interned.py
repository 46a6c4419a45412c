"""Equal values as one object, for what thousands of routes hold alike.

Translation builds per route what most routes have equal (a status, a policy's
tallies, what a policy says of a route): kept per route, each held its own copy
from pass to pass. A pool hands back the first equal value it was given. It is
bounded: past its size it starts over, and the values already handed out stay
with their holders (only later ones are shared anew), so churn cannot grow it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

SIZE = 4096  # distinct values kept for sharing


class Interned(Generic[T]):
    __slots__ = ("_pool", "_size")

    def __init__(self, size: int = SIZE) -> None:
        self._pool: dict[Hashable, T] = {}
        self._size = size

    def __call__(self, value: T, key: Hashable | None = None) -> T:
        """`value`, or an equal one handed out before; `key`: a hashable form of a value that
        is not hashable itself (two values have it alike only when they are equal)."""
        k = value if key is None else key
        found = self._pool.get(k)
        if found is None:
            if len(self._pool) >= self._size:
                self._pool.clear()
            found = self._pool[k] = value
        return found
