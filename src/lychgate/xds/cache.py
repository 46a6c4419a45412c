"""Snapshots per Gateway: the Envoy resources each proxy should hold.

A snapshot is immutable. Versions are content hashes per type, so
re-translating identical input never makes a proxy re-apply its config, and two
control-plane replicas produce the same versions for the same input.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2

from lychgate.xds import types
from lychgate.xds.replicas import LOCAL_CLUSTER, replica_assignment
from lychgate.xds.translator import Resources


@dataclass(frozen=True)
class Snapshot:
    # type_url -> name -> the resource, encoded. (Not a protobuf Any: each of those holds its own
    # arena, 580 bytes a resource, 3.4 MiB at 3,000 clusters and their endpoints. The type is
    # the dict's; an Any is made where a message must hold one: state-of-the-world answers.)
    resources: dict[str, dict[str, bytes]]
    versions: dict[str, str]
    # type_url -> name -> content hash, for delta xDS and change detection
    hashes: dict[str, dict[str, str]] = field(default_factory=dict)
    # type_url -> (the previous snapshot's hashes of that type, names changed or
    # added since, names removed since): found once here, so that each delta
    # stream that held the previous snapshot sends what changed without
    # comparing every resource again (xds/server.py).
    steps: dict[str, tuple[dict[str, str], frozenset[str], frozenset[str]]] = field(default_factory=dict)
    # type_url -> name -> the resource as a delta response's entry, encoded when a
    # delta stream first sends it, then shared by every stream of the Gateway and
    # by the next snapshots while the resource stays the same (xds/delta.py).
    entries: dict[str, dict[str, bytes]] = field(default_factory=dict, compare=False, repr=False)
    # Whole delta answers shared by the streams that ask the same (xds/delta.py, DeltaState.respond).
    delta_bodies: dict[tuple[Any, ...], tuple[Any, ...]] = field(default_factory=dict, compare=False, repr=False)
    # type_url -> name -> the message the resource was packed from, for the types whose
    # messages the translator reuses pass after pass (IDENTIFIED): a resource whose message
    # is the same object in the next build is the same resource (make_snapshot).
    messages: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False, repr=False)

    def version(self, type_url: str) -> str:
        return self.versions.get(type_url, "")

    def delta_entry(self, type_url: str, name: str) -> bytes:
        """The bytes of a DeltaDiscoveryResponse holding only this resource (its `resources` field)."""
        entries = self.entries.setdefault(type_url, {})
        entry = entries.get(name)
        if entry is None:
            resource = discovery_pb2.Resource(name=name, version=self.hashes[type_url][name],
                                              resource=as_any(type_url, self.resources[type_url][name]))
            entry = entries[name] = discovery_pb2.DeltaDiscoveryResponse(resources=[resource]).SerializeToString()
        return entry

    def size_bytes(self) -> int:
        return sum(map(len, itertools.chain.from_iterable(byname.values() for byname in self.resources.values())))


# Clusters and their endpoints are the same objects while unchanged (translator/__init__.py,
# _cluster_resources), and so are the scopes of a split route table (scoped.scope_resources);
# route tables and listeners are built anew with their Gateway.
IDENTIFIED = frozenset({types.CLUSTER, types.ENDPOINT, types.SCOPED_ROUTE})


def make_snapshot(resources: Resources, previous: Snapshot | None = None) -> Snapshot:
    """The snapshot of `resources`. What the previous snapshot was packed from the very
    same message objects (unchanged clusters and virtual hosts are: translator/wire.py)
    is taken from it as it is; only the others are hashed and packed, and a type none of
    whose resources changed keeps its version. At 3,000 clusters, hashing and packing
    every resource again took 5 ms of every change to one route."""
    encoded: dict[str, dict[str, bytes]] = {}
    entries: dict[str, dict[str, bytes]] = {}
    hashes: dict[str, dict[str, str]] = {}
    versions: dict[str, str] = {}
    steps: dict[str, tuple[dict[str, str], frozenset[str], frozenset[str]]] = {}
    messages: dict[str, dict[str, Any]] = {}
    for type_url, byname in resources.by_type.items():
        before = previous.hashes.get(type_url) if previous is not None else None
        before_messages = previous.messages.get(type_url) if previous is not None else None
        identical = False  # the very messages of the previous snapshot, under the same names
        if previous is not None and before is not None and before_messages is not None:
            names, removed = _differences(byname, before_messages, before)
            identical = not names and not removed
            if identical:
                changed: list[str] = []  # (the previous snapshot's dicts, below)
            else:
                type_packed, type_hashes = dict(previous.resources[type_url]), dict(before)
                kept = dict(previous.entries.get(type_url, {}))
                for name in removed:
                    del type_packed[name], type_hashes[name]
                    kept.pop(name, None)
                changed = _pack(type_url, byname, names, previous, type_packed, type_hashes, kept)
                if any(n not in before for n in changed):  # new names: in order, as a full pack has them
                    type_packed = {n: type_packed[n] for n in sorted(type_packed)}
                    type_hashes = {n: type_hashes[n] for n in sorted(type_hashes)}
        else:
            removed = before.keys() - byname.keys() if before is not None else set()
            type_packed, type_hashes, kept = {}, {}, {}
            changed = _pack(type_url, byname, sorted(byname), previous, type_packed, type_hashes, kept)
        if type_url in IDENTIFIED:
            messages[type_url] = before_messages if identical and before_messages is not None else dict(byname)
        if previous is not None and before is not None and not changed and not removed:
            # Not one resource of the type changed: the previous snapshot's very dicts. A delta
            # stream that holds them sees at once that it holds this type (DeltaState.synced_to
            # is an identity test); a copy cost each stream a search for changes per type, at
            # every change (a tenth of the controller's CPU for a change to 1,000 proxies).
            type_packed, type_hashes = previous.resources[type_url], before
            kept = previous.entries.setdefault(type_url, {})  # (filled as streams first send)
            versions[type_url] = previous.versions[type_url]
        else:
            versions[type_url] = _type_version(type_hashes)
        encoded[type_url], hashes[type_url], entries[type_url] = type_packed, type_hashes, kept
        if before is not None:
            steps[type_url] = (before, frozenset(changed), frozenset(removed))
    return Snapshot(resources=encoded, versions=versions, hashes=hashes, steps=steps, entries=entries,
                    messages=messages)


def _differences(byname: dict[str, Any], before_messages: dict[str, Any],
                 before_hashes: dict[str, str]) -> tuple[list[str], set[str]]:
    """The names whose message is not the very object the previous snapshot was packed from, and
    the names gone. Pass after pass a Gateway's clusters come in the same order: the names then
    compare as lists and the messages by place, at C speed (a look-up per name, and a set of the
    names gone, took 0.7 ms of every change to one route at 3,000 clusters)."""
    if len(byname) == len(before_messages) and list(byname) == list(before_messages):
        return list(itertools.compress(byname, map(operator.is_not, byname.values(), before_messages.values()))), set()
    return [n for n, m in byname.items() if before_messages.get(n) is not m], before_hashes.keys() - byname.keys()


def _pack(type_url: str, byname: dict[str, Any], names: list[str], previous: Snapshot | None,
          packed: dict[str, bytes], hashes: dict[str, str], kept: dict[str, bytes]) -> list[str]:
    """Hash and pack the resources `names` of one type into `packed` and `hashes`; the
    names whose content differs from the previous snapshot's (or is new)."""
    before = previous.hashes.get(type_url, {}) if previous is not None else {}
    before_entries = previous.entries.get(type_url, {}) if previous is not None else {}
    changed: list[str] = []
    for name in names:
        message = byname[name]
        digest = getattr(message, "digest", None)  # parts-hashed (translator/wire.py)
        blob = b"" if digest else message.SerializeToString(deterministic=True)
        digest = digest or hashlib.blake2b(blob, digest_size=8).hexdigest()
        if previous is not None and before.get(name) == digest:
            blob = previous.resources[type_url][name]  # share, don't duplicate
            if (entry := before_entries.get(name)) is not None:
                kept[name] = entry
        else:
            blob = blob or message.SerializeToString(deterministic=True)  # (a RawMessage's own bytes)
            kept.pop(name, None)
            changed.append(name)
        packed[name] = blob
        hashes[name] = digest
    return changed


