"""Computed status, kept per object with stable lastTransitionTime.

Translation recomputes status from scratch on every pass; this store keeps the
previous transition time of any condition whose status did not change, and
tells writers exactly which objects' status changed (so an API server is never
written to when nothing changed).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator
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


def _stamped(status: dict[str, Any], times: tuple[str, ...]) -> dict[str, Any]:
    """A computed status with each condition given its lastTransitionTime (`times`, in
    the order of _condition_lists): the dicts and lists on the way to each condition are
    new, every other part (a parentRef, supportedKinds, addresses...) is the computed
    status's own, which is never mutated."""
    stamps = iter(times)

    def stamp(conditions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**c, "lastTransitionTime": next(stamps)} for c in conditions]

    out = dict(status)
    if isinstance(out.get("conditions"), list):
        out["conditions"] = stamp(out["conditions"])
    for group in ("listeners", "parents", "ancestors"):
        if out.get(group):
            out[group] = [{**item, "conditions": stamp(item["conditions"])}
                          if isinstance(item.get("conditions"), list) else item for item in out[group]]
    return out


class StatusStore:
    """Each object's computed status and the lastTransitionTime of each of its conditions.

    The status with its times is put together when read (by the status writer, for the
    changed objects): kept stamped, every route held a copy of its status beside the
    computed one (3 MiB at 5,000 routes), where it now holds a tuple of times shared
    with every route whose conditions changed in the same pass."""

    def __init__(self) -> None:
        self._times: dict[ObjectKey, tuple[str, ...]] = {}
        self._plain: dict[ObjectKey, dict[str, Any]] = {}
        # The last update's keys and statuses, in order (the statuses are _plain's).
        self._order: tuple[list[ObjectKey], list[dict[str, Any]]] = ([], [])

    def get(self, key: ObjectKey) -> dict[str, Any] | None:
        plain = self._plain.get(key)
        return None if plain is None else _stamped(plain, self._times[key])

    def __iter__(self) -> Iterator[ObjectKey]:
        """The objects with a status (without putting each status together, as items() does)."""
        return iter(list(self._plain))

    def items(self) -> Iterable[tuple[ObjectKey, dict[str, Any]]]:
        for key, plain in list(self._plain.items()):
            yield key, _stamped(plain, self._times[key])

    def update(self, computed: dict[ObjectKey, dict[str, Any]]) -> set[ObjectKey]:
        """Replace all statuses; return the keys whose status changed.

        Computed statuses are kept by reference and must not be mutated later:
        translation hands back the very same object for an unchanged status,
        which is then skipped without comparing its contents."""
        changed: set[ObjectKey] = set()
        stamp = _now()
        # Times of this update, by content: thousands of routes share the same few.
        shared: dict[tuple[str, ...], tuple[str, ...]] = {}
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
                del self._times[key]
                del self._plain[key]
                changed.add(key)
        for key in candidates:
            status = computed[key]
            plain = plain_of(key)
            if plain == status:
                self._plain[key] = status  # equal content: compare by identity next time
                continue
            old: dict[tuple[str, str], tuple[str, str]] = {}  # (where, type) -> (status, since)
            if plain is not None:
                since = iter(self._times[key])
                old = {(path, c["type"]): (c["status"], next(since)) for path, conds in _condition_lists(plain)
                       for c in conds}
            times = tuple(prev[1] if (prev := old.get((path, c["type"]))) is not None and prev[0] == c["status"]
                          else stamp for path, conds in _condition_lists(status) for c in conds)
            self._plain[key] = status
            self._times[key] = shared.setdefault(times, times)
            changed.add(key)
        return changed
