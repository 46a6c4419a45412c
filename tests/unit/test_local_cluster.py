"""The local cluster (xds/replicas.py): the proxies of a Gateway connected to
the control plane, one endpoint each, sent over EDS to that Gateway's proxies
only, following proxies as they come and go without rebuilding anything else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import discovery_pb2

from lychgate.xds import types
from lychgate.xds.cache import SnapshotCache, decode
from lychgate.xds.replicas import LOCAL_CLUSTER, replica_assignment
from lychgate.xds.server import REPLICAS_EVERY, AdsServer, start_server
from lychgate.xds.translator import build
from tests.unit.test_ads_server import NODE, Client, DeltaClient, gateway

OTHER = "default/other"


def _hosts(assignment: endpoint_pb2.ClusterLoadAssignment) -> list[tuple[str, int]]:
    return [(e.endpoint.address.socket_address.address, e.endpoint.address.socket_address.port_value)
            for group in assignment.endpoints for e in group.lb_endpoints]


def _local(response: Any) -> list[tuple[str, int]]:
    """The local cluster's hosts in a response (delta wraps each resource in a Resource)."""
    assignments = [decode(types.ENDPOINT, (r.resource if isinstance(r, discovery_pb2.Resource) else r).value)
                   for r in response.resources]
    [assignment] = [a for a in assignments if a.cluster_name == LOCAL_CLUSTER]
    return _hosts(assignment)


def test_one_endpoint_per_proxy_at_the_address_it_connected_from() -> None:
    assert _hosts(replica_assignment([])) == []
    assert _hosts(replica_assignment(["ipv4:10.0.0.7:41234", "ipv6:%5B%3A%3A1%5D:5", "ipv6:[fd00::2]:6"])) == [
        ("10.0.0.7", 41234), ("::1", 5), ("fd00::2", 6)]
    # Envoy keys hosts by address: equal or unknown addresses still give one host per proxy.
    assert _hosts(replica_assignment(["ipv4:10.0.0.7:9", "ipv4:10.0.0.7:9", "unix:/run/x", ""])) == [
        ("0.0.0.0", 1), ("0.0.0.0", 2), ("10.0.0.7", 9), ("10.0.0.7", 10)]


@pytest.fixture
async def address() -> AsyncIterator[tuple[SnapshotCache, AdsServer, str]]:
    cache = SnapshotCache()
    ads = AdsServer(cache)
    server, port = await start_server(ads, "127.0.0.1:0")
    yield cache, ads, f"127.0.0.1:{port}"
    await server.stop(0)


async def _subscribe(client: DeltaClient) -> list[tuple[str, int]]:
    client.delta(types.ENDPOINT, subscribe=[LOCAL_CLUSTER])
    response = await client.recv()
    client.delta(types.ENDPOINT, nonce=response.nonce)
    return _local(response)


async def _pushed(client: DeltaClient) -> list[tuple[str, int]]:
    response = await client.recv()
    assert [r.name for r in response.resources] == [LOCAL_CLUSTER]  # nothing else changed
    client.delta(types.ENDPOINT, nonce=response.nonce)
    return _local(response)


async def _until(client: DeltaClient, hosts: int, most: int = 30) -> int:
    """Read local-cluster pushes until one has `hosts` hosts (at most `most`); how many it took."""
    for n in range(1, most + 1):
        if len(await _pushed(client)) == hosts:
            return n
    raise AssertionError(f"the local cluster never had {hosts} hosts")


