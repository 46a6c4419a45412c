"""Finding what a pass left untouched by identity, at C speed.

Translation hands back the very objects of the last pass for what did not
change (virtual hosts, statuses); comparing two passes' sequences pointer by
pointer, without looking inside, finds the few that changed in a fraction of
what hashing or comparing every item would cost at 10,000 routes.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

Run = Callable[[Sequence[Any], Sequence[Any]], int]


def _same_run(items: Sequence[Any], old: Sequence[Any]) -> int:
    differing = itertools.compress(itertools.count(), map(operator.is_not, items, old))
    return next(differing, min(len(items), len(old)))


def _equal_run(items: Sequence[Any], old: Sequence[Any]) -> int:
    for i in itertools.compress(itertools.count(), map(operator.is_not, items, old)):
        if items[i] != old[i]:
            return i
    return min(len(items), len(old))


def _ends(items: Sequence[Any], old: Sequence[Any], run: Run) -> tuple[int, int]:
    head = run(items, old)
    shorter = min(len(items), len(old))
    if head == shorter:
        return head, 0
    return head, min(run(items[::-1], old[::-1]), shorter - head)


def unchanged_ends(items: Sequence[Any], old: Sequence[Any]) -> tuple[int, int]:
    """How many leading and trailing items are the very objects of `old`, found
    at C speed (the two runs never overlap)."""
    return _ends(items, old, _same_run)


def equal_ends(items: Sequence[Any], old: Sequence[Any]) -> tuple[int, int]:
    """How many leading and trailing items equal `old`'s at the same place from
    either end; identity is checked at C speed, equality only where it fails."""
    return _ends(items, old, _equal_run)