def _type_version(hashes: dict[str, str]) -> str:
    type_hash = hashlib.blake2b(digest_size=8)
    for name in sorted(hashes):
        type_hash.update(name.encode())
        type_hash.update(hashes[name].encode())
    return type_hash.hexdigest()


def _with_endpoints(old: Snapshot, assignment: endpoint_pb2.ClusterLoadAssignment) -> Snapshot:
    """`old` with one ClusterLoadAssignment replaced and every other type shared
    as it is (the same dicts: a delta stream holding them sends nothing of them)."""
    type_url, name = types.ENDPOINT, assignment.cluster_name
    blob = assignment.SerializeToString(deterministic=True)
    digest = hashlib.blake2b(blob, digest_size=8).hexdigest()
    before = old.hashes.get(type_url, {})
    if before.get(name) == digest:
        return old
    hashes = {**before, name: digest}
    packed = {**old.resources.get(type_url, {}), name: blob}
    entries = {n: e for n, e in old.entries.get(type_url, {}).items() if n != name}
    return Snapshot(
        resources={**old.resources, type_url: packed},
        versions={**old.versions, type_url: _type_version(hashes)},
        hashes={**old.hashes, type_url: hashes},
        steps={**old.steps, type_url: (before, frozenset({name}), frozenset())},
        entries={**old.entries, type_url: entries},
        messages={**old.messages, type_url: {**old.messages.get(type_url, {}), name: assignment}}
        if type_url in old.messages else old.messages,
    )


_NO_REPLICAS = replica_assignment(())


class Waker(Protocol):
    """What a Gateway's new snapshot wakes: an asyncio.Event, or a stream's writer (xds/server.py)."""

    def set(self) -> None: ...


