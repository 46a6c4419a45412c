"""The ADS server (state of the world) that feeds every proxy its snapshot.

One stream per Envoy. The stream answers a type only when the version or the
names subscribed changed (an ACK must never trigger another response), ignores
stale nonces, and follows a Cluster push with its endpoints even when they did
not change: otherwise Envoy keeps the cluster warming until its fetch timeout.
The loop never lets an exception escape into gRPC, which would reset the
stream and make Envoy reconnect with back-off.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from lychgate.admin import metrics
from lychgate.log import component_logger
from lychgate.xds import types
from lychgate.xds.cache import Snapshot, SnapshotCache

log = component_logger("xds")

# After a push of the key type, the value type is re-sent with a fresh nonce.
_FOLLOW = {types.CLUSTER: types.ENDPOINT, types.LISTENER: types.ROUTE}

MAX_ERROR_DETAIL = 4096  # NACK messages can embed a dump of the whole resource


@dataclass
class TypeState:
    names: frozenset[str] | None = None  # None: wildcard
    pending: bool = False  # Envoy has a request outstanding
    names_changed: bool = False
    force: bool = False
    nonce: str = ""
    version_sent: str = ""
    version_acked: str = ""
    nack: dict[str, Any] | None = None
    # Delta xDS only: what the proxy holds (name -> content hash), the
    # responses in flight (nonce -> version and the hashes they replaced, to
    # roll back on NACK), and the type version last rejected.
    wildcard: bool = False
    known: dict[str, str] = field(default_factory=dict)
    inflight: dict[str, tuple[str, dict[str, str | None]]] = field(default_factory=dict)
    rejected: str | None = None
    answered: bool = False
    # The snapshot hashes `known` mirrors (for the names wanted), by identity;
    # None once a subscription, a NACK or a forced re-send made them differ.
    basis: dict[str, str] | None = None


@dataclass
class ProxyConnection:
    """What the control plane knows about one connected Envoy."""

    id: int
    node_id: str
    gateway: str
    peer: str
    connected_at: float
    protocol: str = "sotw"
    node: dict[str, Any] = field(default_factory=dict)
    types: dict[str, TypeState] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def programmed(self, snapshot: Snapshot | None) -> bool:
        """Has this proxy accepted (ACKed) a configuration for every type?"""
        if snapshot is None:
            return False
        return all(
            self.types.get(t) is not None and self.types[t].version_acked
            for t in (types.CLUSTER, types.LISTENER)
        )

    def caught_up(self, snapshot: Snapshot) -> bool:
        """Is nothing of `snapshot` waiting on the control plane? Every type it
        holds was sent, and the endpoints of every cluster it added or changed
        were asked for (Envoy asks once it has built the cluster, and keeps it
        warming, and the routes to it failing, until they come). What Envoy has
        yet to apply or ACK waits on Envoy alone."""
        for type_url, state in self.types.items():
            version = snapshot.versions.get(type_url)
            if version is None or state.rejected == version:  # a delta proxy refused it: nothing follows
                continue
            sent = state.basis is snapshot.hashes[type_url] if self.protocol == "delta" else state.version_sent == version
            if not sent:
                return False
        step, endpoints = snapshot.steps.get(types.CLUSTER), snapshot.hashes.get(types.ENDPOINT)
        asked, clusters = self.types.get(types.ENDPOINT), self.types.get(types.CLUSTER)
        if step is None or endpoints is None or asked is None or asked.names is None \
                or clusters is None or clusters.nack is not None:  # refused clusters ask for nothing
            return True
        return all(name in asked.names for name in step[1] if name in endpoints)

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "node": self.node or {"id": self.node_id},
            "gateway": self.gateway,
            "peer": self.peer,
            "protocol": self.protocol,
            "connectedSeconds": round(time.time() - self.connected_at, 1),
            "types": {
                types.SHORT.get(t, t): {
                    "versionSent": s.version_sent,
                    "versionAcked": s.version_acked,
                    "nack": s.nack,
                    "subscribed": sorted(s.names) if s.names is not None else "*",
                }
                for t, s in self.types.items()
            },
        }


def _user_agent(node: Any) -> str:
    v = node.user_agent_build_version.version
    return f"{node.user_agent_name} {v.major_number}.{v.minor_number}.{v.patch}"


def gateway_of(node_id: str) -> str:
    """Proxies identify as "namespace/name" of their Gateway (see deploy.bootstrap)."""
    return node_id


FeedbackHook = Callable[[ProxyConnection], None]


class AdsServer(ads_pb2_grpc.AggregatedDiscoveryServiceServicer):
    def __init__(self, cache: SnapshotCache) -> None:
        self.cache = cache
        self.connections: dict[int, ProxyConnection] = {}
        # The same connections by Gateway: each pass asks for every Gateway's
        # proxies, which must not cost a scan of every proxy connected.
        self._by_gateway: dict[str, dict[int, ProxyConnection]] = {}
        self._ids = itertools.count(1)
        self._nonces = itertools.count(1)
        self._progress = asyncio.Event()  # set whenever a stream has handled requests and answered
        # Called when a proxy connects, disconnects, first ACKs or NACKs.
        self.on_feedback: FeedbackHook = lambda _conn: None
        # Called on every ACK, with the type acknowledged.
        self.on_ack: Callable[[ProxyConnection, str], None] = lambda _conn, _type: None

    def for_gateway(self, gateway: str) -> list[ProxyConnection]:
        return list(self._by_gateway.get(gateway, {}).values())

    async def wait_caught_up(self, gateways: Iterable[str], timeout: float) -> bool:
        """Wait, at most `timeout` seconds, until every connected proxy of
        `gateways` has been sent its snapshot and has asked for the endpoints of
        its new clusters (ProxyConnection.caught_up); the loop serves the
        streams meanwhile. False when the time ran out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        waiting = [g for g in gateways if g in self._by_gateway]
        while True:
            waiting = [g for g in waiting if not self._caught_up(g)]
            left = deadline - loop.time()
            if not waiting or left <= 0:
                return not waiting
            self._progress.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._progress.wait(), left)

    def _caught_up(self, gateway: str) -> bool:
        snapshot = self.cache.get(gateway)
        return snapshot is None or all(c.caught_up(snapshot) for c in self._by_gateway.get(gateway, {}).values())

    async def StreamAggregatedResources(
        self, request_iterator: AsyncIterator[discovery_pb2.DiscoveryRequest], context: Any
    ) -> AsyncIterator[discovery_pb2.DiscoveryResponse]:
        async for response in self._stream(request_iterator, context, "sotw", self._handle_request, self._respond):
            yield response

    async def DeltaAggregatedResources(
        self, request_iterator: AsyncIterator[discovery_pb2.DeltaDiscoveryRequest], context: Any
    ) -> AsyncIterator[discovery_pb2.DeltaDiscoveryResponse]:
        async for response in self._stream(request_iterator, context, "delta", self._handle_delta, self._respond_delta):
            yield response

    async def _stream(
        self,
        request_iterator: AsyncIterator[Any],
        context: Any,
        protocol: str,
        handle: Callable[[ProxyConnection, Any], None],
        respond: Callable[[ProxyConnection, str, Snapshot], Any],
    ) -> AsyncIterator[Any]:
        """One proxy's stream: read requests, and answer whenever a request or a
        snapshot change gives something to send."""
        wake = asyncio.Event()
        requests: asyncio.Queue[Any] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for request in request_iterator:
                    requests.put_nowait(request)
                    wake.set()
            except (asyncio.CancelledError, grpc.RpcError):
                pass
            finally:
                requests.put_nowait(None)
                wake.set()

        reader = asyncio.create_task(pump())
        conn: ProxyConnection | None = None
        try:
            while True:
                await wake.wait()
                wake.clear()
                while not requests.empty():
                    request = requests.get_nowait()
                    if request is None:
                        return
                    if conn is None:
                        conn = self._connect(request, context, wake, protocol)
                    try:
                        handle(conn, request)
                    except Exception:  # a bad request must not kill the stream
                        log.exception("proxy %s: cannot handle request for %s", conn.node_id, request.type_url)
                if conn is None:
                    continue
                snapshot = self.cache.get(conn.gateway)
                if snapshot is None:
                    continue
                for type_url in types.PUSH_ORDER:
                    response = respond(conn, type_url, snapshot)
                    if response is not None:
                        yield response
                self._progress.set()
        finally:
            reader.cancel()
            if conn is not None:
                self.cache.unwatch(conn.gateway, wake)
                self.connections.pop(conn.id, None)
                same = self._by_gateway.get(conn.gateway, {})
                same.pop(conn.id, None)
                if not same:
                    self._by_gateway.pop(conn.gateway, None)
                self._replicas_changed(conn.gateway)
                metrics.CONNECTED_PROXIES.labels(conn.gateway).dec()
                log.info("proxy %s disconnected", conn.node_id)
                self._safe_feedback(conn)

    def _connect(self, request: Any, context: Any, wake: asyncio.Event, protocol: str) -> ProxyConnection:
        node = request.node
        conn = ProxyConnection(
            id=next(self._ids),
            node_id=node.id,
            gateway=gateway_of(node.id),
            peer=context.peer() if context is not None else "",
            connected_at=time.time(),
            protocol=protocol,
            node={"id": node.id, "cluster": node.cluster, "userAgent": _user_agent(node)},
            wake=wake,
        )
        self.connections[conn.id] = conn
        self._by_gateway.setdefault(conn.gateway, {})[conn.id] = conn
        self.cache.watch(conn.gateway, wake)
        self._replicas_changed(conn.gateway)
        metrics.CONNECTED_PROXIES.labels(conn.gateway).inc()
        log.info("proxy %s connected from %s (%s xDS)", conn.node_id, conn.peer, protocol)
        return conn

    def _replicas_changed(self, gateway: str) -> None:
        """The Gateway's local cluster lists its proxies connected now (xds/replicas.py)."""
        self.cache.set_replicas(gateway, [c.peer for c in self._by_gateway.get(gateway, {}).values()])

    def _handle_request(self, conn: ProxyConnection, request: discovery_pb2.DiscoveryRequest) -> None:
        type_url = request.type_url
        state = conn.types.setdefault(type_url, TypeState())
        if request.response_nonce and request.response_nonce != state.nonce:
            log.debug("proxy %s: stale nonce for %s", conn.node_id, types.SHORT.get(type_url, type_url))
            return
        feedback = False
        if request.response_nonce:
            feedback = self._record_reply(conn, type_url, state, state.version_sent, request)
        names = frozenset(request.resource_names) if type_url in types.NAMED else None
        if names != state.names:
            state.names = names
            state.names_changed = True
        state.pending = True
        if feedback:
            self._safe_feedback(conn)

    def _record_reply(self, conn: ProxyConnection, type_url: str, state: TypeState, version: str, request: Any) -> bool:
        """Record an ACK or NACK of `version`; True when status should look again."""
        if request.HasField("error_detail"):
            metrics.XDS_NACKS.labels(type_url, conn.gateway).inc()
            detail = request.error_detail.message[:MAX_ERROR_DETAIL]
            state.nack = {"version": version, "error": detail, "at": time.time()}
            log.warning("proxy %s rejected %s version %s: %s",
                        conn.node_id, types.SHORT.get(type_url, type_url), version, detail)
            return True
        metrics.XDS_ACKS.labels(type_url, conn.gateway).inc()
        changed = state.nack is not None or not state.version_acked
        state.version_acked = version
        state.nack = None
        self.on_ack(conn, type_url)
        return changed

    def _respond(
        self, conn: ProxyConnection, type_url: str, snapshot: Snapshot
    ) -> discovery_pb2.DiscoveryResponse | None:
        state = conn.types.get(type_url)
        if state is None or not state.pending:
            return None
        version = snapshot.version(type_url)
        if not (state.force or state.names_changed or version != state.version_sent):
            return None
        if state.nack is not None and state.nack["version"] == version and not state.names_changed:
            return None  # the same content was rejected; wait for a new version
        byname = snapshot.resources.get(type_url, {})
        if state.names is None:
            resources = list(byname.values())
        else:
            resources = [byname[n] for n in sorted(state.names) if n in byname]
        nonce = str(next(self._nonces))
        state.pending = state.force = state.names_changed = False
        state.nonce = nonce
        state.version_sent = version
        follow = _FOLLOW.get(type_url)
        if follow is not None and follow in conn.types:
            conn.types[follow].force = True
        metrics.XDS_PUSHES.labels(type_url, conn.gateway).inc()
        log.debug("push %s %s version %s (%d resources)", conn.node_id,
                  types.SHORT.get(type_url, type_url), version, len(resources))
        return discovery_pb2.DiscoveryResponse(
            version_info=version, resources=resources, type_url=type_url, nonce=nonce
        )

    # --- delta xDS -------------------------------------------------------------

    def _handle_delta(self, conn: ProxyConnection, request: discovery_pb2.DeltaDiscoveryRequest) -> None:
        type_url = request.type_url
        state = conn.types.get(type_url)
        if state is None:
            state = conn.types[type_url] = TypeState(names=frozenset())
            # An empty first subscription to a wildcard type means "everything".
            state.wildcard = type_url not in types.NAMED and not request.resource_names_subscribe
        feedback = False
        if request.response_nonce:
            sent = state.inflight.pop(request.response_nonce, None)
            if sent is None:
                log.debug("proxy %s: stale nonce for %s", conn.node_id, types.SHORT.get(type_url, type_url))
            else:
                version, replaced = sent
                feedback = self._record_reply(conn, type_url, state, version, request)
                if state.nack is not None:
                    state.basis = None
                    # The proxy kept what it had: forget what we assumed it took.
                    for name, old in replaced.items():
                        if old is None:
                            state.known.pop(name, None)
                        else:
                            state.known[name] = old
                    state.rejected = version
                else:
                    state.rejected = None
        names = set(state.names or ())
        if request.resource_names_subscribe or request.resource_names_unsubscribe or request.initial_resource_versions:
            state.basis = None
        for name in request.resource_names_subscribe:
            if name == "*":
                state.wildcard = True
            else:
                names.add(name)
                state.known.pop(name, None)  # (re)subscribing asks for the resource again
        for name in request.resource_names_unsubscribe:
            if name == "*":
                state.wildcard = False
            names.discard(name)
            state.known.pop(name, None)
        state.names = frozenset(names)
        state.known.update(request.initial_resource_versions)
        if feedback:
            self._safe_feedback(conn)

    def _respond_delta(
        self, conn: ProxyConnection, type_url: str, snapshot: Snapshot
    ) -> discovery_pb2.DeltaDiscoveryResponse | None:
        state = conn.types.get(type_url)
        if state is None:
            return None
        version = snapshot.version(type_url)
        if state.rejected == version:
            return None  # the same content was rejected; wait for a new version
        hashes = snapshot.hashes.get(type_url, {})
        step = snapshot.steps.get(type_url)
        if state.basis is hashes:
            changed, removed = [], []  # the proxy holds this very snapshot
        elif state.basis is not None and step is not None and step[0] is state.basis:
            # It holds the previous snapshot: what changed since was found once for all proxies.
            names = state.names or frozenset()
            changed = sorted(n for n in step[1] if state.wildcard or n in names)
            removed = sorted(n for n in step[2] if n in state.known)
        else:
            wanted = set(hashes) if state.wildcard else set(state.names or ()) & set(hashes)
            changed = sorted(n for n in wanted if state.known.get(n) != hashes[n])
            removed = sorted(n for n in state.known if n not in wanted)
        state.basis = hashes
        if not changed and not removed and state.answered:
            if state.nack is not None:
                # The input went back to what the proxy kept when it refused the last
                # update: nothing to send, and nothing refused any more.
                state.nack = state.rejected = None
                self._safe_feedback(conn)
            return None
        nonce = str(next(self._nonces))
        replaced: dict[str, str | None] = {n: state.known.get(n) for n in (*changed, *removed)}
        byname = snapshot.resources.get(type_url, {})
        resources = [discovery_pb2.Resource(name=n, version=hashes[n], resource=byname[n]) for n in changed]
        for n in changed:
            state.known[n] = hashes[n]
        for n in removed:
            state.known.pop(n, None)
        state.inflight[nonce] = (version, replaced)
        state.version_sent = version
        state.answered = True
        follow = _FOLLOW.get(type_url)
        if follow is not None and follow in conn.types and changed:
            conn.types[follow].basis = None
            for name in changed:
                conn.types[follow].known.pop(name, None)
        metrics.XDS_PUSHES.labels(type_url, conn.gateway).inc()
        log.debug("push %s %s version %s (delta: %d changed, %d removed)", conn.node_id,
                  types.SHORT.get(type_url, type_url), version, len(changed), len(removed))
        return discovery_pb2.DeltaDiscoveryResponse(
            system_version_info=version, resources=resources, type_url=type_url,
            removed_resources=removed, nonce=nonce,
        )

    def retry(self, conn: ProxyConnection, type_url: str) -> None:
        """Offer a rejected type again (e.g. a listener whose port was busy)."""
        state = conn.types.get(type_url)
        if state is not None and state.nack is not None:
            state.nack = None
            state.force = True
            if state.rejected is not None:  # delta: forget what the proxy refused
                state.rejected = None
                state.known.clear()
                state.basis = None
            conn.wake.set()

    def _safe_feedback(self, conn: ProxyConnection) -> None:
        try:
            self.on_feedback(conn)
        except Exception:
            log.exception("feedback hook failed")


async def start_server(
    servicer: AdsServer, address: str, credentials: grpc.ServerCredentials | None = None,
    extra_addresses: tuple[str, ...] = (),
) -> tuple[grpc.aio.Server, int]:
    """Serve ADS on address ("HOST:PORT"; port 0 picks one) and any extra
    addresses (the agent-gateway port). Returns the port bound for `address`."""
    server = grpc.aio.server(
        options=[
            ("grpc.max_send_message_length", 256 * 1024 * 1024),
            ("grpc.max_receive_message_length", 16 * 1024 * 1024),
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.http2.max_pings_without_data", 0),
        ]
    )
    ads_pb2_grpc.add_AggregatedDiscoveryServiceServicer_to_server(servicer, server)
    port = 0
    for i, addr in enumerate((address, *extra_addresses)):
        bound = server.add_insecure_port(addr) if credentials is None else server.add_secure_port(addr, credentials)
        if bound == 0:
            raise OSError(f"cannot listen for xDS on {addr}")
        port = port if i else bound
    await server.start()
    log.info("xDS server listening on %s:%d%s", address.rpartition(":")[0], port,
             " (TLS)" if credentials else "")
    return server, port
