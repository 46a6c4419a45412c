"""What a delta stream holds, kept as a difference from a shared snapshot (xds/delta.py),
against the plain bookkeeping it replaces: one dict name -> version per stream.

Random walks of what a proxy does (subscribes, unsubscribes, wildcard on and off,
reconnects with the versions it holds, as a map or as the wire's raw entries, ACKs, NACKs) and of what the Gateway's
snapshots do (resources changed, added, removed; snapshots a stream skips): after
every step the proxy is sent exactly what the plain bookkeeping would send, and
the bytes it gets decode to those resources.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import discovery_pb2

from lychgate.xds import delta_request, types
from lychgate.xds.cache import Snapshot, make_snapshot
from lychgate.xds.delta import DeltaState
from lychgate.xds.translator import Resources

EDS = types.ENDPOINT
NAMES = [f"c{i}" for i in range(12)]


@dataclass
class Plain:
    """The bookkeeping of before: what the proxy holds, in full, per stream."""

    wildcard: bool
    names: set[str] = field(default_factory=set)
    known: dict[str, str] = field(default_factory=dict)
    inflight: dict[str, dict[str, str | None]] = field(default_factory=dict)

    def changes(self, hashes: dict[str, str]) -> tuple[list[str], list[str]]:
        wanted = set(hashes) if self.wildcard else self.names & set(hashes)
        return (sorted(n for n in wanted if self.known.get(n) != hashes[n]),
                sorted(n for n in self.known if n not in wanted))

    def sent(self, nonce: str, hashes: dict[str, str], changed: list[str], removed: list[str]) -> None:
        self.inflight[nonce] = {n: self.known.get(n) for n in (*changed, *removed)}
        for n in changed:
            self.known[n] = hashes[n]
        for n in removed:
            self.known.pop(n, None)

    def nack(self, nonce: str) -> None:
        for n, old in self.inflight.pop(nonce).items():
            if old is None:
                self.known.pop(n, None)
            else:
                self.known[n] = old


def _snapshot(rng: random.Random, previous: Snapshot | None) -> Snapshot:
    """Some of NAMES, each with one of two contents."""
    out = Resources()
    for name in NAMES:
        if rng.random() < 0.7:
            out.add(EDS, name, endpoint_pb2.ClusterLoadAssignment(cluster_name=name, policy=endpoint_pb2.ClusterLoadAssignment.Policy(
                overprovisioning_factor={"value": 100 + rng.randrange(2)})))
    return make_snapshot(out, previous)


def _interned(names: set[str], pool: dict[frozenset[str], frozenset[str]]) -> frozenset[str]:
    key = frozenset(names)
    return pool.setdefault(key, key)


def _wire_entries(held: dict[str, str], extra: Sequence[bytes] = ()) -> Sequence[bytes]:
    """What the ADS server reads of a proxy's map: a real DeltaDiscoveryRequest's bytes
    (entries in upb's order, not sorted), through the server's own request type."""
    wire = discovery_pb2.DeltaDiscoveryRequest(initial_resource_versions=held).SerializeToString()
    return delta_request.DeltaRequest.FromString(wire + b"".join(b"*" + bytes([len(e)]) + e for e in extra)).initial_entries


def _walk(seed: int, steps: int = 300) -> None:
    rng = random.Random(seed)
    pool: dict[frozenset[str], frozenset[str]] = {}
    wildcard = rng.random() < 0.5
    mine, plain = DeltaState(wildcard=wildcard), Plain(wildcard=wildcard)
    snapshot = _snapshot(rng, None)
    nonces = itertools.count(1)
    for _ in range(steps):
        op = rng.randrange(8)
        if op == 0:  # the Gateway changes (and sometimes again before the stream looks)
            snapshot = _snapshot(rng, snapshot)
        elif op == 1:  # subscribe / unsubscribe names, a request's worth at once
            chosen = frozenset(rng.sample(NAMES, rng.randint(1, 4)))
            names = set(mine.names)
            if rng.random() < 0.5:
                names |= chosen
                plain.names |= chosen
            else:
                names -= chosen
                plain.names -= chosen
            mine.forget_any(chosen)
            for name in chosen:
                plain.known.pop(name, None)
            mine.names = _interned(names, pool)
        elif op == 2:  # "*" subscribed or unsubscribed
            mine.wildcard = plain.wildcard = rng.random() < 0.5
        elif op == 3:  # the endpoints of a changed cluster are sent again
            name = rng.choice(NAMES)
            mine.forget(name)
            plain.known.pop(name, None)
        elif op == 4 and mine.inflight:  # the proxy refuses a response in flight
            nonce = rng.choice(sorted(mine.inflight))
            _, before, after = mine.inflight.pop(nonce)
            mine.rollback(before, after)
            plain.nack(nonce)
        elif op == 5 and mine.inflight:  # or takes it
            nonce = rng.choice(sorted(mine.inflight))
            del mine.inflight[nonce], plain.inflight[nonce]
        elif op == 6:  # a reconnect: a new stream, told what the proxy holds
            held = dict(plain.known)
            wildcard = rng.random() < 0.5
            names = {n for n in NAMES if rng.random() < 0.5}
            if rng.random() < 0.3:  # it holds exactly the snapshot (a control-plane restart)
                held = {n: v for n, v in snapshot.hashes.get(EDS, {}).items() if wildcard or n in names}
            mine = DeltaState(wildcard=wildcard, names=_interned(names, pool))
            plain = Plain(wildcard=wildcard, names=set(names))
            hashes = snapshot.hashes.get(EDS) if rng.random() < 0.8 else None
            if rng.random() < 0.5:
                mine.initial_entries(_wire_entries(held), hashes, snapshot.delta_bodies)
            else:
                mine.initial(held, hashes, snapshot.delta_bodies)
            plain.known.update(held)
        else:  # the stream answers
            hashes = snapshot.hashes.get(EDS, {})
            expected = plain.changes(hashes)
            changed, removed, nonce, message = mine.respond(snapshot, EDS, nonces)
            assert (changed, removed) == expected
            assert nonce not in mine.inflight  # (a shared answer's nonce may have been sent before)
            response = discovery_pb2.DeltaDiscoveryResponse.FromString(message)
            assert [(r.name, r.version) for r in response.resources] == [(n, hashes[n]) for n in changed]
            assert list(response.removed_resources) == removed and response.nonce == nonce
            assert response.system_version_info == snapshot.version(EDS)
            mine.sent(nonce, snapshot.version(EDS), hashes)
            plain.sent(nonce, hashes, changed, removed)
        assert mine.holds() == dict(sorted(plain.known.items()))


def test_a_stream_is_sent_what_the_plain_bookkeeping_would_send() -> None:
    for seed in range(40):
        _walk(seed)


def test_proxies_that_hold_the_same_get_the_very_same_bytes() -> None:
    """Every proxy of a Gateway asking for the same is answered from one encoding, nonce
    included; a stream that still has that nonce in flight gets the answer with a new one."""
    rng = random.Random(1)
    snapshot = _snapshot(rng, None)
    names = frozenset(NAMES)
    nonces = itertools.count(1)
    streams = [DeltaState(names=names) for _ in range(3)]
    answers = [s.respond(snapshot, EDS, nonces) for s in streams]
    message = answers[0][3]
    assert message and all(a[3] is message and a[2] == answers[0][2] for a in answers)
    first = streams[0]
    first.inflight[answers[0][2]] = first.inflight.get(answers[0][2], ("", first.holding(), first.holding()))
    _, _, nonce, again = first.respond(snapshot, EDS, nonces)
    assert nonce != answers[0][2]
    parsed, shared = (discovery_pb2.DeltaDiscoveryResponse.FromString(m) for m in (again, message))
    assert parsed.nonce == nonce
    parsed.nonce = shared.nonce
    assert parsed == shared


def test_a_proxy_that_reconnects_holding_the_snapshot_costs_no_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a control-plane restart every proxy sends the versions it holds: when they are the
    snapshot's, the stream holds the snapshot's own basis (nothing to send, nothing of its own)
    and the entries are never decoded. Anything else (a version of its own, one missing, one
    entry twice) is decoded and answered as the map it is. (A map with a key twice and another
    missing, as many entries as the snapshot's, is taken for the snapshot: no protobuf library
    writes a key twice.)"""
    snapshot = _snapshot(random.Random(3), None)
    hashes = snapshot.hashes[EDS]
    names = frozenset(hashes)
    exact = _wire_entries(dict(hashes))
    assert [bytes(e) for e in exact] != sorted(bytes(e) for e in exact)  # the order of the wire, not ours

    decoded: list[int] = []
    real = delta_request.versions
    monkeypatch.setattr(delta_request, "versions", lambda entries: decoded.append(len(entries)) or real(entries))
    for state in (DeltaState(names=names), DeltaState(wildcard=True)):
        state.initial_entries(exact, hashes, snapshot.delta_bodies)
        assert state.synced_to(hashes) and not decoded
        assert state.respond(snapshot, EDS, itertools.count(1))[:2] == ([], [])

    first, *rest = sorted(hashes)
    cases = {
        "a version of its own": ({**hashes, first: "old"}, (), [first]),
        "one missing": ({n: hashes[n] for n in rest}, (), [first]),
        "one twice": (dict(hashes), [delta_request.entry(rest[0], hashes[rest[0]])], []),
    }
    for case, (held, extra, expected) in cases.items():
        state = DeltaState(names=names)
        state.initial_entries(_wire_entries(held, extra), hashes, snapshot.delta_bodies)
        assert decoded, case
        assert state.respond(snapshot, EDS, itertools.count(1))[:2] == (expected, []), case
        decoded.clear()


@pytest.mark.parametrize("node_id", [None, "default/gw", "x" * 300])  # no node; a length of one byte; of two
def test_a_requests_bytes_after_its_node_are_the_request_without_it(node_id: str | None) -> None:
    request = discovery_pb2.DeltaDiscoveryRequest(type_url=EDS, resource_names_subscribe=NAMES,
                                                  initial_resource_versions={"c1": "v1"})
    if node_id is not None:
        request.node.id = node_id
    raw = request.SerializeToString()
    after = delta_request.after_node(raw)
    rest = discovery_pb2.DeltaDiscoveryRequest.FromString(raw[after:])
    request.ClearField("node")
    assert rest == request
    assert after == len(raw) - len(request.SerializeToString())
