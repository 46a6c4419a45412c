"""The object store: every object the sources delivered, indexed for translation.

Sources (files or the Kubernetes API) write here; translation reads. Each write
records which keys changed so the control loop can tell what to recompute.
Objects are immutable pydantic models, so readers may hold them without copying.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import contextlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lychgate.api.base import ObjectKey, Resource
from lychgate.api.core import EndpointSlice
from lychgate.store.compact import compact

R = TypeVar("R", bound=Resource)
# ("key", ObjectKey) | ("slices", (namespace, service)) | ("list", (kind, namespace or None))
Read = tuple[str, object]
LOG_SIZE = 100_000


@dataclass
class Change:
    """Keys touched since the last drain, and a counter that only goes up."""

    keys: set[ObjectKey] = field(default_factory=set)
    revision: int = 0


@dataclass(frozen=True)
class Refusal:
    """An object a source read but could not parse (status/invalid.py reports it).

    The store keeps the last valid version of the object, if any; this says why the
    newer one was refused."""

    message: str  # "TrafficPolicy default/x: spec.a: ...; spec.b: ..."
    fields: tuple[tuple[str, str], ...]  # (field path, message) of each field refused
    generation: int  # the refused version's metadata.generation
    raw: Mapping[str, Any] = field(compare=True, hash=False)  # the manifest, without status


def reached(changes: Iterable[Read]) -> set[Read]:
    """Every read token a change answers: a changed object also changes the lists it is in."""
    out = set(changes)
    for what, ident in changes:
        if what == "key":
            assert isinstance(ident, ObjectKey)
            out.add(("list", (ident.kind, ident.namespace)))
            out.add(("list", (ident.kind, None)))
    return out


class Store:
    def __init__(self) -> None:
        self._by_kind: dict[str, dict[ObjectKey, Resource]] = defaultdict(dict)
        # The same by (kind, namespace): a namespace's list without a walk over every
        # namespace's (delegation lists one team's HTTPRoutes among thousands).
        self._by_namespace: dict[tuple[str, str], dict[ObjectKey, Resource]] = defaultdict(dict)
        # EndpointSlices by the (namespace, service) they belong to: the one
        # lookup translation does per backend.
        self._slices: dict[tuple[str, str], dict[ObjectKey, EndpointSlice]] = defaultdict(dict)
        self._pending = Change()
        self._revision = 0
        self._reads: set[Read] | None = None
        # What changed, in order: (revision, read token). Bounded; older history
        # is summarized by _log_floor (asking about it answers "unknown").
        self._log: collections.deque[tuple[int, Read]] = collections.deque(maxlen=LOG_SIZE)
        self._log_floor = 0
        self._wakeup = asyncio.Event()
        self.synced = False
        self._kind_revisions: dict[str, int] = {}  # kind -> revision of its last change
        self._refused: dict[ObjectKey, Refusal] = {}

    # --- writes -----------------------------------------------------------

    def upsert(self, obj: Resource, key: ObjectKey | None = None) -> bool:
        """Store obj; return False when it equals what is stored already. `key`: obj.key, when
        the caller holds it (one tuple per object, not one per index that holds it)."""
        if key is None:
            key = obj.key
        old = self._by_kind[key.kind].get(key)
        if old == obj:
            return False
        if isinstance(old, EndpointSlice):
            self._unindex_slice(old)
        compact(obj)
        self._by_kind[key.kind][key] = obj
        self._by_namespace[(key.kind, key.namespace)][key] = obj
        if isinstance(obj, EndpointSlice) and obj.service_name:
            self._slices[(key.namespace, obj.service_name)][key] = obj
        self._touch(key)
        if isinstance(obj, EndpointSlice) and obj.service_name:
            self._record(("slices", (key.namespace, obj.service_name)))
        return True

    def delete(self, key: ObjectKey) -> Resource | None:
        old = self._by_kind[key.kind].pop(key, None)
        if old is None:
            return None
        bucket = self._by_namespace[(key.kind, key.namespace)]
        del bucket[key]
        if not bucket:
            del self._by_namespace[(key.kind, key.namespace)]
        if isinstance(old, EndpointSlice):
            self._unindex_slice(old)
        self._touch(key)
        return old

    def poke(self, key: ObjectKey) -> None:
        """Record a change of `key` without changing the object: for what translation
        derives from it outside the store (an OAuth2 extension's discovered endpoints),
        so the next pass recomputes whatever read it."""
        self._touch(key)

    def refuse(self, key: ObjectKey, refusal: Refusal) -> None:
        """A source could not parse this version of `key` (its last valid version, if
        any, stays). No object changes, so translation has nothing to recompute; the
        control loop is woken all the same, for the status to say so."""
        if self._refused.get(key) != refusal:
            self._refused[key] = refusal
            self._wakeup.set()

    def unrefuse(self, key: ObjectKey) -> None:
        """`key` parses again, or is gone: its status is translation's again."""
        if self._refused.pop(key, None) is not None:
            self._wakeup.set()

    @property
    def refused(self) -> Mapping[ObjectKey, Refusal]:
        return self._refused

    def _unindex_slice(self, old: EndpointSlice) -> None:
        if old.service_name:
            self._log.append((self._revision + 1, ("slices", (old.namespace, old.service_name))))
            bucket = self._slices.get((old.namespace, old.service_name))
            if bucket is not None:
                bucket.pop(old.key, None)

    def _touch(self, key: ObjectKey) -> None:
        self._revision += 1
        self._kind_revisions[key.kind] = self._revision
        self._record(("key", key))
        self._pending.keys.add(key)
        self._pending.revision = self._revision
        self._wakeup.set()

    def _record(self, token: Read) -> None:
        if len(self._log) == self._log.maxlen:
            self._log_floor = self._log[0][0]
        self._log.append((self._revision, token))

    def forget_changes_until(self, revision: int) -> None:
        """The reader is up to date with `revision` (translation, after a pass): what
        changed until then is dropped from the log, which otherwise holds the last
        LOG_SIZE changes (15 MiB once full, after half an hour of churn). Asking about
        an older revision then answers "unknown", as past the log's end."""
        while self._log and self._log[0][0] <= revision:
            self._log.popleft()
        self._log_floor = max(self._log_floor, revision)

    def changes_since(self, revision: int) -> set[Read] | None:
        """Read tokens touched after `revision` (each changed key, and the Services
        whose EndpointSlices changed); None when that is older than the log keeps."""
        if revision < self._log_floor:
            return None
        out: set[Read] = set()
        for rev, token in reversed(self._log):
            if rev <= revision:
                break
            out.add(token)
        return out

    # --- reads ------------------------------------------------------------

    def get(self, cls: type[R], namespace: str, name: str) -> R | None:
        key = ObjectKey(cls.KIND, namespace, name)
        if self._reads is not None:
            self._reads.add(("key", key))
        obj = self._by_kind[cls.KIND].get(key)
        return obj if isinstance(obj, cls) else None

    def get_key(self, key: ObjectKey) -> Resource | None:
        return self._by_kind[key.kind].get(key)

    def list(self, cls: type[R], namespace: str | None = None) -> builtins.list[R]:
        if self._reads is not None:
            self._reads.add(("list", (cls.KIND, namespace)))
        items: Iterable[Resource] = (self._by_kind[cls.KIND] if namespace is None
                                     else self._by_namespace.get((cls.KIND, namespace), {})).values()
        return [o for o in items if isinstance(o, cls)]

    def kinds(self) -> builtins.list[str]:
        return sorted(k for k, v in self._by_kind.items() if v)

    def count(self, kind: str) -> int:
        n = len(self._by_kind.get(kind, ()))
        if n == 0 and self._reads is not None:
            # "There are none" is what the reader learned (a shortcut before a list):
            # the first object of the kind changes it.
            self._reads.add(("list", (kind, None)))
        return n

    def all(self) -> Iterator[Resource]:
        for bucket in self._by_kind.values():
            yield from bucket.values()

    def endpoint_slices(self, namespace: str, service: str) -> builtins.list[EndpointSlice]:
        if self._reads is not None:
            self._reads.add(("slices", (namespace, service)))
        return list(self._slices.get((namespace, service), {}).values())

    # --- read tracking, for incremental translation --------------------------------

    @contextlib.contextmanager
    def tracking(self) -> Iterator[set[Read]]:
        """Record what is read inside the block (nesting: the outer block sees all)."""
        outer, self._reads = self._reads, set()
        reads = self._reads
        try:
            yield reads
        finally:
            self._reads = outer
            if outer is not None:
                outer.update(reads)

    def replay(self, reads: Iterable[Read]) -> None:
        """Count reads made earlier (by a result kept from then) as made now: the
        enclosing tracking block depends on them as if it had read them itself."""
        if self._reads is not None:
            self._reads.update(reads)


    def last_change(self, exclude: frozenset[str] = frozenset()) -> int:
        """The revision of the last change to an object of a kind not excluded."""
        return max((r for k, r in self._kind_revisions.items() if k not in exclude), default=0)

    @property
    def revision(self) -> int:
        return self._revision

    # --- change feed ----------------------------------------------------------

    async def wait_for_change(self) -> None:
        await self._wakeup.wait()

    def drain(self) -> Change:
        """Take the changes recorded since the last drain."""
        change, self._pending = self._pending, Change(revision=self._revision)
        self._wakeup.clear()
        return change
