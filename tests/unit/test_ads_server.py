"""The ADS server's protocol, driven by a real gRPC client over loopback.

These are the properties Envoy relies on (ENVOY-NOTES): an ACK never triggers
another response, stale nonces are ignored, a NACKed version is not re-sent,
and a Cluster push is followed by its endpoints even when they did not change.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.rpc import status_pb2

from lychgate import ir
from lychgate.xds import opening, types
from lychgate.xds.cache import SnapshotCache
from lychgate.xds.delta import DeltaState
from lychgate.xds.server import AdsServer, ProxyConnection, start_server
from lychgate.xds.translator import build

NODE = "default/gw"


def gateway(timeout_ms: int = 5000, port: int = 3000) -> ir.GatewayIR:
    cluster = ir.Cluster("kube/default/svc/80", (ir.Endpoint("127.0.0.1", port),), connect_timeout_ms=timeout_ms)
    route = ir.Route(ir.RouteSource("HTTPRoute", "default", "r", 0, 0), ir.Match(),
                     ir.Forward((ir.WeightedCluster(cluster.name, 1),)))
    listener = ir.HTTPListener("http-8080", "127.0.0.1", 8080,
                               (ir.VirtualHost("8080/*", ("*",), (route,)),))
    return ir.GatewayIR("default", "gw", (listener,), (cluster,))


class Client:
    def __init__(self, address: str, delta: bool = False, node: str = NODE) -> None:
        self.node = node
        self.channel = grpc.aio.insecure_channel(address)
        self.requests: asyncio.Queue[Any] = asyncio.Queue()
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(self.channel)
        method = stub.DeltaAggregatedResources if delta else stub.StreamAggregatedResources
        self.call = method(self._iter())
        self.first = True
        # One reader for the whole stream: cancelling a pending read() on a
        # timeout would cancel the gRPC call itself.
        self.responses: asyncio.Queue[Any] = asyncio.Queue()
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for response in self.call:
            self.responses.put_nowait(response)

    async def _iter(self) -> AsyncIterator[Any]:
        while True:
            yield await self.requests.get()

    def send(self, type_url: str, names: list[str] | None = None, version: str = "", nonce: str = "",
             error: str | None = None) -> None:
        req = discovery_pb2.DiscoveryRequest(type_url=type_url, resource_names=names or [],
                                             version_info=version, response_nonce=nonce)
        if self.first:
            req.node.CopyFrom(base_pb2.Node(id=self.node, cluster=self.node.replace("/", ".")))
            self.first = False
        if error is not None:
            req.error_detail.CopyFrom(status_pb2.Status(code=3, message=error))
        self.requests.put_nowait(req)

    async def recv(self, timeout: float = 2.0) -> Any:
        return await asyncio.wait_for(self.responses.get(), timeout)

    async def silent(self, seconds: float = 0.3) -> bool:
        await asyncio.sleep(seconds)
        return self.responses.empty()

    async def close(self) -> None:
        self.call.cancel()
        self.reader.cancel()
        await self.channel.close()


@pytest.fixture
async def setup() -> AsyncIterator[tuple[SnapshotCache, AdsServer, Client]]:
    cache = SnapshotCache()
    ads = AdsServer(cache)
    server, port = await start_server(ads, "127.0.0.1:0")
    client = Client(f"127.0.0.1:{port}")
    yield cache, ads, client
    await client.close()
    await server.stop(0)


async def test_ack_does_not_trigger_a_response(setup: tuple[SnapshotCache, AdsServer, Client]) -> None:
    cache, ads, client = setup
    cache.set(NODE, build(gateway()))
    client.send(types.CLUSTER)
    resp = await client.recv()
    assert resp.type_url == types.CLUSTER and len(resp.resources) == 1
    client.send(types.CLUSTER, version=resp.version_info, nonce=resp.nonce)
    assert await client.silent()
    [conn] = ads.connections.values()
    assert conn.gateway == NODE
    assert conn.types[types.CLUSTER].version_acked == resp.version_info


async def test_identical_input_keeps_the_version(setup: tuple[SnapshotCache, AdsServer, Client]) -> None:
    cache, _, _client = setup
    first = cache.set(NODE, build(gateway()))
    second = cache.set(NODE, build(gateway()))
    assert first is second
    third = cache.set(NODE, build(gateway(port=3001)))
    assert third.version(types.ENDPOINT) != first.version(types.ENDPOINT)
    assert third.version(types.CLUSTER) == first.version(types.CLUSTER)
    # Unchanged resources are shared between snapshots, not copied.
    assert third.resources[types.CLUSTER]["kube/default/svc/80"] is first.resources[types.CLUSTER]["kube/default/svc/80"]


async def test_cluster_push_is_followed_by_its_endpoints(setup: tuple[SnapshotCache, AdsServer, Client]) -> None:
    cache, _, client = setup
    cache.set(NODE, build(gateway()))
    client.send(types.CLUSTER)
    cds = await client.recv()
    client.send(types.CLUSTER, version=cds.version_info, nonce=cds.nonce)
    client.send(types.ENDPOINT, names=["kube/default/svc/80"])
    eds = await client.recv()
    assert eds.type_url == types.ENDPOINT
    client.send(types.ENDPOINT, names=["kube/default/svc/80"], version=eds.version_info, nonce=eds.nonce)
    assert await client.silent()
    # Change the cluster only: its endpoints must still be sent again, or Envoy
    # keeps the cluster warming until its fetch timeout.
    cache.set(NODE, build(gateway(timeout_ms=1000)))
    cds2 = await client.recv()
    eds2 = await client.recv()
    assert cds2.type_url == types.CLUSTER and cds2.version_info != cds.version_info
    assert eds2.type_url == types.ENDPOINT and eds2.version_info == eds.version_info
    assert eds2.nonce != eds.nonce


async def test_delta_cluster_push_is_followed_by_its_endpoints(
        delta_setup: tuple[SnapshotCache, AdsServer, DeltaClient]) -> None:
    """The same for delta xDS: a changed cluster's endpoints are sent again though they did not
    change."""
    cache, _, client = delta_setup
    eds = await _holding_one_cluster(cache, client)
    assert await client.silent()
    cache.set(NODE, build(gateway(timeout_ms=1000)))
    cds2 = await client.recv()
    client.delta(types.CLUSTER, nonce=cds2.nonce)
    eds2 = await client.recv()
    assert cds2.type_url == types.CLUSTER and [r.name for r in cds2.resources] == ["kube/default/svc/80"]
    assert eds2.type_url == types.ENDPOINT and [r.name for r in eds2.resources] == ["kube/default/svc/80"]
    assert eds2.resources[0].version == eds.resources[0].version  # the same endpoints, sent again


async def test_nack_is_recorded_and_not_resent(setup: tuple[SnapshotCache, AdsServer, Client]) -> None:
    cache, ads, client = setup
    cache.set(NODE, build(gateway()))
    client.send(types.LISTENER)
    lds = await client.recv()
    client.send(types.LISTENER, version="", nonce=lds.nonce, error="cannot bind '127.0.0.1:8080': Address already in use")
    assert await client.silent()
    [conn] = ads.connections.values()
    nack = conn.types[types.LISTENER].nack
    assert nack is not None and nack["version"] == lds.version_info and "Address already in use" in nack["error"]
    assert ads.refusing() == [conn]  # what status reports, without looking at every proxy
    # A new version is sent, and its ACK clears the NACK.
    cache.set(NODE, build(_other_listener()))
    lds2 = await client.recv()
    assert lds2.version_info != lds.version_info
    client.send(types.LISTENER, version=lds2.version_info, nonce=lds2.nonce)
    await asyncio.sleep(0.1)
    assert conn.types[types.LISTENER].nack is None
    assert ads.refusing() == []


async def test_stale_nonce_is_ignored(setup: tuple[SnapshotCache, AdsServer, Client]) -> None:
    cache, ads, client = setup
    cache.set(NODE, build(gateway()))
    client.send(types.CLUSTER)
    first = await client.recv()
    client.send(types.CLUSTER, version=first.version_info, nonce=first.nonce)
    cache.set(NODE, build(gateway(timeout_ms=2000)))
    second = await client.recv()
    # A late NACK of the first response arrives after the second was sent: it
    # speaks of a superseded version and must not count against the new one.
    client.send(types.CLUSTER, version=first.version_info, nonce=first.nonce, error="late")
    assert await client.silent()
    [conn] = ads.connections.values()
    assert conn.types[types.CLUSTER].nack is None
    client.send(types.CLUSTER, version=second.version_info, nonce=second.nonce)
    await asyncio.sleep(0.1)
    assert conn.types[types.CLUSTER].version_acked == second.version_info


def _other_listener() -> ir.GatewayIR:
    """The same listener with other content (another address)."""
    gw = gateway()
    listener = gw.listeners[0]
    moved = ir.HTTPListener(listener.name, "127.0.0.2", listener.port, listener.virtual_hosts)
    return ir.GatewayIR(gw.namespace, gw.name, (moved,), gw.clusters)


class DeltaClient(Client):
    def delta(self, type_url: str, subscribe: list[str] | None = None, nonce: str = "",
              error: str | None = None, initial: dict[str, str] | None = None) -> None:
        req = discovery_pb2.DeltaDiscoveryRequest(
            type_url=type_url, resource_names_subscribe=subscribe or [], response_nonce=nonce,
            initial_resource_versions=initial or {},
        )
        if self.first:
            req.node.CopyFrom(base_pb2.Node(id=self.node, cluster=self.node.replace("/", ".")))
            self.first = False
        if error is not None:
            req.error_detail.CopyFrom(status_pb2.Status(code=3, message=error))
        self.requests.put_nowait(req)


@pytest.fixture
async def delta_setup() -> AsyncIterator[tuple[SnapshotCache, AdsServer, DeltaClient]]:
    cache = SnapshotCache()
    ads = AdsServer(cache)
    server, port = await start_server(ads, "127.0.0.1:0")
    client = DeltaClient(f"127.0.0.1:{port}", delta=True)
    yield cache, ads, client
    await client.close()
    await server.stop(0)


def _two_clusters(port_b: int = 4000, with_b: bool = True) -> ir.GatewayIR:
    gw = gateway()
    b = ir.Cluster("kube/default/b/80", (ir.Endpoint("127.0.0.1", port_b),))
    return ir.GatewayIR(gw.namespace, gw.name, gw.listeners, (*gw.clusters, b) if with_b else gw.clusters)


async def test_delta_sends_only_what_changed(delta_setup: tuple[SnapshotCache, AdsServer, DeltaClient]) -> None:
    cache, ads, client = delta_setup
    cache.set(NODE, build(_two_clusters()))
    client.delta(types.CLUSTER)  # wildcard
    first = await client.recv()
    assert sorted(r.name for r in first.resources) == ["kube/default/b/80", "kube/default/svc/80"]
    client.delta(types.CLUSTER, nonce=first.nonce)
    client.delta(types.ENDPOINT, subscribe=["kube/default/b/80", "kube/default/svc/80"])
    eds = await client.recv()
    assert len(eds.resources) == 2
    client.delta(types.ENDPOINT, nonce=eds.nonce)
    assert await client.silent()
    # One endpoint changes: only that ClusterLoadAssignment is sent.
    cache.set(NODE, build(_two_clusters(port_b=4001)))
    eds2 = await client.recv()
    assert [r.name for r in eds2.resources] == ["kube/default/b/80"] and not eds2.removed_resources
    client.delta(types.ENDPOINT, nonce=eds2.nonce)
    # A cluster goes away: it is removed by name.
    cache.set(NODE, build(_two_clusters(with_b=False)))
    cds = await client.recv()
    assert list(cds.removed_resources) == ["kube/default/b/80"] and not cds.resources
    [conn] = ads.connections.values()
    assert conn.protocol == "delta"


async def test_delta_nack_keeps_the_old_state(delta_setup: tuple[SnapshotCache, AdsServer, DeltaClient]) -> None:
    cache, ads, client = delta_setup
    cache.set(NODE, build(gateway()))
    client.delta(types.LISTENER)
    lds = await client.recv()
    client.delta(types.LISTENER, nonce=lds.nonce, error="cannot bind")
    assert await client.silent()  # the rejected content is not pushed again
    [conn] = ads.connections.values()
    state = conn.types[types.LISTENER]
    assert state.nack is not None and state.delta is not None and state.delta.holds() == {}
    cache.set(NODE, build(_other_listener()))
    again = await client.recv()
    assert [r.name for r in again.resources] == ["http-8080"]
    client.delta(types.LISTENER, nonce=again.nonce)
    await asyncio.sleep(0.1)
    assert state.nack is None and state.version_acked == again.system_version_info


async def test_delta_input_back_to_what_the_proxy_kept_clears_the_nack(
        delta_setup: tuple[SnapshotCache, AdsServer, DeltaClient]) -> None:
    """Good, then bad (refused), then good again: the proxy already holds the good
    listener, so nothing is sent, and the refusal is over (status recovers)."""
    cache, ads, client = delta_setup
    cache.set(NODE, build(gateway()))
    client.delta(types.LISTENER)
    good = await client.recv()
    client.delta(types.LISTENER, nonce=good.nonce)
    cache.set(NODE, build(_other_listener()))
    bad = await client.recv()
    client.delta(types.LISTENER, nonce=bad.nonce, error="unable to open file")
    assert await client.silent()
    [conn] = ads.connections.values()
    state = conn.types[types.LISTENER]
    assert state.nack is not None
    cache.set(NODE, build(gateway()))
    assert await client.silent()  # the proxy has it already
    assert state.nack is None


async def test_delta_reconnect_with_initial_versions_sends_nothing_new(
    delta_setup: tuple[SnapshotCache, AdsServer, DeltaClient]
) -> None:
    cache, _, client = delta_setup
    snap = cache.set(NODE, build(gateway()))
    have = dict(snap.hashes[types.CLUSTER])
    client.delta(types.CLUSTER, initial=have)
    first = await client.recv()  # the first answer, with nothing in it
    assert not first.resources and not first.removed_resources


async def test_a_delta_proxy_answered_and_acked_gives_its_turn_to_open_up_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Streams open in turns (xds/opening.py). A delta proxy that has every answer it asked for,
    and has ACKed them, gives its turn up then, not QUIET later: in a reconnect storm the next
    proxies wait for it. One turn, QUIET and LONGEST far beyond the test's waits: the second
    proxy is answered only because the first one ACKed."""
    monkeypatch.setattr(opening, "QUIET", 60.0)
    monkeypatch.setattr(opening, "LONGEST", 120.0)
    cache = SnapshotCache()
    ads = AdsServer(cache)
    ads._turns = opening.Turns(1)
    server, port = await start_server(ads, "127.0.0.1:0")
    cache.set(NODE, build(gateway()))
    first = DeltaClient(f"127.0.0.1:{port}", delta=True)
    second: DeltaClient | None = None
    try:
        first.delta(types.CLUSTER)
        cds = await first.recv()
        second = DeltaClient(f"127.0.0.1:{port}", delta=True)
        second.delta(types.CLUSTER)
        assert await second.silent()  # its turn: after the first proxy's
        first.delta(types.CLUSTER, nonce=cds.nonce)
        assert (await second.recv(10.0)).type_url == types.CLUSTER
    finally:
        for client in (first, second):
            if client is not None:
                await client.close()
        await server.stop(0)


