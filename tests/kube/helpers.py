"""Objects, polling and an in-process controller for the Kubernetes-mode tests."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from lychgate.kube_main import Wiring, run_controller
from lychgate.settings import Settings
from tests.kubefake import KubeFake

GW = "gateway.networking.k8s.io/v1"
LG = "gateway.lychgate.dev/v1alpha1"
CONTROLLER = "gateway.lychgate.dev/lychgate"

# Leader election fast enough for tests, in the order the controller requires, with
# enough slack that a busy test machine does not make a leader miss its renewals.
FAST_LEASE = {
    "leader_election_lease_duration": 2.0,
    "leader_election_renew_deadline": 1.5,
    "leader_election_retry_period": 0.1,
}


async def eventually(check: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
    """Poll check() until it returns something truthy (assertions inside count as 'not yet')."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            result = check()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return result
            last = None
        except AssertionError as err:
            last = err
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}: {last or 'still false'}")
        await asyncio.sleep(0.02)


async def settle(seconds: float = 0.3) -> None:
    """Let watches deliver and the loop run a few passes."""
    await asyncio.sleep(seconds)


# --- objects ----------------------------------------------------------------------------


def gateway_class(name: str = "lychgate", controller: str = CONTROLLER, params: tuple[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"controllerName": controller}
    if params:
        spec["parametersRef"] = {"group": "gateway.lychgate.dev", "kind": "GatewayParameters",
                                 "name": params[1], "namespace": params[0]}
    return {"apiVersion": GW, "kind": "GatewayClass", "metadata": {"name": name}, "spec": spec}


def gateway(name: str = "gw", ns: str = "default", port: int = 8080, cls: str = "lychgate",
            params: str | None = None, infra: dict[str, Any] | None = None,
            listeners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "gatewayClassName": cls,
        "listeners": listeners or [{"name": "http", "port": port, "protocol": "HTTP",
                                    "allowedRoutes": {"namespaces": {"from": "All"}}}],
    }
    infrastructure = dict(infra or {})
    if params:
        infrastructure["parametersRef"] = {"group": "gateway.lychgate.dev", "kind": "GatewayParameters", "name": params}
    if infrastructure:
        spec["infrastructure"] = infrastructure
    return {"apiVersion": GW, "kind": "Gateway", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def route(name: str = "route", ns: str = "default", gw: str = "gw", gw_ns: str | None = None,
          host: str = "www.example.com", backend: str = "echo", port: int = 80) -> dict[str, Any]:
    parent: dict[str, Any] = {"name": gw}
    if gw_ns:
        parent["namespace"] = gw_ns
    return {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": name, "namespace": ns},
            "spec": {"parentRefs": [parent], "hostnames": [host],
                     "rules": [{"backendRefs": [{"name": backend, "port": port}]}]}}


def service(name: str = "echo", ns: str = "default", port: int = 80, target: int = 3000) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": port, "targetPort": target}]}}


def endpoint_slice(service_name: str = "echo", ns: str = "default", address: str = "127.0.0.1",
                   port: int = 3000) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{service_name}-1", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": service_name}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}]}


def gateway_parameters(name: str = "params", ns: str = "default", **kube: Any) -> dict[str, Any]:
    return {"apiVersion": LG, "kind": "GatewayParameters", "metadata": {"name": name, "namespace": ns},
            "spec": {"kube": kube}}


def condition(status: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for c in (status or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c
    return None


def gateway_condition(kube: KubeFake, type_: str, name: str = "gw", ns: str = "default") -> dict[str, Any] | None:
    obj = kube.get("gateways", name, namespace=ns)
    return condition((obj or {}).get("status"), type_)


# --- the controller ---------------------------------------------------------------------


class Controller:
    """Runs `run_controller` (the code `lychgate controller` runs) against a KubeFake."""

    def __init__(self, kube: KubeFake) -> None:
        self.kube = kube

    @contextlib.asynccontextmanager
    async def __call__(self, **overrides: Any) -> AsyncIterator[Wiring]:
        values: dict[str, Any] = {
            "xds_address": "127.0.0.1:0", "agentgateway_xds_address": "127.0.0.1:0", "admin_address": "127.0.0.1:0",
            "metrics_address": "127.0.0.1:0", "health_address": "127.0.0.1:0",
            **FAST_LEASE, **overrides,
        }
        settings = Settings(**values)
        stop = asyncio.Event()
        started: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(run_controller(settings, stop, kube_config=self.kube.kubeconfig(),
                                                  started=started))
        done, _ = await asyncio.wait({task, started}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        if started not in done:
            stop.set()
            if task in done:
                task.result()  # raises the controller's error
            await task
            raise AssertionError("the controller did not start within 10s")
        try:
            yield started.result()
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
