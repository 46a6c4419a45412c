"""Leader election on a Lease: one writer among replicas, handover, and losing the lease."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from lychgate.leader import LeaderElector
from tests.kube.helpers import (
    FAST_LEASE,
    Controller,
    condition,
    eventually,
    gateway,
    gateway_class,
    route,
    service,
    settle,
)
from tests.kubefake import KubeFake

NS = "lychgate-system"


@asynccontextmanager
async def elector(kube: KubeFake, identity: str) -> AsyncIterator[tuple[LeaderElector, list[str]]]:
    client = kube.client()
    e = LeaderElector(client, NS, "lychgate", identity, lease_duration=FAST_LEASE["leader_election_lease_duration"],
                      renew_deadline=FAST_LEASE["leader_election_renew_deadline"],
                      retry_period=FAST_LEASE["leader_election_retry_period"])
    events: list[str] = []
    e.on_started.append(lambda: events.append("started"))
    e.on_stopped.append(lambda: events.append("stopped"))
    stop = asyncio.Event()
    task = asyncio.create_task(e.run(stop))
    try:
        yield e, events
    finally:
        stop.set()
        await task
        await client.close()


@asynccontextmanager
async def intruder(kube: KubeFake) -> AsyncIterator[None]:
    """Another replica (with a clock far ahead, say) takes the Lease and keeps renewing it."""

    async def renew() -> None:
        n = 0
        while True:
            lease = kube.get("leases", "lychgate", namespace=NS)
            assert lease is not None
            n += 1
            kube.apply({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": "lychgate", "namespace": NS},
                        "spec": {**lease["spec"], "holderIdentity": "intruder", "renewTime": f"renewal {n}"}},
                       manager="intruder")
            await asyncio.sleep(0.1)

    task = asyncio.create_task(renew())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def holder(kube: KubeFake) -> str | None:
    lease = kube.get("leases", "lychgate", namespace=NS)
    return ((lease or {}).get("spec") or {}).get("holderIdentity")


async def test_one_leader_and_a_fast_handover_on_shutdown(kube: KubeFake) -> None:
    async with elector(kube, "a") as (a, a_events):
        await eventually(a.is_leader, what="a leads")
        async with elector(kube, "b") as (b, b_events):
            await settle(0.5)
            assert a.is_leader() and not b.is_leader() and holder(kube) == "a"
        assert b_events == [] and holder(kube) == "a"  # a follower leaving changes nothing
        lease = kube.get("leases", "lychgate", namespace=NS)
        assert lease and lease["spec"]["leaseDurationSeconds"] == 2 and lease["spec"]["renewTime"]
    assert a_events == ["started", "stopped"] and holder(kube) is None  # released on shutdown
    async with elector(kube, "b") as (b, b_events):
        started = time.monotonic()
        await eventually(b.is_leader, what="b leads")
        # A released Lease is taken at once, not after the lease duration.
        assert time.monotonic() - started < FAST_LEASE["leader_election_lease_duration"]
        lease = kube.get("leases", "lychgate", namespace=NS)
        assert lease and lease["spec"]["leaseTransitions"] == 1 and b_events == ["started"]


async def test_a_leader_that_cannot_renew_stops_within_the_renew_deadline(kube: KubeFake) -> None:
    async with elector(kube, "a") as (a, events):
        await eventually(a.is_leader, what="a leads")
        kube.fail_next("update", "leases", code=503, reason="ServiceUnavailable", times=1000)
        failing_since = time.monotonic()
        await eventually(lambda: not a.is_leader(), what="a stops leading")
        # Leadership ends renew_deadline after the last good renewal: before the Lease
        # expires for the other replicas, so two writers never overlap.
        assert time.monotonic() - failing_since < FAST_LEASE["leader_election_lease_duration"]
        # The stop callback runs right after leadership ends (seen racing the check above under load).
        await eventually(lambda: events == ["started", "stopped"], what="the stop callback")
        assert holder(kube) == "a"  # it could not even release it; others wait out the duration


async def test_a_lease_taken_by_another_stops_the_writer(kube: KubeFake) -> None:
    async with elector(kube, "a") as (a, events):
        await eventually(a.is_leader, what="a leads")
        async with intruder(kube):
            t0 = time.monotonic()
            await eventually(lambda: not a.is_leader(), what="a stops leading")
            assert time.monotonic() - t0 < FAST_LEASE["leader_election_lease_duration"]
            await settle(FAST_LEASE["leader_election_lease_duration"])
            assert events == ["started", "stopped"] and holder(kube) == "intruder"


def test_timings_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        LeaderElector(None, NS, "x", "a", lease_duration=5, renew_deadline=10, retry_period=1)


def _route_accepted(kube: KubeFake, name: str) -> dict[str, Any] | None:
    parents = (((kube.get("httproutes", name) or {}).get("status")) or {}).get("parents") or []
    return condition(parents[0], "Accepted") if parents else None


async def test_two_controllers_hand_over_status_and_deployment(kube: KubeFake, controller: Controller) -> None:
    """Both replicas translate and serve xDS; only the Lease holder writes. When it
    shuts down, the other one takes over writing."""
    kube.create(gateway_class())
    kube.create(gateway())
    kube.create(service())
    kube.create(route("first"))
    async with contextlib.AsyncExitStack() as first_stack:
        one = await first_stack.enter_async_context(controller(leader_election_identity="one"))
        await eventually(lambda: _route_accepted(kube, "first"), what="status from the first replica")
        async with controller(leader_election_identity="two") as two:
            await eventually(lambda: two.cp.passes > 0 and two.cp.cache.get("default/gw"),
                             what="the second replica's xDS snapshot")
            kube.create(route("second"))
            await eventually(lambda: _route_accepted(kube, "second"), what="status of the second route")
            await settle()
            assert one.writer.writes > 0 and two.writer.writes == 0
            assert not two.elector.is_leader()
            applies_before = len(kube.requests_for("deployments", verb="patch"))

            await first_stack.aclose()  # the first replica shuts down and releases the Lease
            await eventually(two.elector.is_leader, timeout=5, what="the second replica leads")
            kube.create(route("third"))
            await eventually(lambda: _route_accepted(kube, "third"), what="status written by the second replica")
            assert two.writer.writes > 0 and holder(kube) == "two"
            # The new leader re-applied the proxy: server-side apply, so no change, no new revision.
            await eventually(lambda: len(kube.requests_for("deployments", verb="patch")) > applies_before,
                             what="the new leader's apply")
            assert kube.changes("deployments", "gw") == 1


async def test_a_controller_that_loses_the_lease_writes_nothing_more(
    kube: KubeFake, controller: Controller
) -> None:
    kube.create(gateway_class())
    kube.create(gateway())
    kube.create(service())
    kube.create(route("first"))
    async with controller(leader_election_identity="one") as one:
        await eventually(lambda: _route_accepted(kube, "first"), what="status while leading")
        async with intruder(kube):
            await eventually(lambda: not one.elector.is_leader(), what="leadership lost")
            writes = one.writer.writes
            kube.create(route("second"))
            kube.create(gateway("other", port=8081))
            await eventually(lambda: one.cp.cache.get("default/other"), what="translation goes on (xDS)")
            await settle(0.5)
            assert _route_accepted(kube, "second") is None and one.writer.writes == writes
            assert kube.get("deployments", "other") is None
        # The intruder is gone: once its Lease expires, the controller leads and catches up.
        await eventually(lambda: _route_accepted(kube, "second"), timeout=5, what="status after re-election")
        await eventually(lambda: kube.get("deployments", "other"), what="the proxy after re-election")


async def test_gateway_without_leader_election(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    kube.create(gateway())
    async with controller(leader_election=False):
        await eventually(lambda: kube.get("deployments", "gw"), what="the proxy without a Lease")
        assert kube.get("leases", "lychgate", namespace=NS) is None