async def test_a_gateways_proxies_are_found_without_scanning_every_proxy(
        setup: tuple[SnapshotCache, AdsServer, Client]) -> None:
    """for_gateway answers from an index kept as proxies come and go."""
    cache, ads, client = setup
    cache.set(NODE, build(gateway()))
    client.send(types.CLUSTER)
    await client.recv()
    [conn] = ads.connections.values()
    assert ads.for_gateway(NODE) == [conn]
    assert ads.for_gateway("default/other") == []
    await client.close()
    for _ in range(100):  # the server sees the stream end
        if not ads.connections:
            break
        await asyncio.sleep(0.02)
    assert ads.for_gateway(NODE) == []


def _clusters(ports: dict[str, int]) -> ir.GatewayIR:
    gw = gateway()
    extra = tuple(ir.Cluster(f"kube/default/{n}/80", (ir.Endpoint("127.0.0.1", p),)) for n, p in sorted(ports.items()))
    return ir.GatewayIR(gw.namespace, gw.name, gw.listeners, (*gw.clusters, *extra))


async def test_delta_proxies_get_what_changed_since_the_snapshot_they_hold() -> None:
    """What changed between two snapshots is found once (cache.py) and serves
    every proxy that held the first; a proxy that missed a snapshot, and one
    whose subscription changed, get what they lack all the same."""
    cache = SnapshotCache()
    server, port = await start_server(AdsServer(cache), "127.0.0.1:0")
    client, other = (DeltaClient(f"127.0.0.1:{port}", delta=True) for _ in range(2))
    try:
        ports = {f"c{i:02d}": 5000 + i for i in range(30)}
        cache.set(NODE, build(_clusters(ports)))
        for c in (client, other):
            c.delta(types.CLUSTER)
            first = await c.recv()
            assert len(first.resources) == 31
            c.delta(types.CLUSTER, nonce=first.nonce)
        # One cluster comes, one goes: both proxies get exactly that.
        ports["new"] = 6100
        del ports["c07"]
        snap = cache.set(NODE, build(_clusters(ports)))
        assert snap.steps[types.CLUSTER][1:] == ({"kube/default/new/80"}, {"kube/default/c07/80"})
        for c in (client, other):
            step = await c.recv()
            assert [r.name for r in step.resources] == ["kube/default/new/80"]
            assert list(step.removed_resources) == ["kube/default/c07/80"]
            c.delta(types.CLUSTER, nonce=step.nonce)
        await asyncio.sleep(0.1)
        # Two snapshots in a row, before the streams run: the proxies held the one
        # before the last step, and still get both changes in one response.
        ports["n1"] = 6001
        cache.set(NODE, build(_clusters(ports)))
        ports["n2"] = 6002
        cache.set(NODE, build(_clusters(ports)))
        for c in (client, other):
            step = await c.recv()
            assert sorted(r.name for r in step.resources) == ["kube/default/n1/80", "kube/default/n2/80"]
            c.delta(types.CLUSTER, nonce=step.nonce)
        # A subscription to endpoints: all of those named, then only what changes.
        client.delta(types.ENDPOINT, subscribe=["kube/default/c01/80", "kube/default/c05/80"])
        eds = await client.recv()
        assert sorted(r.name for r in eds.resources) == ["kube/default/c01/80", "kube/default/c05/80"]
        client.delta(types.ENDPOINT, nonce=eds.nonce)
        ports["c05"] = 6005
        ports["c06"] = 6006  # not subscribed
        cache.set(NODE, build(_clusters(ports)))
        response = await client.recv()  # the Clusters did not change, their endpoints did
        assert (response.type_url, [r.name for r in response.resources]) == (types.ENDPOINT, ["kube/default/c05/80"])
    finally:
        await client.close()
        await other.close()
        await server.stop(0)