class SnapshotCache:
    """Current snapshot per node (Gateway "namespace/name"), with change wakeups.

    Each snapshot also holds the node's local cluster endpoints (xds/replicas.py),
    which follow the proxies connected rather than translation: a proxy that
    connects or leaves replaces that one resource, nothing else is rebuilt.
    Only a node whose configuration counts its replicas (a local rate limit shared
    across the Gateway) is sent them: for any other, every proxy that came or went
    would be a push to all its proxies for nothing (1,000 proxies reconnecting
    after a restart would get a dozen such pushes each), so its local cluster
    stays empty, which Envoy needs no more of."""

    def __init__(self) -> None:
        self._snapshots: dict[str, Snapshot] = {}
        self._watchers: dict[str, set[Waker]] = {}
        self._replicas: dict[str, endpoint_pb2.ClusterLoadAssignment] = {}
        self._counted: set[str] = set()  # nodes whose configuration counts their replicas

    def get(self, node: str) -> Snapshot | None:
        return self._snapshots.get(node)

    def nodes(self) -> list[str]:
        return sorted(self._snapshots)

    def set(self, node: str, resources: Resources, counts_replicas: bool = True) -> Snapshot:
        """Install a new snapshot of `resources` and the node's local cluster (its
        replicas when `counts_replicas`, else empty); watchers wake only if some
        version changed."""
        old = self._snapshots.get(node)
        if counts_replicas:
            self._counted.add(node)
        else:
            self._counted.discard(node)
        local = self._replicas.get(node, _NO_REPLICAS) if counts_replicas else _NO_REPLICAS
        endpoints = {**resources.by_type.get(types.ENDPOINT, {}), LOCAL_CLUSTER: local}
        snap = make_snapshot(Resources({**resources.by_type, types.ENDPOINT: endpoints}), old)
        return self._install(node, old, snap)

    def set_replicas(self, node: str, peers: list[str]) -> None:
        """The proxies of `node` now connected, by gRPC peer address."""
        assignment = replica_assignment(peers)
        if peers:
            self._replicas[node] = assignment
        else:
            self._replicas.pop(node, None)
        old = self._snapshots.get(node)
        if old is not None and node in self._counted:
            self._install(node, old, _with_endpoints(old, assignment))

    def _install(self, node: str, old: Snapshot | None, snap: Snapshot) -> Snapshot:
        """Install a new snapshot; watchers wake only if some version changed."""
        if old is not None and old.versions == snap.versions:
            return old
        self._snapshots[node] = snap
        self._notify(node)
        return snap

    def forget_encodings(self, nodes: Iterable[str] | None = None) -> None:
        """Drop what the snapshots (of `nodes`, else all) keep encoded for delta streams
        (Snapshot.entries, delta_bodies): it is made again when a stream needs it. (In place:
        a snapshot shares its entries with the next while its resources stay the same.)"""
        for snap in (self._snapshots.values() if nodes is None
                     else filter(None, map(self._snapshots.get, nodes))):
            for kept in snap.entries.values():
                kept.clear()
            snap.delta_bodies.clear()

    def remove(self, node: str) -> None:
        self._counted.discard(node)
        if self._snapshots.pop(node, None) is not None:
            self._notify(node)

    def watch(self, node: str, event: Waker) -> None:
        self._watchers.setdefault(node, set()).add(event)

    def unwatch(self, node: str, event: Waker) -> None:
        self._watchers.get(node, set()).discard(event)

    def _notify(self, node: str) -> None:
        for event in self._watchers.get(node, ()):
            event.set()

    def resources_json(self, node: str) -> dict[str, Any]:
        """Used by debug surfaces; decodes lazily because it is slow."""
        from lychgate.xds.dump import as_dict

        snap = self._snapshots.get(node)
        if snap is None:
            return {}
        out: dict[str, Any] = {}
        for type_url, byname in snap.resources.items():
            items = []
            for blob in byname.values():
                items.append(as_dict(type_url, decode(type_url, blob)))
            out[types.SHORT.get(type_url, type_url)] = {"version": snap.version(type_url), "resources": items}
        return out


def route_hash(route: Any) -> str:
    """A short content hash of one Envoy Route (for comparing intent with a proxy)."""
    return hashlib.blake2b(route.SerializeToString(deterministic=True), digest_size=8).hexdigest()


def decode(type_url: str, blob: bytes) -> Any:
    """An encoded resource as its Envoy message."""
    from envoy.config.cluster.v3 import cluster_pb2
    from envoy.config.endpoint.v3 import endpoint_pb2
    from envoy.config.listener.v3 import listener_pb2
    from envoy.config.route.v3 import route_pb2, scoped_route_pb2

    cls = {
        types.CLUSTER: cluster_pb2.Cluster,
        types.ENDPOINT: endpoint_pb2.ClusterLoadAssignment,
        types.LISTENER: listener_pb2.Listener,
        types.ROUTE: route_pb2.RouteConfiguration,
        types.SCOPED_ROUTE: scoped_route_pb2.ScopedRouteConfiguration,
    }[type_url]
    return cls.FromString(blob)


def as_any(type_url: str, blob: bytes) -> any_pb2.Any:
    """An encoded resource in the Any a response holds."""
    return any_pb2.Any(type_url=type_url, value=blob)
