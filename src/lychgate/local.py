"""`lychgate run DIR`: the control plane in local mode, end to end.

Files feed the store, real Envoy processes are the proxies, and the same
xDS server, admin server and control loop run as in Kubernetes.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any

from lychgate.admin.server import (
    AdminProviders,
    build_admin_app,
    build_health_app,
    build_metrics_app,
    serve,
)
from lychgate.controlplane import ControlPlane, add_builtin_classes
from lychgate.deploy.bootstrap import XdsTarget
from lychgate.deploy.local import LocalDeployer, envoy_binary
from lychgate.log import component_logger
from lychgate.objects_api import krt_snapshot, routes, xds_snapshot
from lychgate.settings import Settings, ValidationLevel, split_host_port
from lychgate.sources.files import FileSource
from lychgate.xds import tls
from lychgate.xds.cache import SnapshotCache
from lychgate.xds.server import AdsServer, start_server
from lychgate.xds.validate import Preflight

log = component_logger("controlplane")


async def run_local(directory: Path, settings: Settings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)

    xds_host, _ = split_host_port(settings.xds_address)
    deployer: LocalDeployer | None = None
    cleanups: list[Any] = []
    try:
        # Proxies need the xDS port in their bootstrap, and it may be 0 (pick one).
        cache = SnapshotCache()
        ads = AdsServer(cache)
        credentials = None
        if settings.xds_tls_enabled:
            credentials = tls.server_credentials(settings.xds_tls_dir, settings.xds_tls_require_client_cert)
        grpc_server, xds_port = await start_server(ads, settings.xds_address, credentials)
        cleanups.append(lambda: grpc_server.stop(grace=1))
        target = (
            tls.proxy_target(xds_host, xds_port, settings.xds_tls_dir, settings.xds_tls_require_client_cert)
            if settings.xds_tls_enabled else XdsTarget(xds_host, xds_port)
        )
        deployer = LocalDeployer(settings.state_dir, target, settings.local_address_base)
        preflight = None
        if settings.validation_level is ValidationLevel.STRICT:
            preflight = Preflight(envoy_binary(), settings.state_dir / "validate")
        cp = ControlPlane(settings=settings, deployer=deployer, cache=cache, ads=ads, preflight=preflight)

        source = FileSource(directory, cp.store)
        add_builtin_classes(cp.store, settings)
        source.load_all()

        providers = AdminProviders(
            krt=lambda: krt_snapshot(cp),
            xds=lambda: xds_snapshot(cp),
            ready=lambda: cp.passes > 0,
        )
        extra = routes(
            cp,
            problems=lambda: [p.__dict__ for p in source.all_problems()],
            proxies=lambda: [p.describe() for p in deployer.proxies.values()] if deployer else [],
        )
        for app, address in (
            (build_admin_app(providers, extra), settings.admin_address),
            (build_metrics_app(), settings.metrics_address),
            (build_health_app(providers), settings.health_address),
        ):
            runner = await serve(app, address)
            cleanups.append(runner.cleanup)

        await cp.sync_once()
        log.info("lychgate is running: %d Gateway(s); `lychgate get gateways` shows their addresses",
                 len(cp.translation.gateways))
        tasks = [
            asyncio.create_task(cp.run(stop), name="control-loop"),
            asyncio.create_task(source.watch(stop), name="file-watch"),
        ]
        await stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        log.info("shutting down")
        if deployer is not None:
            await deployer.close()
        for cleanup in reversed(cleanups):
            with contextlib.suppress(Exception):
                await cleanup()