async def _holding_one_cluster(cache: SnapshotCache, client: DeltaClient) -> Any:
    """The proxy holds one cluster and its endpoints, all ACKed; the endpoints' response."""
    cache.set(NODE, build(gateway()))
    client.delta(types.CLUSTER)
    cds = await client.recv()
    client.delta(types.CLUSTER, nonce=cds.nonce)
    client.delta(types.ENDPOINT, subscribe=["kube/default/svc/80"])
    eds = await client.recv()
    client.delta(types.ENDPOINT, nonce=eds.nonce)
    return eds


async def test_a_pass_waits_until_the_proxy_has_asked_for_new_endpoints(
        delta_setup: tuple[SnapshotCache, AdsServer, DeltaClient]) -> None:
    """A route to a new Service answers once Envoy has the cluster's endpoints,
    which it asks for only after it built the cluster: the control loop waits
    for that request (and answers it) before it computes status."""
    cache, ads, client = delta_setup
    await _holding_one_cluster(cache, client)
    assert await ads.wait_caught_up([NODE], 1.0)

    cache.set(NODE, build(_two_clusters()))  # a new cluster
    waiting = asyncio.create_task(ads.wait_caught_up([NODE], 5.0))
    cds = await client.recv()
    assert [r.name for r in cds.resources] == ["kube/default/b/80"]
    await asyncio.sleep(0.2)
    assert not waiting.done()  # sent, but its endpoints were not asked for yet
    client.delta(types.CLUSTER, nonce=cds.nonce)
    client.delta(types.ENDPOINT, subscribe=["kube/default/b/80"])
    eds = await client.recv()
    assert [r.name for r in eds.resources] == ["kube/default/b/80"]
    assert await asyncio.wait_for(waiting, 2.0)  # asked and answered: nothing waits on us

    cache.set(NODE, build(_two_clusters(port_b=4001)))
    assert not await ads.wait_caught_up([NODE], 0.0)  # not sent yet
    assert await ads.wait_caught_up([NODE], 2.0)  # sent (an ACK is Envoy's business)


