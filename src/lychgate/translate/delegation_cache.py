"""Delegated children, compiled once and kept from pass to pass.

A parent HTTPRoute is compiled as one unit with every child it delegates to
(translate/routes.py), so a change to one child re-translates the parent. With
3,000 children under one parent that is 3,000 rules compiled again for one that
changed. Here each (parent rule, child) subtree is kept with what compiling it
read: the parent's next compilation takes the kept subtrees of the children that
did not change (the same ir.Route objects, so the xDS wire cache keeps their
bytes too) and compiles only the changed child's.

An entry is used while the parent and the child are the very objects it was
compiled from and nothing it read has changed since (forget() is told each
pass's changes); a full pass starts a new cache (translate/aggregate.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.gateway import HTTPRoute
from lychgate.store import Read, reached

# (parent, parent rule index, backendRef index, child, the delegation chain above the child)
SubtreeKey = tuple[ObjectKey, int, int, ObjectKey, frozenset[ObjectKey]]


@dataclass
class Subtree:
    """One child compiled under one parent rule: its routes (with the parent's hop and
    weight applied), clusters, and what it reports (translate/routes.py _delegate)."""

    parent: HTTPRoute
    child: HTTPRoute
    routes: list[ir.Route]
    clusters: dict[str, ir.Cluster]
    report: Any  # delegation.Report (not imported: delegation imports nothing of this)
    served: bool  # the child had rules under the parent's matches
    reads: frozenset[Read] = frozenset()


@dataclass
class SubtreeCache:
    entries: dict[SubtreeKey, Subtree] = field(default_factory=dict)
    _readers: dict[Read, set[SubtreeKey]] = field(default_factory=dict)

    def get(self, key: SubtreeKey, parent: HTTPRoute, child: HTTPRoute) -> Subtree | None:
        found = self.entries.get(key)
        if found is None or found.parent is not parent or found.child is not child:
            return None
        return found

    def put(self, key: SubtreeKey, subtree: Subtree) -> None:
        self._drop(key)
        self.entries[key] = subtree
        # A change to (or the deletion of) the parent or the child drops the entry too.
        own: set[Read] = {("key", subtree.parent.key), ("key", subtree.child.key)}
        for token in subtree.reads | own:
            self._readers.setdefault(token, set()).add(key)

    def forget(self, changes: Iterable[Read]) -> None:
        """Drop the subtrees that read something these changes touch."""
        for token in reached(changes):
            for key in self._readers.pop(token, ()):
                self._drop(key)

    def _drop(self, key: SubtreeKey) -> None:
        old = self.entries.pop(key, None)
        if old is None:
            return
        for token in old.reads | {("key", old.parent.key), ("key", old.child.key)}:
            readers = self._readers.get(token)
            if readers is not None:
                readers.discard(key)
                if not readers:
                    del self._readers[token]
