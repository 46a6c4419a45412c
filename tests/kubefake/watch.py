"""One open watch: filters store events into the stream a client sees.

Filtering follows the watch cache: with a selector, an object that starts to
match arrives as ADDED, one that stops matching as DELETED (carrying its previous
state at the new resourceVersion), so a client's cache stays consistent.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

from .resources import ResourceType
from .selectors import FieldRequirement, Requirement, fields_match, labels_match
from .store import Event, Obj

WatchItem = tuple[str, Obj] | None  # None ends the stream cleanly


def present(rt: ResourceType, obj: Obj, version: str) -> Obj:
    """An object as served at `version` (all versions share storage, no conversion)."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = rt.api_version(version)
    out["kind"] = rt.kind
    return out


@dataclass(eq=False)
class Watcher:
    rt: ResourceType
    version: str
    namespace: str | None
    labels: list[Requirement]
    fields: list[FieldRequirement]
    bookmarks: bool
    transport: Any = None  # the client connection, so a test can cut it
    queue: asyncio.Queue[WatchItem] = field(default_factory=asyncio.Queue)

    def matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        return labels_match(self.labels, obj) and fields_match(self.fields, obj)

    def send(self, type_: str, obj: Obj) -> None:
        self.queue.put_nowait((type_, present(self.rt, obj, self.version)))

    def offer(self, ev: Event) -> None:
        if ev.key != self.rt.key:
            return
        now, before = self.matches(ev.obj), self.matches(ev.old)
        if ev.type == "DELETED":
            if now:
                self.send("DELETED", ev.obj)
        elif now and before:
            self.send("MODIFIED", ev.obj)
        elif now:
            self.send("ADDED", ev.obj)
        elif before and ev.old is not None:
            gone = copy.deepcopy(ev.old)
            gone.setdefault("metadata", {})["resourceVersion"] = str(ev.rv)
            self.send("DELETED", gone)

    def bookmark(self, rv: int, *, initial_events_end: bool = False) -> None:
        if not self.bookmarks:
            return
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_events_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        self.queue.put_nowait(("BOOKMARK", {"kind": self.rt.kind, "apiVersion": self.rt.api_version(self.version),
                                            "metadata": meta}))

    def stop(self) -> None:
        self.queue.put_nowait(None)