async def test_catching_up_is_bounded_by_its_timeout(
        delta_setup: tuple[SnapshotCache, AdsServer, DeltaClient]) -> None:
    """A proxy that never asks for a new cluster's endpoints holds a pass up at
    most for the timeout."""
    cache, ads, client = delta_setup
    await _holding_one_cluster(cache, client)
    cache.set(NODE, build(_two_clusters()))
    await client.recv()
    started = asyncio.get_running_loop().time()
    assert not await ads.wait_caught_up([NODE], 0.3)
    assert asyncio.get_running_loop().time() - started < 2.0


async def test_a_proxy_that_leaves_holds_no_pass_up(
        delta_setup: tuple[SnapshotCache, AdsServer, DeltaClient]) -> None:
    """The pass waits on the first proxy not caught up, and is woken by that proxy alone:
    when it disconnects instead of asking for its endpoints, the pass goes on at once,
    not when the timeout runs out."""
    cache, ads, client = delta_setup
    await _holding_one_cluster(cache, client)
    cache.set(NODE, build(_two_clusters()))
    await client.recv()  # the new cluster, whose endpoints it will never ask for
    waiting = asyncio.create_task(ads.wait_caught_up([NODE], 30.0))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await client.close()
    assert await asyncio.wait_for(waiting, 2.0)


