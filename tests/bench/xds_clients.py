"""Simulated proxies for the xDS benchmarks: delta ADS clients that behave as Envoy does.

Each client subscribes to Clusters and Listeners (wildcard), then to the
endpoints of every Cluster, the routes every Listener names, and for a Listener
whose table is split into scopes, to scopes (wildcard) and the routes every
scope names; it ACKs every
response as soon as it arrives, and remembers what it holds (name → version),
so that it can reconnect as Envoy does after a control-plane restart: its
subscriptions again and `initial_resource_versions` of what it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import grpc
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import scoped_route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.service.discovery.v3 import discovery_pb2

from lychgate.xds import types
from lychgate.xds.replicas import LOCAL_CLUSTER

ADS_DELTA = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
# Openings encoded (DeltaClient._first_requests), by Gateway, type, names and versions held.
_OPENINGS: dict[tuple[Any, ...], bytes] = {}


def _encoded(request: discovery_pb2.DeltaDiscoveryRequest | bytes) -> bytes:
    return request if isinstance(request, bytes) else request.SerializeToString()


CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024), ("grpc.use_local_subchannel_pool", 1)]


class DeltaClient:
    """One simulated proxy: a delta ADS stream that subscribes as Envoy does and
    ACKs every response as soon as it arrives."""

    def __init__(self, gateway: str) -> None:
        self.gateway = gateway
        self.outbox: list[discovery_pb2.DeltaDiscoveryRequest | bytes] = []  # written before the next read
        self.call: Any = None
        self.acks: list[tuple[float, str]] = []  # (monotonic time of the ACK, type)
        # Envoy asks for its bootstrap's local cluster (the Gateway's replicas) from the start.
        self.subscribed: dict[str, set[str]] = {types.ENDPOINT: {LOCAL_CLUSTER}, types.ROUTE: set()}
        self.scoped = False  # subscribed to scopes (a Listener has a split table)
        self.held: dict[str, dict[str, str]] = {t: {} for t in (types.CLUSTER, types.ENDPOINT, types.LISTENER,
                                                                types.SCOPED_ROUTE, types.ROUTE)}
        self.synced = asyncio.Event()
        self.route_bytes: list[int] | None = None  # when a list: the size of each RouteConfiguration answer

    def _first_requests(self) -> list[bytes]:
        """The stream's opening: wildcard Clusters and Listeners, and on a reconnect
        the names subscribed and the versions held of every type. Encoded once per content
        (_OPENINGS): after a restart every proxy of a Gateway sends the same maps of thousands
        of versions, and building them in Python took the simulated fleet more CPU than the
        controller took to read them (Envoy builds them in C++)."""
        out = []
        for type_url in (types.CLUSTER, types.LISTENER, types.SCOPED_ROUTE, types.ENDPOINT, types.ROUTE):
            names = sorted(self.subscribed.get(type_url, ()))
            if (type_url in types.NAMED and not names) or (type_url == types.SCOPED_ROUTE and not self.scoped):
                continue
            held = self.held[type_url]
            key = (self.gateway, type_url, tuple(names), tuple(held.items()))
            encoded = _OPENINGS.get(key)
            if encoded is None:
                request = discovery_pb2.DeltaDiscoveryRequest(type_url=type_url, resource_names_subscribe=names,
                                                              initial_resource_versions=held)
                request.node.id, request.node.cluster = self.gateway, "bench"
                if len(_OPENINGS) >= 64:
                    _OPENINGS.clear()
                encoded = _OPENINGS[key] = request.SerializeToString()
            out.append(encoded)
        return out

    async def run(self, channel: grpc.aio.Channel) -> None:
        """Until the stream ends; a client may run again (a reconnect) on a new channel.
        grpc.aio's reader/writer calls, one task per client: a request iterator adds a queue,
        a generator and a task of gRPC's to every ACK, and the fan-out measures the fleet's
        CPU too (at 1,000 proxies as much as the controller's)."""
        self.synced.clear()
        self.outbox = self._first_requests()
        self.call = call = channel.stream_stream(ADS_DELTA, request_serializer=_encoded,
                                                 response_deserializer=discovery_pb2.DeltaDiscoveryResponse.FromString)()
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
            await self._serve(call)
        self.call = None  # (a call held holds its channel, and the connection, open)

    async def _serve(self, call: Any) -> None:
        while True:
            outbox, self.outbox = self.outbox, []
            for request in outbox:
                await call.write(request)
            response = await call.read()
            if response is grpc.aio.EOF:
                return
            self._hold(response)
            self._follow(response)
            self.outbox.append(discovery_pb2.DeltaDiscoveryRequest(
                type_url=response.type_url, response_nonce=response.nonce))
            self.acks.append((time.monotonic(), response.type_url))
            if response.type_url == types.ROUTE:
                self.synced.set()
                if self.route_bytes is not None:
                    self.route_bytes.append(response.ByteSize())

    def _hold(self, response: discovery_pb2.DeltaDiscoveryResponse) -> None:
        held = self.held.setdefault(response.type_url, {})
        for r in response.resources:
            held[r.name] = r.version
        for name in response.removed_resources:
            held.pop(name, None)

    def _follow(self, response: discovery_pb2.DeltaDiscoveryResponse) -> None:
        """Subscribe to what Clusters, Listeners and scopes name, as Envoy does."""
        wanted: set[str] = set()
        if response.type_url == types.CLUSTER:
            follow = types.ENDPOINT
            wanted = {r.name for r in response.resources}
        elif response.type_url == types.LISTENER:
            follow = types.ROUTE
            for r in response.resources:
                listener = listener_pb2.Listener()
                r.resource.Unpack(listener)
                for chain in listener.filter_chains:
                    for f in chain.filters:
                        hcm = hcm_pb.HttpConnectionManager()
                        if not f.typed_config.Unpack(hcm):
                            continue
                        if hcm.HasField("rds"):
                            wanted.add(hcm.rds.route_config_name)
                        elif hcm.HasField("scoped_routes") and not self.scoped:
                            self.scoped = True
                            self.outbox.append(discovery_pb2.DeltaDiscoveryRequest(type_url=types.SCOPED_ROUTE))
        elif response.type_url == types.SCOPED_ROUTE:
            follow = types.ROUTE
            for r in response.resources:
                scope = scoped_route_pb2.ScopedRouteConfiguration()
                r.resource.Unpack(scope)
                wanted.add(scope.route_configuration_name)
        else:
            return
        new = wanted - self.subscribed[follow]
        if new:
            self.subscribed[follow] |= new
            self.outbox.append(discovery_pb2.DeltaDiscoveryRequest(
                type_url=follow, resource_names_subscribe=sorted(new)))

    def close(self) -> None:
        if self.call is not None:
            self.call.cancel()


async def quiet(clients: list[DeltaClient], seconds: float, timeout: float) -> None:
    """Until no client has received anything for `seconds` (a rollout is over), at most `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = max((c.acks[-1][0] for c in clients if c.acks), default=0.0)
        if time.monotonic() - last >= seconds:
            return
        await asyncio.sleep(0.1)
