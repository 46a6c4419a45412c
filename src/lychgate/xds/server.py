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
import logging
import sys
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Iterable, KeysView, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.protobuf.message import DecodeError
from prometheus_client import Counter

from lychgate import memory
from lychgate.admin import metrics
from lychgate.log import component_logger
from lychgate.xds import delta_request, opening, types
from lychgate.xds.cache import Snapshot, SnapshotCache, Waker, as_any
from lychgate.xds.delta import EMPTY, MAX_SHARED, DeltaState

log = component_logger("xds")

# After a push of the key type, the value type is re-sent with a fresh nonce.
_FOLLOW = {types.CLUSTER: types.ENDPOINT, types.LISTENER: types.ROUTE}

MAX_ERROR_DETAIL = 4096  # NACK messages can embed a dump of the whole resource

REPLICAS_EVERY = 0.5  # seconds: at most one update of a Gateway's local cluster so often
LET_GO_WITHIN = 30.0  # seconds a change may take to reach every proxy before its encodings are kept
_WILDCARD = frozenset({"*"})
GIVE_BACK_AFTER = 4 << 20  # bytes of answers sent: then the heap's free pages go back to the system (AdsServer._sent)


@dataclass(slots=True)  # (one per type per stream)
class TypeState:
    names: frozenset[str] | None = None  # None: wildcard
    pending: bool = False  # Envoy has a request outstanding
    names_changed: bool = False
    force: bool = False
    nonce: str = ""
    version_sent: str = ""
    version_acked: str = ""
    nack: dict[str, Any] | None = None
    delta: DeltaState | None = None  # delta xDS only: what the proxy holds, responses in flight

    @property
    def subscribed(self) -> frozenset[str] | None:
        """The names asked for; None: wildcard (state of the world)."""
        return self.delta.names if self.delta is not None else self.names


class _NotYet:
    """The waker of a connection whose stream has no writer yet: nothing to wake."""

    __slots__ = ()

    def set(self) -> None:
        pass


NOT_YET: Waker = _NotYet()