async def test_a_refused_cluster_holds_no_pass_up(delta_setup: tuple[SnapshotCache, AdsServer, DeltaClient]) -> None:
    """Envoy asks for no endpoints of clusters it refused: the pass goes on at once."""
    cache, ads, client = delta_setup
    await _holding_one_cluster(cache, client)
    cache.set(NODE, build(_two_clusters()))
    cds = await client.recv()
    client.delta(types.CLUSTER, nonce=cds.nonce, error="refused")
    await asyncio.sleep(0.1)
    assert await ads.wait_caught_up([NODE], 0.0)


async def test_a_refused_listener_is_offered_again_when_asked_to(
        delta_setup: tuple[SnapshotCache, AdsServer, DeltaClient]) -> None:
    """A port that was busy may be free now: retry() sends the refused listener again
    though the proxy asked nothing since its NACK."""
    cache, ads, client = delta_setup
    cache.set(NODE, build(gateway()))
    client.delta(types.LISTENER)
    lds = await client.recv()
    client.delta(types.LISTENER, nonce=lds.nonce, error="cannot bind")
    assert await client.silent()
    [conn] = ads.connections.values()
    ads.retry(conn, types.LISTENER)
    again = await client.recv()
    assert [r.name for r in again.resources] == [r.name for r in lds.resources] == ["http-8080"]