async def test_the_local_cluster_follows_the_gateways_proxies(address: tuple[SnapshotCache, AdsServer, str]) -> None:
    cache, _, target = address
    cache.set(NODE, build(gateway()))
    cache.set(OTHER, build(gateway()))
    first = DeltaClient(target, delta=True)
    second = DeltaClient(target, delta=True)
    other = DeltaClient(target, delta=True, node=OTHER)
    try:
        [(host, _)] = await _subscribe(first)
        assert host == "127.0.0.1"
        translated = cache.get(NODE)
        assert translated is not None

        # A second proxy of the Gateway: both soon see two hosts (the update waits for
        # REPLICAS_EVERY after the last one), and only the local cluster was replaced in
        # the snapshot (the route tables are the same objects).
        if len(await _subscribe(second)) < 2:
            assert await _until(second, 2) == 1
        assert await _until(first, 2) == 1
        now = cache.get(NODE)
        assert now is not None
        for type_url in (types.CLUSTER, types.LISTENER, types.ROUTE):
            assert now.versions[type_url] == translated.versions[type_url]
            assert now.resources[type_url] is translated.resources[type_url]

        # Another Gateway's proxy is in its own local cluster, and tells this one nothing.
        assert len(await _subscribe(other)) == 1
        assert await first.silent(0.2) and await second.silent(0.0)

        # A translation pass keeps the proxies connected in the local cluster.
        retranslated = cache.set(NODE, build(gateway(port=3001)))
        assert len(_hosts(decode(types.ENDPOINT, retranslated.resources[types.ENDPOINT][LOCAL_CLUSTER]))) == 2
        assert await first.silent(0.2)

        # A proxy leaves: the one left holds the whole Gateway again.
        await second.close()
        for _ in range(100):  # bounded: the server sees the stream end
            response = await first.recv()
            if any(r.name == LOCAL_CLUSTER for r in response.resources):
                assert len(_local(response)) == 1
                break
        else:
            raise AssertionError("the local cluster never shrank")
    finally:
        for client in (first, second, other):
            await client.close()


async def test_state_of_the_world_proxies_get_it_too(address: tuple[SnapshotCache, AdsServer, str]) -> None:
    cache, ads, target = address
    cache.set(NODE, build(gateway()))
    client = Client(target)
    try:
        client.send(types.ENDPOINT, [LOCAL_CLUSTER])
        [(host, port)] = _local(await client.recv())
        [conn] = ads.for_gateway(NODE)
        assert conn.peer == f"ipv4:{host}:{port}"
    finally:
        await client.close()


async def test_proxies_that_connect_together_are_counted_a_few_times_not_once_each(
        address: tuple[SnapshotCache, AdsServer, str]) -> None:
    """A rollout or a control-plane restart: each update of the local cluster goes to
    every proxy of the Gateway, so 40 proxies arriving must not cost each 40 pushes."""
    cache, _, target = address
    cache.set(NODE, build(gateway()))
    first = DeltaClient(target, delta=True)
    rest: list[DeltaClient] = []
    try:
        await _subscribe(first)
        rest += [DeltaClient(target, delta=True) for _ in range(40)]
        for client in rest:
            client.delta(types.ENDPOINT, subscribe=[LOCAL_CLUSTER])
        assert await _until(first, 41) <= 4
    finally:
        for client in (first, *rest):
            await client.close()


async def test_a_gateway_that_shares_no_bucket_is_not_told_its_replicas(
        address: tuple[SnapshotCache, AdsServer, str]) -> None:
    """Only a local rate limit shared across the Gateway reads the local cluster: for any
    other Gateway, proxies coming and going (a rollout, a fleet reconnecting) push nothing."""
    cache, _, target = address
    cache.set(NODE, build(gateway()), counts_replicas=False)
    first = DeltaClient(target, delta=True)
    second = DeltaClient(target, delta=True)
    try:
        assert await _subscribe(first) == []
        assert await _subscribe(second) == []
        assert await first.silent(REPLICAS_EVERY + 0.5)
        # A route starts sharing its bucket: the next snapshot counts both proxies.
        cache.set(NODE, build(gateway()), counts_replicas=True)
        assert sorted(host for host, _ in await _pushed(first)) == ["127.0.0.1", "127.0.0.1"]
        # And stops: the local cluster empties again.
        cache.set(NODE, build(gateway()), counts_replicas=False)
        assert await _pushed(first) == []
    finally:
        for client in (first, second):
            await client.close()
