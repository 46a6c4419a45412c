"""Finding what a pass left untouched by identity, at C speed.

Translation hands back the very objects of the last pass for what did not
change (virtual hosts, statuses); comparing two passes' sequences pointer by
pointer, without looking inside, finds the few that changed in a fraction of
what hashing or comparing every item would cost at 10,000 routes.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Sequence
from typing import Any


def _same_run(items: Iterable[Any], old: Iterable[Any], shorter: int) -> int:
    differing = itertools.compress(itertools.count(), map(operator.is_not, items, old))
    return next(differing, shorter)


def _equal_run(items: Sequence[Any], old: Sequence[Any]) -> int:
    for i in itertools.compress(itertools.count(), map(operator.is_not, items, old)):
        if items[i] != old[i]:
            return i
    return min(len(items), len(old))


def unchanged_ends(items: Sequence[Any], old: Sequence[Any]) -> tuple[int, int]:
    """How many leading and trailing items are the very objects of `old`, found
    at C speed (the two runs never overlap). The tail is compared through reversed
    views: a reversed copy of each was two tuples of thousands a call."""
    shorter = min(len(items), len(old))
    head = _same_run(items, old, shorter)
    if head == shorter:
        return head, 0
    return head, min(_same_run(reversed(items), reversed(old), shorter), shorter - head)


def equal_ends(items: Sequence[Any], old: Sequence[Any]) -> tuple[int, int]:
    """How many leading and trailing items equal `old`'s at the same place from
    either end; identity is checked at C speed, equality only where it fails."""
    head = _equal_run(items, old)
    shorter = min(len(items), len(old))
    if head == shorter:
        return head, 0
    return head, min(_equal_run(items[::-1], old[::-1]), shorter - head)