async def test_once_no_proxy_is_opening_the_encodings_go_and_the_next_proxy_gets_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What a snapshot keeps encoded for opening delta streams (each resource's entry, whole
    first answers) is a copy of every resource sent: once no stream is opening it goes, and a
    proxy that opens later is sent the very same configuration, encoded again."""
    monkeypatch.setattr(opening, "IDLE", 0.05)
    cache = SnapshotCache()
    ads = AdsServer(cache)
    server, port = await start_server(ads, "127.0.0.1:0")
    cache.set(NODE, build(_two_clusters()), counts_replicas=False)  # (one snapshot, whoever connects)
    snap = cache.get(NODE)
    assert snap is not None
    clients: list[DeltaClient] = []
    try:
        answers = []
        for _ in range(2):
            client = DeltaClient(f"127.0.0.1:{port}", delta=True)
            clients.append(client)
            client.delta(types.CLUSTER)
            cds = await client.recv()
            assert snap.entries[types.CLUSTER] and snap.delta_bodies  # kept while opening
            client.delta(types.CLUSTER, nonce=cds.nonce)
            for _ in range(100):  # (bounded) its opening ends once it ACKed, then IDLE passes
                await asyncio.sleep(0.02)
                if not snap.entries[types.CLUSTER] and not snap.delta_bodies:
                    break
            assert not snap.entries[types.CLUSTER] and not snap.delta_bodies
            answers.append(sorted((r.name, r.version, r.resource.value) for r in cds.resources))
        assert answers[0] == answers[1] and len(answers[0]) == 2
    finally:
        for client in clients:
            await client.close()
        await server.stop(0)


async def test_equal_subscriptions_are_one_set_that_goes_with_the_last_stream(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proxy of a Gateway subscribes to the same endpoints (thousands of names): the streams
    share one set of them, and it goes once no stream holds it (nor the answers kept encoded for
    openings). The table that shares them had kept every subscription ever made, and the names in
    it, for the life of the process."""
    monkeypatch.setattr(opening, "IDLE", 0.05)
    cache = SnapshotCache()
    ads = AdsServer(cache)
    server, port = await start_server(ads, "127.0.0.1:0")
    cache.set(NODE, build(_two_clusters()), counts_replicas=False)
    names = ["kube/default/b/80", "kube/default/svc/80"]
    clients = [DeltaClient(f"127.0.0.1:{port}", delta=True) for _ in range(2)]
    try:
        for client in clients:
            client.delta(types.ENDPOINT, subscribe=list(names))
            await client.recv()
        held = [conn.types[types.ENDPOINT].delta for conn in ads.connections.values()]
        assert len(held) == 2 and all(d is not None for d in held)
        first, second = (d.names for d in held if d is not None)
        assert first is second and sorted(first) == names
        gone = weakref.ref(first)
        del first, second, held
    finally:
        for client in clients:
            await client.close()
    try:
        for _ in range(100):  # (bounded) until both streams have ended
            if not ads.connections:
                break
            await asyncio.sleep(0.02)
        assert not ads.connections
        for _ in range(100):  # (bounded) and the openings' encodings are forgotten
            gc.collect()
            if gone() is None:
                break
            await asyncio.sleep(0.02)
        assert gone() is None
    finally:
        await server.stop(0)


