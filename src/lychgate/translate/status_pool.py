"""Equal route statuses as one object.

Thousands of routes attached the same way have the same status ("attached to http",
"all backend references resolved", the same parentRef): built per route, each held
its own nest of dicts and lists, about 1.5 KiB of every route kept from pass to pass.
Computed statuses are never mutated (status/store.py relies on that too), so routes
whose statuses are equal share the first one built.
"""

from __future__ import annotations

from typing import Any

from lychgate.interned import Interned


def frozen(value: Any) -> Any:
    """A hashable form of a status value that two values have alike only when equal
    (types included: True is not 1, a list is not a dict)."""
    if isinstance(value, dict):
        return (dict, *((k, frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return (list, *map(frozen, value))
    if isinstance(value, str):
        return value
    return (type(value), value)


class StatusPool:
    __slots__ = ("_pool",)

    def __init__(self) -> None:
        self._pool: Interned[dict[str, Any]] = Interned()

    def shared(self, status: dict[str, Any]) -> dict[str, Any]:
        """`status`, or an equal one handed out before."""
        return self._pool(status, frozen(status))
