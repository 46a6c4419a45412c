"""`lychgate controller`: the control plane in Kubernetes mode, end to end.

The same pipeline as `lychgate run` (local.py): store, control loop, xDS
server and admin servers are the same objects; only the edges differ. Objects
come from the API server (sources/kube.py), proxies are Deployments
(deploy/kube.py), and status goes back to the API server (status/writer.py).
Every replica watches, translates and serves xDS; the replica holding the
Lease (leader.py) is the only one that writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from lightkube import KubeConfig

from lychgate.admin.server import (
    AdminProviders,
    build_admin_app,
    build_health_app,
    build_metrics_app,
    serve,
)
from lychgate.api.base import ObjectKey, Resource
from lychgate.api.core import Pod
from lychgate.api.gateway import GatewayClass
from lychgate.api.inference import InferencePool
from lychgate.api.registry import KINDS
from lychgate.controlplane import ControlPlane
from lychgate.deploy.kube import KubeDeployer
from lychgate.deploy.manifests import ProxyContext
from lychgate.kubeapi import make_client
from lychgate.leader import AlwaysLeader, LeaderElector
from lychgate.log import component_logger
from lychgate.objects_api import krt_snapshot, routes, xds_snapshot
from lychgate.settings import Settings, ValidationLevel
from lychgate.sources.kube import KubeSource, check_selectors
from lychgate.status.writer import StatusWriter
from lychgate.translate.gateway import CONTROLLER_NAME
from lychgate.xds import tls
from lychgate.xds.cache import SnapshotCache
from lychgate.xds.server import AdsServer, start_server

log = component_logger("controlplane")


class ConfigurationError(ValueError):
    """Settings the controller cannot start with; the message says which and why."""


def check_settings(settings: Settings) -> None:
    check_selectors(settings.discovery_namespace_selectors)
    if settings.inference_extension_enabled and not settings.agentgateway_enabled:
        log.warning("inferenceExtension.enabled without agentgateway.enabled is deprecated since v2.1 "
                    "and unsupported from v2.2; set agentgateway.enabled: true")
    if settings.leader_election and not (
        0 < settings.leader_election_retry_period < settings.leader_election_renew_deadline
        < settings.leader_election_lease_duration
    ):
        raise ConfigurationError(
            "leader election needs retry period < renew deadline < lease duration; got "
            f"{settings.leader_election_retry_period:g}s, {settings.leader_election_renew_deadline:g}s "
            f"and {settings.leader_election_lease_duration:g}s")
    if settings.xds_tls_enabled and settings.xds_tls_require_client_cert:
        raise ConfigurationError(
            "xds_tls_require_client_cert is not supported in Kubernetes mode: proxies in other "
            "namespaces cannot be given the client key without copying it; use server TLS only")


def watched_kinds(settings: Settings) -> tuple[type[Resource], ...]:
    """Pods and InferencePools are read only for the inference extension (the chart
    grants access to them only then): watching every Pod is not free."""
    if settings.inference_extension_enabled:
        return KINDS
    return tuple(k for k in KINDS if k not in (Pod, InferencePool))


def proxy_context(settings: Settings, ca_pem: str | None) -> ProxyContext:
    return ProxyContext(
        xds_host=f"{settings.xds_service_name}.{settings.namespace}.svc",
        xds_port=settings.xds_service_port,
        default_image=settings.proxy_image,
        ai_extension_image=settings.ai_extension_image,
        xds_ca_pem=ca_pem,
    )


async def run_controller(
    settings: Settings,
    stop: asyncio.Event | None = None,
    *,
    kube_config: KubeConfig | None = None,
    started: asyncio.Future[Any] | None = None,
) -> None:
    """Run until stop is set (or SIGINT/SIGTERM). `started` gets the wiring once serving."""
    check_settings(settings)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)

    cleanups: list[Any] = []
    tasks: list[asyncio.Task[Any]] = []
    client = await make_client(settings.kubeconfig, config=kube_config)
    cleanups.append(client.close)
    try:
        cache = SnapshotCache()
        ads = AdsServer(cache)
        credentials, ca_pem = None, None
        if settings.xds_tls_enabled:
            credentials = await asyncio.to_thread(
                tls.server_credentials, settings.xds_tls_dir, settings.xds_tls_require_client_cert)
            ca_pem = await asyncio.to_thread((settings.xds_tls_dir / "ca.crt").read_text)
        # The agent-gateway xDS port serves the same ADS, with the same TLS (spec §5.1).
        grpc_server, xds_port = await start_server(
            ads, settings.xds_address, credentials, extra_addresses=(settings.agentgateway_xds_address,))
        cleanups.append(lambda: grpc_server.stop(grace=1))

        elector: LeaderElector | AlwaysLeader
        if settings.leader_election:
            elector = LeaderElector(
                client, settings.namespace, settings.leader_election_lease_name,
                settings.leader_election_identity or None,
                lease_duration=settings.leader_election_lease_duration,
                renew_deadline=settings.leader_election_renew_deadline,
                retry_period=settings.leader_election_retry_period,
            )
        else:
            elector = AlwaysLeader()

        deployer = KubeDeployer(client, proxy_context(settings, ca_pem), elector.is_leader)
        preflight = None
        if settings.validation_level is ValidationLevel.STRICT:
            from lychgate.deploy.local import envoy_binary
            from lychgate.xds.validate import Preflight

            preflight = Preflight(envoy_binary(), settings.state_dir / "validate")
        cp = ControlPlane(settings=settings, deployer=deployer, cache=cache, ads=ads, preflight=preflight)
        source = KubeSource(client, cp.store, settings.discovery_namespace_selectors, watched_kinds(settings))
        writer = StatusWriter(client, cp.status, source.raw, elector.is_leader)
        cp.on_status = writer.on_status
        deployer.attach(cp.store, cp.notify)
        deployer.keep = _keep(source, cp)

        elector.on_started += [writer.resync, deployer.resync, cp.notify]
        elector.on_stopped += [writer.stop_writing, deployer.stop_writing]

        providers = AdminProviders(
            krt=lambda: krt_snapshot(cp),
            xds=lambda: xds_snapshot(cp),
            ready=lambda: source.synced.is_set() and cp.passes > 0,
        )
        extra = routes(cp, problems=source.all_problems, proxies=deployer.describe)
        bound: list[str] = []
        for app, address in (
            (build_admin_app(providers, extra), settings.admin_address),
            (build_metrics_app(), settings.metrics_address),
            (build_health_app(providers), settings.health_address),
        ):
            runner = await serve(app, address)
            cleanups.append(runner.cleanup)
            host, port = runner.addresses[0][:2]
            bound.append(f"{host}:{port}")

        tasks += [
            asyncio.create_task(source.run(stop), name="kube-source"),
            asyncio.create_task(deployer.run(stop), name="kube-deployer"),
            asyncio.create_task(writer.run(stop), name="status-writer"),
        ]
        # Translate only a complete picture: a half-listed cluster would look like
        # deleted Gateways (and their proxies would go), and unknown proxy readiness
        # would be written into status only to be corrected a moment later.
        await _first(_all(source.synced, deployer.informer.synced), stop)
        if not stop.is_set():
            # Twice: proxy feedback is gathered for the Gateways of the previous pass,
            # so only the second pass of a fresh process sees the proxies' state (and a
            # restarted controller then computes exactly the status already written).
            await cp.sync_once()
            await cp.sync_once()
            tasks += [
                asyncio.create_task(cp.run(stop), name="control-loop"),
                asyncio.create_task(elector.run(stop), name="leader-election"),
            ]
            log.info("lychgate controller is running (xDS on port %d, %d Gateway(s), identity %s)",
                     xds_port, len(cp.translation.gateways), elector.identity)
            if started is not None and not started.done():
                started.set_result(Wiring(cp, source, deployer, writer, elector, xds_port, *bound))
        await stop.wait()
    finally:
        log.info("shutting down")
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for cleanup in reversed(cleanups):
            with contextlib.suppress(Exception):
                await cleanup()


@dataclass
class Wiring:
    """The running pieces, for tests that drive the controller in-process."""

    cp: ControlPlane
    source: KubeSource
    deployer: KubeDeployer
    writer: StatusWriter
    elector: LeaderElector | AlwaysLeader
    xds_port: int
    admin: str
    metrics: str
    health: str


def _keep(source: KubeSource, cp: ControlPlane) -> Any:
    """Does a Gateway still exist in the API and belong to a lychgate class? Then its proxy stays.

    Asks the source's raw objects, not the store, so a Gateway this version of
    lychgate cannot parse still keeps its running proxy."""

    def keep(ref: str) -> bool:
        ns, _, name = ref.partition("/")
        raw = source.raw(ObjectKey("Gateway", ns, name))
        if raw is None or not source.selected(ns):
            return False
        class_name = (raw.get("spec") or {}).get("gatewayClassName", "")
        gc = cp.store.get(GatewayClass, "", class_name)
        return gc is not None and gc.spec.controller_name == CONTROLLER_NAME

    return keep


async def _all(*events: asyncio.Event) -> None:
    await asyncio.gather(*(e.wait() for e in events))


async def _first(ready: Awaitable[None], stop: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(ready), asyncio.create_task(stop.wait())]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