async def test_changes_during_a_write_all_reach_the_proxy_and_a_failed_answer_ends_the_stream(
        delta_setup: tuple[SnapshotCache, AdsServer, DeltaClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream writes its answers one round at a time (xds/server.py, _Answering): snapshots set
    while a round runs are answered by another round, not dropped; and when an answer cannot be
    made, the stream ends (the proxy reconnects) instead of staying open with nothing sent."""
    from lychgate.xds.delta import DeltaState

    cache, ads, client = delta_setup
    cache.set(NODE, build(gateway()))
    client.delta(types.CLUSTER)
    first = await client.recv()
    client.delta(types.CLUSTER, nonce=first.nonce)
    assert await client.silent()
    for port in (3001, 3002, 3003):  # three changes back to back: the later ones while a write runs
        cache.set(NODE, build(gateway(port=port, timeout_ms=port)))
        await asyncio.sleep(0)  # (the round starts and waits on gRPC's write)
    latest = cache.get(NODE)
    assert latest is not None
    wanted = latest.resources[types.CLUSTER]["kube/default/svc/80"]
    received = []
    for _ in range(3):  # (bounded) each answer ACKed, until the last snapshot's cluster came
        update = await client.recv()
        client.delta(types.CLUSTER, nonce=update.nonce)
        received.append(update.resources[0].resource.value)
        if received[-1] == wanted:
            break
    assert received[-1] == wanted

    def broken(*_: Any) -> None:
        raise RuntimeError("a bug while answering")

    monkeypatch.setattr(DeltaState, "respond", broken)
    cache.set(NODE, build(gateway(timeout_ms=900)))
    await asyncio.wait_for(asyncio.gather(client.reader, return_exceptions=True), 2)  # the stream ended
    assert client.reader.done()
    for _ in range(50):  # (bounded) the server lets go of it
        if not ads.connections:
            break
        await asyncio.sleep(0.02)
    assert not ads.connections


async def test_a_stream_that_ends_leaves_nothing_for_the_cyclic_collector(
        delta_setup: tuple[SnapshotCache, AdsServer, DeltaClient]) -> None:
    """What a stream held goes as it ends, by reference counting: the control plane raises the
    collector's thresholds, so state kept in a reference cycle (a connection and its writer)
    stayed until it next ran; after a fleet of 1,000 proxies left, 5,000 delta states and ~4 MiB
    of Python objects for as long as the process stayed quiet."""
    cache, ads, client = delta_setup
    await _holding_one_cluster(cache, client)
    gc.collect()
    gc.disable()
    try:
        assert any(isinstance(o, DeltaState) for o in gc.get_objects())
        await client.close()
        for _ in range(100):  # (bounded) until the stream has ended
            if not ads.connections:
                break
            await asyncio.sleep(0.02)
        assert not ads.connections
        await asyncio.sleep(0.05)
        left = [type(o).__name__ for o in gc.get_objects() if isinstance(o, (ProxyConnection, DeltaState))]
        assert left == []
    finally:
        gc.enable()


async def test_a_stream_subscribing_as_the_last_one_did_shares_its_set_and_any_other_gets_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream's first names are looked up in the set the Gateway's last stream of the type
    subscribed to (not made into a set of their own first): in another order they share it; as
    many names but one other, or more of them, the stream gets exactly what it asked for."""
    monkeypatch.setattr(opening, "IDLE", 0.05)
    cache = SnapshotCache()
    ads = AdsServer(cache)
    server, port = await start_server(ads, "127.0.0.1:0")
    cache.set(NODE, build(_two_clusters()), counts_replicas=False)
    b, svc = "kube/default/b/80", "kube/default/svc/80"
    asked = {"first": [b, svc], "reordered": [svc, b], "one other": [b, "kube/default/c/80"],
             "one more": [b, svc, "kube/default/c/80"]}
    clients = {case: DeltaClient(f"127.0.0.1:{port}", delta=True) for case in asked}
    try:
        held: dict[str, frozenset[str]] = {}
        for case, client in clients.items():
            before = set(ads.connections)
            client.delta(types.ENDPOINT, subscribe=asked[case])
            await client.recv()
            (conn_id,) = set(ads.connections) - before
            delta = ads.connections[conn_id].types[types.ENDPOINT].delta
            assert delta is not None
            held[case] = delta.names
        assert held["reordered"] is held["first"]
        for case in ("one other", "one more"):
            assert held[case] == frozenset(asked[case]), case
    finally:
        for client in clients.values():
            await client.close()
        await server.stop(0)


async def test_proxies_opening_as_one_already_did_are_taken_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reconnect storm: the proxies of a Gateway open with the same names and the versions of
    the same snapshot. The first opening of a type taken as holding the snapshot is kept with it;
    a later stream whose opening is the same bytes after its node is taken as that one was, its
    versions not read again. One version other than the snapshot's, or the same opening once
    the snapshot changed, is read and answered with the difference."""
    monkeypatch.setattr(opening, "IDLE", 60.0)  # the openings stay "not over" (they keep what they kept)
    read: list[int] = []
    entries_of = DeltaState.initial_entries

    def counted(self: DeltaState, entries: Any, *args: Any) -> None:
        read.append(len(entries))
        entries_of(self, entries, *args)

    monkeypatch.setattr(DeltaState, "initial_entries", counted)
    cache = SnapshotCache()
    ads = AdsServer(cache)
    server, port = await start_server(ads, "127.0.0.1:0")
    ports = {f"c{i:02d}": 5000 + i for i in range(30)}
    snap = cache.set(NODE, build(_clusters(ports)), counts_replicas=False)
    held = dict(snap.hashes[types.ENDPOINT])
    names = sorted(held)
    changed = "kube/default/c05/80"
    clients: list[DeltaClient] = []

    async def opened(versions: dict[str, str]) -> Any:
        client = DeltaClient(f"127.0.0.1:{port}", delta=True)
        clients.append(client)
        client.delta(types.ENDPOINT, subscribe=names, initial=versions)
        answer = await client.recv()
        client.delta(types.ENDPOINT, nonce=answer.nonce)
        return answer

    try:
        for _ in range(3):  # the first is read; the next two are taken as it was
            answer = await opened(held)
            assert not answer.resources and not answer.removed_resources
        assert read == [len(held)]
        stale = dict(held, **{changed: "an older one"})
        assert [r.name for r in (await opened(stale)).resources] == [changed]
        assert read == [len(held)] * 2
        # Streams taken alike are streams like any other: a change reaches each of them.
        ports["c05"] = 6005
        cache.set(NODE, build(_clusters(ports)), counts_replicas=False)
        for client in clients:
            assert [r.name for r in (await client.recv()).resources] == [changed]
        # The same opening now holds an endpoint the snapshot no longer has: read, and answered.
        assert [r.name for r in (await opened(held)).resources] == [changed]
        assert read == [len(held)] * 3
    finally:
        for client in clients:
            await client.close()
        await server.stop(0)


@pytest.mark.parametrize("method", ["DeltaAggregatedResources", "StreamAggregatedResources"])
async def test_a_request_that_does_not_decode_ends_its_stream_with_invalid_argument(method: str) -> None:
    """Requests are read as bytes and decoded by the server: one that is not a request ends its
    stream with a status saying so, and the server goes on serving the next stream."""
    cache = SnapshotCache()
    server, port = await start_server(AdsServer(cache), "127.0.0.1:0")
    cache.set(NODE, build(gateway()), counts_replicas=False)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        call = channel.stream_stream(f"/envoy.service.discovery.v3.AggregatedDiscoveryService/{method}",
                                     request_serializer=None, response_deserializer=None)()
        await call.write(b"\xff\xff\xff")  # a field of number 0 with a truncated varint: not protobuf
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await asyncio.wait_for(call.read(), 5)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "does not decode" in (raised.value.details() or "")
        client = DeltaClient(f"127.0.0.1:{port}", delta=True)
        try:
            client.delta(types.CLUSTER)
            assert [r.name for r in (await client.recv()).resources] == ["kube/default/svc/80"]
        finally:
            await client.close()
    finally:
        await channel.close()
        await server.stop(0)
