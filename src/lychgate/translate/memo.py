"""Memoized translation steps: recompute only what a change can affect.

The store records when each object, Service's EndpointSlices and namespace of a
kind last changed, and which of them a step reads. A step's result is reused
while its inputs are the same objects (objects are immutable and replaced on
change, so identity is equality) and nothing it read has changed since. This is
the idea behind krt's collections, small enough to read in one sitting.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from lychgate.store import Store

T = TypeVar("T")


class Memo:
    def __init__(self, store: Store) -> None:
        self.store = store
        # key -> (inputs, store revision, reads, value)
        self._entries: dict[Hashable, tuple[tuple[Any, ...], int, frozenset[Any], Any]] = {}
        self._used: set[Hashable] = set()
        self.hits = self.misses = 0

    def get(self, key: Hashable, inputs: tuple[Any, ...], compute: Callable[[], T]) -> T:
        """compute(), or its last value if `inputs` and everything it read are unchanged."""
        self._used.add(key)
        entry = self._entries.get(key)
        if (
            entry is not None
            and len(entry[0]) == len(inputs)
            and all(a is b for a, b in zip(entry[0], inputs, strict=True))
            and not self.store.changed_since(entry[2], entry[1])
        ):
            self.hits += 1
            value: T = entry[3]
            return value
        self.misses += 1
        revision = self.store.revision
        with self.store.tracking() as reads:
            value = compute()
        self._entries[key] = (inputs, revision, frozenset(reads), value)
        return value

    def sweep(self) -> None:
        """Forget entries no step asked for since the last sweep (deleted objects)."""
        for key in self._entries.keys() - self._used:
            del self._entries[key]
        self._used = set()
