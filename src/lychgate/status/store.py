"""Computed status, kept per object with stable lastTransitionTime.

Translation recomputes status from scratch on every pass; this store keeps the
previous transition time of any condition whose status did not change, and
tells writers exactly which objects' status changed (so an API server is never
written to when nothing changed).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from lychgate.api.base import ObjectKey
from lychgate.identity import equal_ends


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition_lists(status: dict[str, Any]) -> Iterable[tuple[str, list[dict[str, Any]]]]:
    """Every conditions list in a status, with a path naming where it sits."""
    if isinstance(status.get("conditions"), list):
        yield "", status["conditions"]
    for group, ident in (("listeners", "name"), ("parents", "parentRef"), ("ancestors", "ancestorRef")):
        for item in status.get(group) or []:
            if isinstance(item.get("conditions"), list):
                yield f"{group}/{item.get(ident)}", item["conditions"]


def _stamped(status: dict[str, Any]) -> dict[str, Any]:
    """A copy of a computed status whose conditions can be given their lastTransitionTime:
    the dicts and lists on the way to each condition are new, every other part (a
    parentRef, supportedKinds, addresses...) is the computed status's own, which is never
    mutated. A whole copy held 9 MiB at 5,000 routes."""
    out = dict(status)
    if isinstance(out.get("conditions"), list):
        out["conditions"] = list(out["conditions"])
    for group in ("listeners", "parents", "ancestors"):
        if out.get(group):
            out[group] = [{**item, "conditions": list(item["conditions"])}
                          if isinstance(item.get("conditions"), list) else item for item in out[group]]
    return out


def _condition(computed: dict[str, Any], since: str, prev: dict[str, Any] | None,
               shared: dict[tuple[Any, ...], dict[str, Any]]) -> dict[str, Any]:
    """The stored condition: the previous one when nothing in it changed, else one
    shared with every equal condition of this update. Conditions are never mutated."""
    condition = {**computed, "lastTransitionTime": since}
    if prev == condition:
        return prev
    try:
        return shared.setdefault(tuple(condition.items()), condition)
    except TypeError:  # a value that is not a scalar: not shared
        return condition


class StatusStore:
    def __init__(self) -> None:
        self._status: dict[ObjectKey, dict[str, Any]] = {}
        self._plain: dict[ObjectKey, dict[str, Any]] = {}
        # The last update's keys and statuses, in order (the statuses are _plain's).
        self._order: tuple[list[ObjectKey], list[dict[str, Any]]] = ([], [])

    def get(self, key: ObjectKey) -> dict[str, Any] | None:
        return self._status.get(key)

    def items(self) -> Iterable[tuple[ObjectKey, dict[str, Any]]]:
        return self._status.items()

    def update(self, computed: dict[ObjectKey, dict[str, Any]]) -> set[ObjectKey]:
        """Replace all statuses; return the keys whose status changed.

        Computed statuses are kept by reference and must not be mutated later:
        translation hands back the very same object for an unchanged status,
        which is then skipped without comparing its contents."""
        changed: set[ObjectKey] = set()
        stamp = _now()
        # Conditions stamped in this update, by content: thousands of routes share the same
        # few (attached, references resolved), and hold one dict each instead of theirs.
        shared: dict[tuple[Any, ...], dict[str, Any]] = {}
        plain_of = self._plain.get
        # The keys whose status is not the very object of the last pass. Translation keeps
        # its statuses in much the same order pass after pass: where the keys are the last
        # pass's at the same place (from either end), the statuses are compared pointer by
        # pointer, and only the keys between those runs are looked up (hashing all 10,000
        # route keys, scattered in memory, cost 3 ms a pass).
        keys, values = list(computed), list(computed.values())
        old_keys, old_values = self._order
        head, tail = equal_ends(keys, old_keys)
        back, old_back = len(keys) - tail, len(old_keys) - tail
        middle = keys[head:back]
        candidates = [
            *itertools.compress(keys[:head], map(operator.is_not, values[:head], old_values[:head])),
            *itertools.compress(middle, map(operator.is_not, map(computed.__getitem__, middle), map(plain_of, middle))),
            *itertools.compress(keys[back:], map(operator.is_not, values[back:], old_values[old_back:])),
        ]
        self._order = keys, values
        # Keys that went away: computed holds the kept keys and the new ones (all candidates),
        # so only when the counts say some went is the whole key set compared.
        new_keys = sum(k not in self._plain for k in candidates)
        if len(self._plain) + new_keys != len(computed):
            for key in self._plain.keys() - computed.keys():
                del self._status[key]
                del self._plain[key]
                changed.add(key)
        for key in candidates:
            status = computed[key]
            plain = plain_of(key)
            if plain == status:
                self._plain[key] = status  # equal content: compare by identity next time
                continue
            old = self._status.get(key, {})
            old_conds = {(path, c["type"]): c for path, conds in _condition_lists(old) for c in conds}
            new = _stamped(status)
            for path, conds in _condition_lists(new):
                for i, c in enumerate(conds):
                    prev = old_conds.get((path, c["type"]))
                    same = prev is not None and prev["status"] == c["status"]
                    conds[i] = _condition(c, prev["lastTransitionTime"] if same and prev else stamp, prev, shared)
            self._plain[key] = status
            self._status[key] = new
            changed.add(key)
        return changed
