"""The process wiring: sources → store → translate → xDS + deploy + status.

This is the one place that holds the pipeline's state objects and runs the
control loop. The loop waits for a change (objects or proxy feedback),
translates, pushes snapshots, reconciles proxies and records status. A failure
in one pass is logged and the next change gets a fresh pass: input can never
stop the control plane.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from lychgate.api.base import ObjectMeta, now
from lychgate.api.gateway import Gateway, GatewayClass, GatewayClassSpec
from lychgate.log import component_logger
from lychgate.settings import Settings
from lychgate.status.store import StatusStore
from lychgate.store import Store
from lychgate.translate.gateway import (
    CONTROLLER_NAME,
    Feedback,
    ProxyIntent,
    Translation,
    translate,
)
from lychgate.xds import types
from lychgate.xds.cache import SnapshotCache
from lychgate.xds.server import AdsServer, ProxyConnection
from lychgate.xds.translator import build

log = component_logger("controlplane")

DEBOUNCE_SECONDS = 0.005
RETRY_NACKED_SECONDS = 5.0

_LISTENER_ERROR = re.compile(r"listener\(s\) ([^:]+): (.*)", re.S)


class Deployer(Protocol):
    """Runs the proxies: Envoy processes locally, Deployments in Kubernetes."""

    def address_for(self, gateway: Gateway) -> str | None: ...

    async def sync(self, intents: dict[str, ProxyIntent]) -> None: ...

    async def close(self) -> None: ...

    def proxy_state(self, ref: str) -> str | None: ...


def builtin_class() -> GatewayClass:
    """The GatewayClass `lychgate` exists without being written, as a Helm install creates it."""
    return GatewayClass(
        api_version="gateway.networking.k8s.io/v1",
        kind="GatewayClass",
        metadata=ObjectMeta(name="lychgate", generation=1, creation_timestamp=now()),
        spec=GatewayClassSpec(
            controller_name=CONTROLLER_NAME, description="Envoy proxies configured by lychgate"
        ),
    )


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
            port = name.strip().removeprefix("http-")
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


class ControlPlane:
    def __init__(
        self,
        settings: Settings,
        deployer: Deployer,
        cache: SnapshotCache | None = None,
        ads: AdsServer | None = None,
        on_status: Callable[[set[Any]], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self.deployer = deployer
        self.store = Store()
        self.cache = cache or SnapshotCache()
        self.ads = ads or AdsServer(self.cache)
        self.ads.on_feedback = self._on_feedback
        self.status = StatusStore()
        self.translation = Translation()
        self.on_status = on_status
        self.passes = 0
        self.last_pass: PassReport | None = None
        self._feedback_changed = asyncio.Event()

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
        try:
            self.translation = translate(self.store, self.deployer.address_for, self._feedback())
            for ref, gw in self.translation.gateways.items():
                self.cache.set(ref, build(gw))
            self.cache.retain(self.translation.gateways)
            await self.deployer.sync(self.translation.proxies)
            changed = self.status.update(self.translation.status)
            if changed and self.on_status is not None:
                await self.on_status(changed)
        except Exception:
            log.exception("sync pass failed at store revision %d; the next change retries", change.revision)
            changed = set()
        self.passes += 1
        report = PassReport(change.revision, time.perf_counter() - started,
                            len(self.translation.gateways), len(changed))
        self.last_pass = report
        log.debug("sync pass %d: revision %d, %d gateways, %d status changes in %.1f ms",
                  self.passes, report.revision, report.gateways, report.status_changed, report.seconds * 1000)
        return report

    # --- proxy feedback ---------------------------------------------------------

    def _on_feedback(self, _conn: ProxyConnection) -> None:
        self._feedback_changed.set()

    def notify(self) -> None:
        """Ask for a pass because something outside the store changed."""
        self._feedback_changed.set()

    def _feedback(self) -> Feedback:
        fb = Feedback()
        for ref in self.translation.proxies.keys() | {c.gateway for c in self.ads.connections.values()}:
            conns = self.ads.for_gateway(ref)
            snapshot = self.cache.get(ref)
            if any(c.programmed(snapshot) for c in conns):
                fb.proxy_state[ref] = ""
            else:
                fb.proxy_state[ref] = self.deployer.proxy_state(ref)
            for conn in conns:
                for port, message in listener_errors(conn).items():
                    fb.listener_errors[(ref, port)] = message
        return fb

    async def _retry_nacked(self, stop: asyncio.Event) -> None:
        """A port that was busy may be free now: offer NACKed listeners again."""
        while not stop.is_set():
            await asyncio.sleep(RETRY_NACKED_SECONDS)
            for conn in list(self.ads.connections.values()):
                if listener_errors(conn):
                    self.ads.retry(conn, types.LISTENER)
