"""What a delta xDS proxy holds of one type, kept as a difference from a snapshot.

Every proxy of a Gateway that is in sync holds exactly the Gateway's snapshot
(the names it wants of it). So a stream does not keep its own copy of
name → version: it keeps `basis`, the hashes dict of a snapshot (one object,
shared by every stream of the Gateway and by the snapshot itself), and `diff`,
the names where the proxy holds something else (a version, or None: nothing),
which is empty once it has been sent the snapshot. What the proxy holds of a
name is its `diff` entry if it has one, else the basis's version if the proxy
wanted the name when it was sent the basis (`basis_names`, `basis_wildcard`:
the subscription objects of then, shared too). A subscription that changes since
changes what the proxy wants, not what it holds; only a re-subscription to what
it holds (it asks for it again) and a refused response write to `diff`.

Streams of a Gateway also share the bytes they are sent: each resource is
encoded once per snapshot (Snapshot.delta_entry), and a response is the
concatenation of those entries and a small head of its own (version, removals,
nonce). Concatenated protobuf messages are one message with their repeated
fields joined, so the bytes are those of one DeltaDiscoveryResponse. Streams
that ask the same get the very same response, nonce included (respond):
copying a 47 KiB answer once per stream to give it a nonce of its own was about
6 % of a change's fan-out at 200 proxies (py-spy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from envoy.service.discovery.v3 import discovery_pb2

from lychgate.xds import delta_request
from lychgate.xds.cache import Snapshot

T = TypeVar("T")

# The basis of a proxy that holds nothing yet, and a diff of nothing (never mutated).
EMPTY: dict[str, str] = {}
EMPTY_DIFF: dict[str, str | None] = {}


class Holding(NamedTuple):
    """What a proxy held at one moment (kept with a response in flight, to roll back on NACK):
    the versions of `basis` it wanted then (`wildcard`, `names`), with `diff` on top. (A
    tuple: two are made per response sent, and a frozen dataclass's take twice as long to make.)"""

    basis: dict[str, str]
    diff: dict[str, str | None]
    wildcard: bool
    names: frozenset[str]

    def held(self, name: str) -> str | None:
        if name in self.diff:
            return self.diff[name]
        return self.basis.get(name) if self.wildcard or name in self.names else None


@dataclass(slots=True)  # (one per type per stream)
class DeltaState:
    """The delta bookkeeping of one type on one stream."""

    wildcard: bool = False  # subscribed to everything
    names: frozenset[str] = frozenset()  # subscribed by name (one object for equal sets: AdsServer._intern)
    # What the proxy holds: `basis` as wanted when it was sent (basis_wildcard, basis_names), and `diff`.
    basis: dict[str, str] = field(default_factory=lambda: EMPTY)
    basis_wildcard: bool = False
    basis_names: frozenset[str] = frozenset()
    diff: dict[str, str | None] = field(default_factory=dict)
    # nonce -> (the type version sent, what the proxy held before, what it holds if it takes it)
    inflight: dict[str, tuple[str, Holding, Holding]] = field(default_factory=dict)
    rejected: str | None = None  # the type version last refused
    answered: bool = False

    def holding(self) -> Holding:
        return Holding(self.basis, self.diff, self.basis_wildcard, self.basis_names)

    def held(self, name: str) -> str | None:
        if name in self.diff:
            return self.diff[name]
        return self.basis.get(name) if self.basis_wildcard or name in self.basis_names else None

    def holds(self) -> dict[str, str]:
        """Everything the proxy holds, name -> version (debugging and tests; costs a pass over the basis)."""
        names = {n for n in self.basis if self.basis_wildcard or n in self.basis_names} | self.diff.keys()
        return {n: v for n in sorted(names) if (v := self.held(n)) is not None}

    def _canonical(self) -> bool:
        """Does the proxy hold exactly its basis, as it wants it now (nothing of its own)?"""
        return not self.diff and self.names is self.basis_names and self.wildcard == self.basis_wildcard

    def synced_to(self, hashes: dict[str, str]) -> bool:
        """Does the proxy hold `hashes` (the names it wants of them), as far as the control plane knows?"""
        return self.basis is hashes and self._canonical()

    def forget_all(self) -> None:
        """Assume the proxy holds nothing (all is sent again), and refused nothing."""
        self.basis, self.diff, self.rejected = EMPTY, {}, None

    def forget(self, name: str) -> None:
        """Assume the proxy does not hold `name` (it will be sent again)."""
        if self.held(name) is not None:
            self.diff[name] = None

    def forget_any(self, names: frozenset[str]) -> None:
        """forget() each of `names`: only those in the basis or `diff` can be held, found by set
        intersections at C speed (an Envoy that joins subscribes to thousands of endpoints at once,
        and one by one they were a tenth of the controller's CPU when a fleet joined together)."""
        for name in (self.basis.keys() & names) | (self.diff.keys() & names):
            self.forget(name)

    def initial(self, versions: dict[str, str], hashes: dict[str, str] | None,
                shared: dict[tuple[Any, ...], tuple[Any, ...]] | None = None) -> None:
        """What a reconnecting proxy says it holds. Mostly the snapshot itself (versions are
        content hashes, the same after a control-plane restart): then it holds that very basis,
        and `diff` only the names where it holds something else. `shared`: the snapshot's
        (Snapshot.delta_bodies), where what the streams of a Gateway want of it is kept."""
        if hashes is None or self.basis is not EMPTY or self.diff:
            self.diff.update(versions)
            return
        wanted = self._wanted(hashes, shared)
        self.synced(hashes)
        if versions != wanted:
            self.diff = dict(versions.items() - wanted.items())
            self.diff.update(dict.fromkeys(wanted.keys() - versions.keys()))

    def initial_entries(self, entries: Sequence[bytes], hashes: dict[str, str] | None,
                        shared: dict[tuple[Any, ...], tuple[Any, ...]] | None = None) -> None:
        """initial(), given the map's raw entries (xds/delta_request.py): when they are exactly the
        snapshot's, encoded as a proxy does, the proxy holds the very basis and no entry is decoded.

        As many entries, each one of the snapshot's, are all of them: a map's keys are distinct
        on the wire as every protobuf library writes one. They are looked up one by one, not made
        into a set first: a set of 3,000 is a 128 KiB table, mapped and unmapped each time at the
        mmap threshold memory.py fixes (325 µs against 200; a reconnect storm of 1,000 proxies
        took 0.9-1.3 s less of the controller's CPU)."""
        if hashes is not None and self.basis is EMPTY and not self.diff:
            wanted = self._wanted(hashes, shared)
            if len(entries) == len(wanted) and _encoded(wanted, shared).issuperset(entries):
                self.synced(hashes)
                return
        self.initial(delta_request.versions(entries), hashes, shared)

    def _wanted(self, hashes: dict[str, str], shared: dict[tuple[Any, ...], tuple[Any, ...]] | None,
                ) -> dict[str, str]:
        return hashes if self.wildcard else _wanted(hashes, self.names, shared)

    def changes(self, hashes: dict[str, str], step: tuple[dict[str, str], frozenset[str], frozenset[str]] | None,
                ) -> tuple[list[str], list[str]]:
        """What to send for the proxy to hold `hashes` (of the names it wants): names changed or
        added, names to remove. Looks only at the names that can differ: `diff`'s and those whose
        subscription changed when it holds `hashes` already, and also the snapshot's step when
        it holds the previous one."""
        candidates: set[str] | frozenset[str]
        if self.basis is hashes or (step is not None and step[0] is self.basis):
            candidates = set(self.diff)
            if self.names is not self.basis_names:
                candidates |= self.names ^ self.basis_names
            if self.wildcard != self.basis_wildcard:
                candidates |= self.basis.keys() | hashes.keys()
            if self.basis is not hashes and step is not None:
                candidates |= step[1] | step[2]
        else:
            candidates = self.basis.keys() | self.diff.keys() | (hashes.keys() if self.wildcard else self.names)
        changed, removed = [], []
        for name in candidates:
            target = hashes.get(name) if self.wildcard or name in self.names else None
            now = self.held(name)
            if target is not None and now != target:
                changed.append(name)
            elif target is None and now is not None:
                removed.append(name)
        changed.sort()
        removed.sort()
        return changed, removed

    def respond(self, snapshot: Snapshot, type_url: str, nonces: Iterator[int]) -> tuple[list[str], list[str], str, bytes]:
        """changes(), the response's nonce and its bytes. Proxies that hold the same basis, want
        the same names and have nothing of their own get the same answer, nonce included: found
        and encoded once per snapshot, and handed to each stream as it is (a nonce is unique on
        its stream, which is all Envoy asks; one this stream still has in flight is replaced)."""
        hashes = snapshot.hashes.get(type_url, EMPTY)
        step = snapshot.steps.get(type_url)
        shared = not self.diff
        key = (type_url, id(self.basis), self.basis_wildcard, id(self.basis_names), self.wildcard, id(self.names))
        if shared and (hit := snapshot.delta_bodies.get(key)) is not None \
                and hit[0] is self.basis and hit[1] is self.basis_names and hit[2] is self.names:
            changed, removed, nonce, message = hit[3:]
            if nonce not in self.inflight:
                return changed, removed, nonce, message
            fresh = str(next(nonces))
            return changed, removed, fresh, message[:-len(_nonce_field(nonce))] + _nonce_field(fresh)
        changed, removed = self.changes(hashes, step)
        nonce = str(next(nonces))
        message = encode(snapshot, type_url, snapshot.version(type_url), changed, removed) + _nonce_field(nonce)
        if shared and len(snapshot.delta_bodies) < MAX_SHARED:
            # Holding the objects keeps their ids from being reused while the key lives.
            snapshot.delta_bodies[key] = (self.basis, self.basis_names, self.names, changed, removed, nonce, message)
        return changed, removed, nonce, message

    def sent(self, nonce: str, version: str, hashes: dict[str, str]) -> None:
        """A response made the proxy hold `hashes` (unless it refuses it)."""
        before = self.holding()
        self.synced(hashes)
        # `diff` is changed in place from now on: what the proxy holds after this one has none.
        self.inflight[nonce] = (version, before, Holding(hashes, EMPTY_DIFF, self.wildcard, self.names))

    def synced(self, hashes: dict[str, str]) -> None:
        self.basis, self.basis_wildcard, self.basis_names, self.diff = hashes, self.wildcard, self.names, {}

    def rollback(self, before: Holding, after: Holding) -> None:
        """The proxy refused a response: it kept what it held before for every name the response touched."""
        for name in before.basis.keys() | before.diff.keys() | after.basis.keys():
            old = before.held(name)
            if old != after.held(name):
                self.diff[name] = old


def _wanted(hashes: dict[str, str], names: frozenset[str],
            shared: dict[tuple[Any, ...], tuple[Any, ...]] | None) -> dict[str, str]:
    """The versions of the names subscribed, found once for all the streams of a Gateway that
    reconnect together (one hashes dict and one names object: 3,000 endpoints cost 0.4 ms a
    proxy)."""
    return _once(shared, "wanted", (hashes, names), lambda: {n: hashes[n] for n in names & hashes.keys()})


def _encoded(wanted: dict[str, str], shared: dict[tuple[Any, ...], tuple[Any, ...]] | None) -> frozenset[bytes]:
    """`wanted` as the map entries a proxy that holds it sends (delta_request.entry)."""
    return _once(shared, "encoded", (wanted,),
                 lambda: frozenset([delta_request.entry(name, version) for name, version in wanted.items()]))


def _once(shared: dict[tuple[Any, ...], tuple[Any, ...]] | None, what: str, of: tuple[Any, ...],
          make: Callable[[], T]) -> T:
    """make(), once per snapshot for the very objects `of`: kept in `shared` (the snapshot's
    delta_bodies, which goes with it), at most MAX_SHARED entries."""
    key = (what, *map(id, of))
    hit = shared.get(key) if shared is not None else None
    if hit is not None and all(a is b for a, b in zip(hit[0], of, strict=True)):
        return hit[1]
    value = make()
    if shared is not None and len(shared) < MAX_SHARED:
        shared[key] = (of, value)  # (holding them keeps their ids from being reused)
    return value


MAX_SHARED = 64  # answers kept per snapshot (a few shapes of proxies; bounded whatever they ask)


def encode(snapshot: Snapshot, type_url: str, version: str, changed: list[str], removed: list[str]) -> bytes:
    """A DeltaDiscoveryResponse's bytes but its nonce: a head and the snapshot's shared resource entries."""
    head = discovery_pb2.DeltaDiscoveryResponse(system_version_info=version, type_url=type_url,
                                                removed_resources=removed).SerializeToString()
    if not changed:
        return head
    return head + b"".join([snapshot.delta_entry(type_url, name) for name in changed])


def _nonce_field(nonce: str) -> bytes:
    """The nonce as the last field of a response's bytes (the last value of a field is its value)."""
    return discovery_pb2.DeltaDiscoveryResponse(nonce=nonce).SerializeToString()
