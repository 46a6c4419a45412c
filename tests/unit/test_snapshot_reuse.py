"""A snapshot made from the previous one (make_snapshot reusing what was packed from the
same message objects) is the snapshot made from scratch: resources, hashes, versions,
their order, and the steps a delta stream sends; a type with nothing changed is the
previous snapshot's very dicts."""

from __future__ import annotations

import random

from envoy.config.endpoint.v3 import endpoint_pb2

from lychgate.xds import types
from lychgate.xds.cache import Snapshot, make_snapshot
from lychgate.xds.translator import Resources
from lychgate.xds.translator.wire import RawMessage

NAMES = [f"c{i:02d}" for i in range(20)]


def _message(name: str, factor: int) -> RawMessage:
    data = endpoint_pb2.ClusterLoadAssignment(cluster_name=name, policy=endpoint_pb2.ClusterLoadAssignment.Policy(
        overprovisioning_factor={"value": factor})).SerializeToString(deterministic=True)
    return RawMessage(endpoint_pb2.ClusterLoadAssignment, data)


def _same(a: Snapshot, b: Snapshot) -> None:
    assert a == b
    for type_url in a.resources:
        assert list(a.resources[type_url]) == list(b.resources[type_url])
        assert list(a.hashes[type_url]) == list(b.hashes[type_url])


def test_reused_messages_give_the_snapshot_made_from_scratch() -> None:
    rng = random.Random(7)
    held: dict[str, RawMessage] = {}  # the translator's: the same object while unchanged
    previous: Snapshot | None = None
    for step in range(60):
        for name in NAMES if step % 4 else ():  # every fourth, nothing of the type changes
            roll = rng.random()
            if roll < 0.1:
                held.pop(name, None)  # removed
            elif roll < 0.25 or name not in held:
                held[name] = _message(name, 100 + rng.randrange(3))  # new object, maybe the same content
        # Mostly the order of the last build (a Gateway's clusters come in the same order pass after
        # pass), sometimes any order.
        byname = dict(sorted(held.items()) if step % 3 else rng.sample(sorted(held.items()), len(held)))
        out = Resources({types.ENDPOINT: byname, types.CLUSTER: dict(byname)})
        snap = make_snapshot(out, previous)
        # The same contents as new objects: every resource hashed again against the previous snapshot.
        copies = {n: RawMessage(m.cls, m.data) for n, m in byname.items()}
        recomputed = make_snapshot(Resources({types.ENDPOINT: copies, types.CLUSTER: dict(copies)}), previous)
        _same(snap, recomputed)
        assert snap.steps == recomputed.steps
        fresh = make_snapshot(Resources({types.ENDPOINT: dict(copies), types.CLUSTER: dict(copies)}))
        assert snap.resources == fresh.resources and snap.hashes == fresh.hashes and snap.versions == fresh.versions
        assert list(snap.hashes[types.ENDPOINT]) == sorted(held)
        if previous is not None:
            before = previous.hashes[types.ENDPOINT]
            changed, removed = snap.steps[types.ENDPOINT][1:]
            assert changed == {n for n in held if before.get(n) != snap.hashes[types.ENDPOINT][n]}
            assert removed == before.keys() - held.keys()
            for made in (snap, recomputed):  # a type with nothing changed keeps the very dicts, which is
                # how a delta stream holding them knows at once it holds this type (DeltaState.synced_to)
                kept = made.hashes[types.ENDPOINT] is before and made.resources[types.ENDPOINT] is \
                    previous.resources[types.ENDPOINT]
                assert kept == (not changed and not removed)
        previous = snap
