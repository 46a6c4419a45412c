"""Equal values as one object, for what thousands of routes hold alike.

Translation builds per route what most routes have equal (a status, a policy's
tallies, what a policy says of a route): kept per route, each held its own copy
from pass to pass. A pool hands back the first equal value it was given, and
keeps it while something else holds it too: once the pool has doubled since it
last looked, it lets go of the values only it holds. (It had started over once
4,096 values were kept: under churn every new value stayed until then, the
pools growing steadily for minutes, several MiB in all.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

FLOOR = 256  # values kept before the pool first looks for the ones no one else holds


class Interned(Generic[T]):
    __slots__ = ("_limit", "_pool")

    def __init__(self) -> None:
        self._pool: dict[Hashable, T] = {}
        self._limit = FLOOR

    def __call__(self, value: T, key: Hashable | None = None) -> T:
        """`value`, or an equal one handed out before; `key`: a hashable form of a value that
        is not hashable itself (two values have it alike only when they are equal)."""
        k = value if key is None else key
        found = self._pool.get(k)
        if found is None:
            if len(self._pool) >= self._limit:
                self._prune()
            found = self._pool[k] = value
        return found

    def made(self, key: Hashable, make: Callable[[], T]) -> T:
        """The value kept for `key`, made (and kept) when there is none: for values that cost
        more to make than their key."""
        found = self._pool.get(key)
        return found if found is not None else self(make(), key)

    def __len__(self) -> int:
        return len(self._pool)

    def _prune(self) -> None:
        """Let go of the values no one else holds; look again once the pool has doubled."""
        pool = self._pool
        for k in list(pool):
            v = pool[k]
            # References to v here: the pool's value (and key, when the key is the value
            # itself, then also the list's and k), v, and getrefcount's argument.
            if sys.getrefcount(v) <= (6 if k is v else 3):
                del pool[k]
            del v
        self._limit = max(FLOOR, 2 * len(pool))
