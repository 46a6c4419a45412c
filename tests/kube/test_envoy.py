"""End to end: objects in the API server → the controller → a real Envoy started the way
the proxy Deployment starts it (its args, its ConfigMap's bootstrap) → traffic to a backend.

Only what a cluster network would do is bent: the bootstrap's xDS address
(`lychgate.lychgate-system.svc:9977`) becomes the in-process controller's
loopback port, and the admin and readiness ports become free ones.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from lychgate.deploy.local import envoy_binary
from lychgate.deploy.manifests import ADMIN_PORT, READY_PORT
from lychgate.echo import echo_app
from tests.harness import free_port
from tests.kube.helpers import (
    Controller,
    endpoint_slice,
    eventually,
    gateway,
    gateway_class,
    gateway_condition,
    route,
    service,
)
from tests.kubefake import KubeFake

pytestmark = pytest.mark.e2e


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    runner = web.AppRunner(echo_app(pod="echo-pod"), access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield port
    await runner.cleanup()


def localize(bootstrap: dict[str, Any], xds_port: int, admin_port: int, ready_port: int) -> dict[str, Any]:
    """What cluster DNS and a pod's own network namespace would provide."""
    for cluster in bootstrap["static_resources"]["clusters"]:
        # The local cluster (the Gateway's proxies) has its endpoints over EDS: nothing to move.
        for group in cluster.get("load_assignment", {}).get("endpoints", []):
            for ep in group["lb_endpoints"]:
                addr = ep["endpoint"]["address"]["socket_address"]
                if cluster["name"] == "lychgate_xds":
                    addr.update(address="127.0.0.1", port_value=xds_port)
                    cluster["type"] = "STATIC"
                elif addr["port_value"] == ADMIN_PORT:
                    addr["port_value"] = admin_port
    bootstrap["admin"]["address"]["socket_address"]["port_value"] = admin_port
    for listener in bootstrap["static_resources"]["listeners"]:
        sock = listener["address"]["socket_address"]
        if sock["port_value"] == READY_PORT:
            sock.update(address="127.0.0.1", port_value=ready_port)
    return bootstrap


async def test_a_real_envoy_serves_traffic_configured_through_the_api_server(
    kube: KubeFake, controller: Controller, echo: int, tmp_path: Path
) -> None:
    port = free_port()
    kube.create(gateway_class())
    kube.create(gateway(port=port))
    kube.create(route(host="www.example.com"))
    kube.create(service(target=echo))
    kube.create(endpoint_slice(port=echo))
    async with controller() as wiring:
        cm = await eventually(lambda: kube.get("configmaps", "gw"), what="the bootstrap ConfigMap")
        dep = await eventually(lambda: kube.get("deployments", "gw"), what="the proxy Deployment")
        admin_port, ready_port = free_port(), free_port()
        config = tmp_path / "envoy.json"
        config.write_text(json.dumps(localize(json.loads(cm["data"]["envoy.json"]), wiring.xds_port,
                                              admin_port, ready_port)))
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        args = list(container["args"])
        args[args.index("-c") + 1] = str(config)
        with (tmp_path / "envoy.log").open("wb") as envoy_log:  # the child keeps its own copy
            proc = await asyncio.create_subprocess_exec(
                envoy_binary(), *args, "--base-id", str(admin_port),
                stdout=asyncio.subprocess.DEVNULL, stderr=envoy_log)
        try:
            async with httpx.AsyncClient(trust_env=False, timeout=2) as http:
                # The readiness probe of the Deployment answers 200 once xDS configured Envoy.
                async def ready() -> bool:
                    try:
                        return (await http.get(f"http://127.0.0.1:{ready_port}/ready")).status_code == 200
                    except httpx.HTTPError:
                        return False

                await eventually(ready, timeout=15, what="Envoy ready")

                async def routed() -> dict[str, Any] | None:
                    try:
                        r = await http.get(f"http://127.0.0.1:{port}/hello", headers={"host": "www.example.com"})
                    except httpx.HTTPError:
                        return None
                    return r.json() if r.status_code == 200 else None

                body = await eventually(routed, timeout=10, what="a routed request")
                assert body["pod"] == "echo-pod" and body["path"] == "/hello"

                # The proxy connected to this replica and ACKed: the Gateway is Programmed.
                await eventually(lambda: (c := gateway_condition(kube, "Programmed")) and c["status"] == "True",
                                 what="Programmed")
                snap = (await http.get(f"http://{wiring.admin}/snapshots/xds")).json()
                assert "default/gw" in json.dumps(snap)

                # A change in the API server reaches Envoy: the route goes, the host 404s.
                kube.delete("httproutes", "route")

                async def gone() -> bool:
                    r = await http.get(f"http://127.0.0.1:{port}/hello", headers={"host": "www.example.com"})
                    return r.status_code == 404

                await eventually(gone, timeout=10, what="the route removed from Envoy")
        finally:
            proc.terminate()
            await proc.wait()