@dataclass(slots=True)
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
    wake: Waker = field(default=NOT_YET, repr=False)  # the stream's _Answering, once it has one
    asked: bool = False  # something to look at again since the stream last answered
    looked_at: Snapshot | None = field(default=None, repr=False)  # the snapshot last answered from
    counters: dict[tuple[Counter, str], Any] = field(default_factory=dict, repr=False)

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
            if version is None:
                continue
            if state.delta is not None:
                sent = state.delta.rejected == version or state.delta.synced_to(snapshot.hashes[type_url])
            else:
                sent = state.version_sent == version
            if not sent:  # (a delta proxy that refused it: nothing follows)
                return False
        step, endpoints = snapshot.steps.get(types.CLUSTER), snapshot.hashes.get(types.ENDPOINT)
        asked, clusters = self.types.get(types.ENDPOINT), self.types.get(types.CLUSTER)
        names = asked.subscribed if asked is not None else None
        if step is None or endpoints is None or names is None \
                or clusters is None or clusters.nack is not None:  # refused clusters ask for nothing
            return True
        return all(name in names for name in step[1] if name in endpoints)

    def answered(self) -> bool:
        """Has every type this proxy asked for been answered once?"""
        return all(s.delta.answered if s.delta is not None else bool(s.nonce) for s in self.types.values())

    def counter(self, metric: Counter, type_url: str) -> Any:
        """`metric`'s child for this proxy's Gateway and `type_url`, found once per Gateway:
        labels() takes a lock and checks its values each time (2 % of a change's fan-out).
        (`counters` is its Gateway's, shared by its proxies: AdsServer._connect.)"""
        key = (metric, type_url)
        child = self.counters.get(key)
        if child is None:
            child = self.counters[key] = metric.labels(type_url, self.gateway)
        return child

    def settled(self) -> bool:
        """Has every type this delta proxy asked for been answered, and every answer ACKed or
        refused? Then its opening is over: what it sends next is small (subscriptions that
        follow what it was sent). A state-of-the-world proxy says nothing as clear."""
        return self.protocol == "delta" and self.answered() \
            and not any(s.delta.inflight for s in self.types.values() if s.delta is not None)

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
                    "subscribed": sorted(s.subscribed) if s.subscribed is not None else "*",
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
        memory.return_large_blocks()  # a proxy's first configuration is large, and short-lived
        self.cache = cache
        self.connections: dict[int, ProxyConnection] = {}
        # The same connections by Gateway: each pass asks for every Gateway's
        # proxies, which must not cost a scan of every proxy connected.
        self._by_gateway: dict[str, dict[int, ProxyConnection]] = {}
        self._ids = itertools.count(1)
        self._nonces = itertools.count(1)
        # Set when a proxy wait_caught_up waits on (the first of its queue: _awaited, by id)
        # has answered or left: not on every stream's answer, each of which woke the waiter.
        self._progress = asyncio.Event()
        self._awaited: dict[int, int] = {}  # proxy id -> waiters
        self._turns = opening.Turns(idle=self._openings_over)  # streams opening at once
        self._replicas_at: dict[str, float] = {}  # Gateway -> loop time of its last local-cluster update
        self._replicas_due: dict[str, asyncio.TimerHandle] = {}  # Gateway -> its next one, if scheduled
        self._replicas_count: dict[str, int] = {}  # Gateway -> proxies in its last one
        self._refusing: dict[int, ProxyConnection] = {}  # each proxy that NACKed since (refusing())
        # Subscriptions by their hash, each held by the streams that ask for it (_intern). Keyed by
        # the hash, not the set: a key is held strongly, and it kept every subscription ever made.
        self._names: weakref.WeakValueDictionary[int, frozenset[str]] = weakref.WeakValueDictionary()
        # (Gateway, type) -> the subscription last interned for it (_alike).
        self._latest: weakref.WeakValueDictionary[tuple[str, str], frozenset[str]] = weakref.WeakValueDictionary()
        self._handed_bytes = 0  # delta answers handed to gRPC since the heap was last given back
        # Gateways whose last change is still on its way to their proxies (let_go_once_sent)
        self._sending: set[str] = set()
        self._janitor: asyncio.Task[None] | None = None
        # Gateway -> the metric children of its proxies (ProxyConnection.counter), one dict for
        # them all: a dict per stream was 3 KiB a proxy. (Children are never removed.)
        self._counters: dict[str, dict[tuple[Counter, str], Any]] = {}
        # Called when a proxy connects, disconnects, first ACKs or NACKs.
        self.on_feedback: FeedbackHook = lambda _conn: None
        # Called on every ACK, with the type acknowledged.
        self.on_ack: Callable[[ProxyConnection, str], None] = lambda _conn, _type: None

    def gateways(self) -> KeysView[str]:
        """The Gateways with a proxy connected."""
        return self._by_gateway.keys()

    def refusing(self) -> list[ProxyConnection]:
        """The connected proxies that refused a response and took nothing of that type since:
        what status reports, found without looking at every proxy each pass."""
        self._refusing = {i: c for i, c in self._refusing.items()
                          if i in self.connections and any(s.nack is not None for s in c.types.values())}
        return list(self._refusing.values())

    def for_gateway(self, gateway: str) -> list[ProxyConnection]:
        return list(self._by_gateway.get(gateway, {}).values())

    def any_programmed(self, gateway: str, snapshot: Snapshot | None, but: ProxyConnection) -> bool:
        """Is a proxy of `gateway` other than `but` programmed? (Usually the first asked.)"""
        return any(c is not but and c.programmed(snapshot) for c in self._by_gateway.get(gateway, {}).values())

    async def wait_caught_up(self, gateways: Iterable[str], timeout: float) -> bool:
        """Wait, at most `timeout` seconds, until every connected proxy of
        `gateways` has been sent its snapshot and has asked for the endpoints of
        its new clusters (ProxyConnection.caught_up); the loop serves the
        streams meanwhile. False when the time ran out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        # Each proxy is looked at until it has caught up, in the order the streams are woken
        # (that of connecting): each stream's progress then looks at the first few still waiting,
        # not again at every proxy (a pass over 1,000 proxies per stream that answered).
        waiting = deque(c for g in gateways for c in self._by_gateway.get(g, {}).values())
        while True:
            while waiting and (waiting[0].id not in self.connections or self._caught_up(waiting[0])):
                waiting.popleft()
            left = deadline - loop.time()
            if not waiting or left <= 0:
                return not waiting
            head = waiting[0].id
            self._awaited[head] = self._awaited.get(head, 0) + 1
            self._progress.clear()
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._progress.wait(), left)
            finally:
                self._awaited[head] -= 1
                if not self._awaited[head]:
                    del self._awaited[head]

    async def let_go_once_sent(self, gateways: Collection[str], waited: float) -> None:
        """Once every proxy of `gateways` has been sent their snapshots, what the snapshots keep
        encoded to send goes (each resource changed, each answer), unless streams are opening,
        which share it. Kept, it was a second copy of every resource changed since the last
        openings, and of the last answer of every Gateway (2.4 MiB at 20 Gateways of 250
        routes once a Gateway-wide policy had changed every route). A pass waits `waited`
        seconds for its proxies (wait_caught_up); a bigger change is seen to in the background."""
        if await self.wait_caught_up(gateways, waited):
            self._sent(gateways)
            return
        self._sending.update(gateways)
        if self._janitor is None or self._janitor.done():
            self._janitor = asyncio.create_task(self._sent_when_caught_up())

    async def _sent_when_caught_up(self) -> None:
        """One task for every change still on its way (a pass each 100 ms under churn had made
        one each): the Gateways added meanwhile are waited for on the next round."""
        while self._sending:
            gateways, self._sending = self._sending, set()
            if await self.wait_caught_up(gateways, LET_GO_WITHIN):
                self._sent(gateways)

    def _sent(self, gateways: Iterable[str]) -> None:
        if not self._turns.busy:
            self.cache.forget_encodings(gateways)
            if self._handed_bytes >= GIVE_BACK_AFTER:
                # gRPC copied each answer for its stream, and has let go of the copies: a change
                # to every route of 20 Gateways (200 proxies) left 10 MiB free in the heap.
                self._handed_bytes = 0
                memory.give_back()

    def _caught_up(self, conn: ProxyConnection) -> bool:
        snapshot = self.cache.get(conn.gateway)
        return snapshot is None or conn.caught_up(snapshot)

    async def StreamAggregatedResources(self, request_iterator: Any, context: Any) -> None:
        await self._stream(context, "sotw", discovery_pb2.DiscoveryRequest.FromString, self._handle_request,
                           self._respond)

    async def DeltaAggregatedResources(self, request_iterator: Any, context: Any) -> None:
        await self._stream(context, "delta", delta_request.DeltaRequest.FromString, self._handle_delta,
                           self._respond_delta)

    async def _stream(
        self,
        context: Any,  # grpc.aio.ServicerContext
        protocol: str,
        decode: Callable[[bytes], Any],
        handle: Callable[[ProxyConnection, Any, bytes], bool],
        respond: Callable[[ProxyConnection, str, Snapshot], Any],
    ) -> None:
        """One proxy's stream. This coroutine reads and handles each request as it comes (one at
        a time: a proxy's opening requests can be large, and when all proxies reconnect at once,
        reading them all before handling any would hold them all), and reads nothing before its
        turn to open (xds/opening.py). Answers are written by _Answering, whenever a request or a
        snapshot change may call for one.

        gRPC's reader/writer calls (context.read, context.write), not a request iterator and a
        response generator: those put two more generators between each message and the stream.
        Requests are read as bytes and decoded here: `handle` is given both (_handle_delta
        compares a stream's opening with one it already took, byte for byte)."""
        conn: ProxyConnection | None = None
        answering: _Answering | None = None
        turn = opening.NO_TURN
        try:
            turn = await self._turns.take(lambda: conn is not None and conn.answered())
            while (received := await context.read()) is not grpc.aio.EOF:
                try:
                    request = decode(received)
                except DecodeError as e:
                    log.warning("proxy %s: a %s xDS request that does not decode (%s); the stream ends",
                                conn.node_id if conn else context.peer(), protocol, e)
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the request does not decode: {e}")
                if conn is None:
                    conn = self._connect(request, context, protocol)
                    conn.wake = answering = _Answering(self._answer, conn, context, respond, turn,
                                                       asyncio.current_task())
                    self.cache.watch(conn.gateway, answering)
                turn.asked()
                try:
                    asked = handle(conn, request, received)
                except Exception:  # a bad request must not kill the stream
                    asked = True
                    log.exception("proxy %s: cannot handle request for %s", conn.node_id, request.type_url)
                del request, received  # (held until the next one otherwise)
                if turn.opening and conn.settled():
                    turn.end()  # at once: waiting for QUIET would keep the next proxy waiting
                if asked:
                    conn.asked = True
                    conn.wake.set()
        except (asyncio.CancelledError, grpc.RpcError, grpc.aio.UsageError):
            pass
        finally:
            turn.end()
            if conn is not None and answering is not None:
                self.cache.unwatch(conn.gateway, answering)
                await answering.close()
                # The writer holds the connection: unlinked, both go with the stream, not when the
                # cyclic collector next runs (the control plane's thresholds are high: a fleet
                # that left kept ~17 MiB for as long as the process stayed quiet).
                conn.wake = NOT_YET
                if conn.id in self._awaited:
                    self._progress.set()
                self.connections.pop(conn.id, None)
                same = self._by_gateway.get(conn.gateway, {})
                same.pop(conn.id, None)
                if not same:
                    self._by_gateway.pop(conn.gateway, None)
                self._replicas_changed(conn.gateway)
                metrics.CONNECTED_PROXIES.labels(conn.gateway).dec()
                log.info("proxy %s disconnected", conn.node_id)
                self._safe_feedback(conn)

    async def _answer(self, conn: ProxyConnection, context: Any, respond: Callable[[ProxyConnection, str, Snapshot], Any],
                      turn: opening.Turn) -> None:
        """Write what the proxy is to be sent of its Gateway's snapshot, type by type (in make-before-break order)."""
        snapshot = self.cache.get(conn.gateway)
        if snapshot is None or (snapshot is conn.looked_at and not conn.asked):
            return  # the snapshot unchanged, and nothing asked
        conn.looked_at, conn.asked = snapshot, False
        for type_url in types.PUSH_ORDER:
            response = respond(conn, type_url, snapshot)
            if response is not None:
                if isinstance(response, bytes):  # delta answers come encoded (xds/delta.py)
                    self._handed_bytes += len(response)
                else:
                    response = response.SerializeToString()
                await context.write(response)
            del response
        turn.passed()
        if conn.id in self._awaited:
            self._progress.set()

    def _connect(self, request: Any, context: Any, protocol: str) -> ProxyConnection:
        node = request.node
        conn = ProxyConnection(
            id=next(self._ids),
            node_id=node.id,
            gateway=gateway_of(node.id),
            peer=context.peer() if context is not None else "",
            connected_at=time.time(),
            protocol=protocol,
            node={"id": node.id, "cluster": node.cluster, "userAgent": _user_agent(node)},
            counters=self._counters.setdefault(gateway_of(node.id), {}),
        )
        self.connections[conn.id] = conn
        self._by_gateway.setdefault(conn.gateway, {})[conn.id] = conn
        self._replicas_changed(conn.gateway)
        metrics.CONNECTED_PROXIES.labels(conn.gateway).inc()
        log.info("proxy %s connected from %s (%s xDS)", conn.node_id, conn.peer, protocol)
        return conn

    def _openings_over(self) -> None:
        """No stream is opening: what the snapshots keep encoded for the proxies that open
        (every resource as a delta entry, whole first answers) waits for the next opening to be
        encoded again (once per Gateway, shared by its proxies then), and what openings held
        goes back to the system. Kept, they were a second copy of every resource sent, and
        more (2 MiB at 20 Gateways of 250 routes)."""
        self.cache.forget_encodings()
        memory.give_back()

    def _replicas_changed(self, gateway: str) -> None:
        """The Gateway's local cluster lists its proxies connected (xds/replicas.py): at once, or
        REPLICAS_EVERY after its last update. Each update goes to every proxy of the Gateway, so
        when many proxies come or go together (a rollout, a control-plane restart) they are counted
        a few times, not once per proxy to each proxy."""
        if gateway in self._replicas_due:
            return  # the update scheduled will see this change
        loop = asyncio.get_running_loop()
        wait = self._replicas_at.get(gateway, -REPLICAS_EVERY) + REPLICAS_EVERY - loop.time()
        if wait <= 0:
            self._set_replicas(gateway)
        else:
            self._replicas_due[gateway] = loop.call_later(wait, self._set_replicas, gateway)

    def _set_replicas(self, gateway: str) -> None:
        self._replicas_due.pop(gateway, None)
        peers = [c.peer for c in self._by_gateway.get(gateway, {}).values()]
        if peers:
            self._replicas_at[gateway] = asyncio.get_running_loop().time()
        else:
            self._replicas_at.pop(gateway, None)
        left = len(peers) < self._replicas_count.pop(gateway, 0)
        if peers:
            self._replicas_count[gateway] = len(peers)
        self.cache.set_replicas(gateway, peers)
        if left:
            memory.give_back()

    def _handle_request(self, conn: ProxyConnection, request: discovery_pb2.DiscoveryRequest, _raw: bytes) -> bool:
        """Take a request in; whether it may call for an answer."""
        type_url = sys.intern(request.type_url)  # (kept as a key by every stream)
        state = conn.types.setdefault(type_url, TypeState())
        if request.response_nonce and request.response_nonce != state.nonce:
            log.debug("proxy %s: stale nonce for %s", conn.node_id, types.SHORT.get(type_url, type_url))
            return False
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
        return True

    def _record_reply(self, conn: ProxyConnection, type_url: str, state: TypeState, version: str, request: Any) -> bool:
        """Record an ACK or NACK of `version`; True when status should look again."""
        if request.HasField("error_detail"):
            conn.counter(metrics.XDS_NACKS, type_url).inc()
            detail = request.error_detail.message[:MAX_ERROR_DETAIL]
            state.nack = {"version": version, "error": detail, "at": time.time()}
            self._refusing[conn.id] = conn
            log.warning("proxy %s rejected %s version %s: %s",
                        conn.node_id, types.SHORT.get(type_url, type_url), version, detail)
            return True
        conn.counter(metrics.XDS_ACKS, type_url).inc()
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
            resources = [as_any(type_url, blob) for blob in byname.values()]
        else:
            resources = [as_any(type_url, byname[n]) for n in sorted(state.names) if n in byname]
        nonce = str(next(self._nonces))
        state.pending = state.force = state.names_changed = False
        state.nonce = nonce
        state.version_sent = version
        follow = _FOLLOW.get(type_url)
        if follow is not None and follow in conn.types:
            conn.types[follow].force = True
        conn.counter(metrics.XDS_PUSHES, type_url).inc()
        log.debug("push %s %s version %s (%d resources)", conn.node_id,
                  types.SHORT.get(type_url, type_url), version, len(resources))
        return discovery_pb2.DiscoveryResponse(
            version_info=version, resources=resources, type_url=type_url, nonce=nonce
        )

    # --- delta xDS -------------------------------------------------------------

    def _handle_delta(self, conn: ProxyConnection, request: Any, raw: bytes) -> bool:
        """Take a request (delta_request.DeltaRequest, `raw` its bytes) in; whether it may call
        for an answer (anything but an ACK)."""
        type_url = sys.intern(request.type_url)  # (kept as a key by every stream)
        state = conn.types.get(type_url)
        first = state is None and not request.response_nonce  # (the stream's opening of the type)
        if first and request.initial_entries and self._opened_alike(conn, type_url, raw):
            return True
        asked = state is None or not request.response_nonce
        if state is None:
            # An empty first subscription to a wildcard type means "everything".
            wildcard = type_url not in types.NAMED and not request.resource_names_subscribe
            state = conn.types[type_url] = TypeState(names=frozenset(), delta=DeltaState(wildcard=wildcard))
        delta = state.delta
        assert delta is not None
        feedback = False
        if request.response_nonce:
            sent = delta.inflight.pop(request.response_nonce, None)
            if sent is None:
                log.debug("proxy %s: stale nonce for %s", conn.node_id, types.SHORT.get(type_url, type_url))
            else:
                version, before, after = sent
                feedback = self._record_reply(conn, type_url, state, version, request)
                if state.nack is not None:
                    delta.rollback(before, after)  # the proxy kept what it had
                    delta.rejected = version
                    asked = True
                elif delta.rejected is not None:
                    delta.rejected = None
                    asked = True
        if request.resource_names_subscribe or request.resource_names_unsubscribe:
            asked = True
            # (Frozen sets made once: a reconnecting proxy subscribes to thousands of names, and
            # the first subscription of a stream is its names as they are.)
            alike = (self._alike(conn.gateway, type_url, request.resource_names_subscribe)
                     if not delta.names and not request.resource_names_unsubscribe else None)
            subscribe = alike if alike is not None else frozenset(request.resource_names_subscribe)
            unsubscribe = frozenset(request.resource_names_unsubscribe)
            if "*" in subscribe:
                delta.wildcard = True
                subscribe -= _WILDCARD
            if "*" in unsubscribe:
                delta.wildcard = False
            if delta.basis is not EMPTY or delta.diff:  # it may hold some of them
                delta.forget_any(subscribe | unsubscribe)  # (re)subscribing asks for the resource again
            names = subscribe if not delta.names and not unsubscribe else (delta.names | subscribe) - unsubscribe
            delta.names = self._latest[(conn.gateway, type_url)] = self._intern(names)
        if request.initial_entries:
            asked = True
            snapshot = self.cache.get(conn.gateway)
            hashes = snapshot.hashes.get(type_url) if snapshot is not None else None
            delta.initial_entries(request.initial_entries, hashes,
                                  snapshot.delta_bodies if snapshot is not None else None)
            if first and snapshot is not None and hashes is not None and delta.synced_to(hashes):
                self._keep_opening(snapshot, type_url, raw, delta)
        if feedback:
            self._safe_feedback(conn)
        return asked

    def _opened_alike(self, conn: ProxyConnection, type_url: str, raw: bytes) -> bool:
        """A stream's first request of a type that is, after its node, byte for byte the one another
        stream of the Gateway opened with and was found to hold this very snapshot (_handle_delta
        keeps it in the snapshot's delta_bodies): taken as that one was, the same subscription
        and the snapshot held, without reading its thousands of names and versions again. When a
        fleet reconnects at once (a control-plane restart), its proxies mostly send the same
        opening; reading each one's took a third of the controller's CPU in a storm of 1,000.

        The bytes compared start at a field's boundary (the request's start, or the end of its node
        when that comes first), so equal bytes decode to equal fields; taking a request depends on
        nothing else but the snapshot and a stream that holds nothing yet."""
        snapshot = self.cache.get(conn.gateway)
        if snapshot is None or (known := snapshot.delta_bodies.get(("opening", type_url))) is None:
            return False
        body, names, wildcard = known
        if len(raw) - delta_request.after_node(raw) != len(body) or not raw.endswith(body):
            return False
        delta = DeltaState(wildcard=wildcard)
        delta.names = self._latest[(conn.gateway, type_url)] = names
        delta.synced(snapshot.hashes[type_url])
        conn.types[type_url] = TypeState(names=frozenset(), delta=delta)
        return True

    @staticmethod
    def _keep_opening(snapshot: Snapshot, type_url: str, raw: bytes, delta: DeltaState) -> None:
        """A stream's first request of a type (`raw`), taken as holding the snapshot: kept with
        the snapshot for _opened_alike (until the openings are over: forget_encodings)."""
        key = ("opening", type_url)
        if key not in snapshot.delta_bodies and len(snapshot.delta_bodies) < MAX_SHARED:
            snapshot.delta_bodies[key] = (raw[delta_request.after_node(raw):], delta.names, delta.wildcard)

    def _alike(self, gateway: str, type_url: str, names: Sequence[str]) -> frozenset[str] | None:
        """The subscription last interned for the Gateway's streams of this type, when a stream's
        first `names` are it: as many, each one of it (a name twice, another missing, would
        subscribe to one more name than asked). A fleet's proxies ask for the same thousands of
        endpoints, and a set made per stream only to be found equal to it is a 128 KiB table,
        mapped and unmapped (memory.py)."""
        last = self._latest.get((gateway, type_url))
        return last if last is not None and len(names) == len(last) and last.issuperset(names) else None

    def _intern(self, names: frozenset[str]) -> frozenset[str]:
        """One object for equal subscriptions (every proxy of a Gateway asks for the same endpoints),
        gone with the last stream that holds it. (Two sets of one hash: the later is not shared.)"""
        key = hash(names)
        held = self._names.get(key)
        if held is None:
            self._names[key] = names
        elif held == names:
            return held
        return names

    def _respond_delta(self, conn: ProxyConnection, type_url: str, snapshot: Snapshot) -> bytes | None:
        state = conn.types.get(type_url)
        if state is None or state.delta is None:
            return None
        delta = state.delta
        version = snapshot.version(type_url)
        if delta.rejected == version:
            return None  # the same content was rejected; wait for a new version
        hashes = snapshot.hashes.get(type_url, EMPTY)
        if delta.answered and state.nack is None and delta.synced_to(hashes):
            return None  # (the common case, made quick: every stream of the Gateway asks, each change)
        changed, removed, nonce, message = delta.respond(snapshot, type_url, self._nonces)
        if not changed and not removed and delta.answered:
            delta.synced(hashes)
            if state.nack is not None:
                # The input went back to what the proxy kept when it refused the last
                # update: nothing to send, and nothing refused any more.
                state.nack = delta.rejected = None
                self._safe_feedback(conn)
            return None
        delta.sent(nonce, version, hashes)
        state.version_sent = version
        delta.answered = True
        follow = conn.types.get(_FOLLOW.get(type_url, ""))
        if follow is not None and follow.delta is not None:
            for name in changed:
                follow.delta.forget(name)
        conn.counter(metrics.XDS_PUSHES, type_url).inc()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("push %s %s version %s (delta: %d changed, %d removed)", conn.node_id,
                      types.SHORT.get(type_url, type_url), version, len(changed), len(removed))
        return message

    def retry(self, conn: ProxyConnection, type_url: str) -> None:
        """Offer a rejected type again (e.g. a listener whose port was busy)."""
        state = conn.types.get(type_url)
        if state is not None and state.nack is not None:
            state.nack = None
            state.force = True
            if state.delta is not None and state.delta.rejected is not None:
                state.delta.forget_all()  # and what it kept is sent again
            conn.asked = True
            conn.wake.set()

    def _safe_feedback(self, conn: ProxyConnection) -> None:
        try:
            self.on_feedback(conn)
        except Exception:
            log.exception("feedback hook failed")


class _Answering:
    """Writes a stream's answers (AdsServer._answer), a round at a time. `set` is what the
    snapshot cache and the stream's reader call when something may call for an answer: it starts
    a round when none is running, else the running one goes round once more. A task per round,
    not a task per stream waiting on an Event: at 1,000 proxies a change is 1,000 rounds, and a
    waiting task costs a future and a step more in each (~4 µs a stream on the event loop's
    thread, measured on a bare grpc.aio server), and holds its frame between changes."""

    __slots__ = ("_again", "_answer", "_args", "_closed", "_reader", "_task")

    def __init__(self, answer: Callable[..., Awaitable[None]], conn: ProxyConnection, context: Any,
                 respond: Callable[[ProxyConnection, str, Snapshot], Any], turn: opening.Turn,
                 reader: asyncio.Task[Any] | None) -> None:
        self._answer, self._args, self._reader = answer, (conn, context, respond, turn), reader
        self._task: asyncio.Task[None] | None = None
        self._again = self._closed = False

    def set(self) -> None:
        if self._task is not None:
            self._again = True
        elif not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._rounds())

    async def _rounds(self) -> None:
        try:
            while True:
                self._again = False
                await self._answer(*self._args)
                if not self._again:
                    return
        except Exception:
            if not self._closed:  # (a write to a stream that is ending fails: nothing to say)
                log.exception("proxy %s: cannot answer; its stream ends", self._args[0].node_id)
                if self._reader is not None:
                    self._reader.cancel()
        finally:
            self._task = None

    async def close(self) -> None:
        """The stream ends: no round starts, and the one running stops."""
        self._closed = True
        if (task := self._task) is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _add_servicer(servicer: AdsServer, server: grpc.aio.Server) -> None:
    """ads_pb2_grpc's registration, with requests read and responses written as bytes (AdsServer._stream
    decodes and encodes them)."""
    handlers = {
        "StreamAggregatedResources": grpc.stream_stream_rpc_method_handler(
            servicer.StreamAggregatedResources, request_deserializer=None, response_serializer=None),
        "DeltaAggregatedResources": grpc.stream_stream_rpc_method_handler(
            servicer.DeltaAggregatedResources, request_deserializer=None, response_serializer=None),
    }
    service = "envoy.service.discovery.v3.AggregatedDiscoveryService"
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
    server.add_registered_method_handlers(service, handlers)


# The ADS server's gRPC options.
SERVER_OPTIONS = (
    ("grpc.max_send_message_length", 256 * 1024 * 1024),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.http2.max_pings_without_data", 0),
    # What a proxy sends waits in gRPC under the default window (64 KiB a stream) until the
    # stream reads it: probing would grow the window, and with a fleet reconnecting at
    # once gRPC would hold every proxy's opening requests (hundreds of KiB each) at once.
    ("grpc.http2.bdp_probe", 0),
)


async def start_server(
    servicer: AdsServer, address: str, credentials: grpc.ServerCredentials | None = None,
    extra_addresses: tuple[str, ...] = (),
) -> tuple[grpc.aio.Server, int]:
    """Serve ADS on address ("HOST:PORT"; port 0 picks one) and any extra
    addresses (the agent-gateway port). Returns the port bound for `address`."""
    server = grpc.aio.server(options=SERVER_OPTIONS)
    _add_servicer(servicer, server)
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
