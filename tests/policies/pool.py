"""Pools of backend Pods for one Service: the same port on several loopback
addresses. HTTP Pods can fail their requests, fail their health check or answer
slowly, and count what they served; gRPC Pods serve the standard health service
and say their name."""

from __future__ import annotations

import asyncio
import textwrap
from dataclasses import dataclass, field
from typing import Any

import grpc
from aiohttp import web
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tests.harness import free_port
from tests.policies.servers import Servers


def manifest(service: str, port: int, addresses: list[str], app_protocol: str | None = None) -> str:
    """The Service (port 80) and the EndpointSlice that put `addresses` behind it."""
    proto = f", appProtocol: {app_protocol}" if app_protocol else ""
    endpoints = ", ".join(f"{{addresses: [{a}]}}" for a in addresses)
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Service
        metadata: {{name: {service}}}
        spec:
          ports: [{{name: main, port: 80, targetPort: {port}{proto}}}]
        ---
        apiVersion: discovery.k8s.io/v1
        kind: EndpointSlice
        metadata: {{name: {service}-1, labels: {{kubernetes.io/service-name: {service}}}}}
        addressType: IPv4
        ports: [{{name: main, port: {port}}}]
        endpoints: [{endpoints}]
        """)


@dataclass
class Pod:
    name: str
    address: str
    failing: bool = False  # requests answer 500
    healthy: bool = True  # /healthz answers 200 (else 503)
    delay: float = 0.0  # seconds before each answer
    served: int = 0
    health_checks: int = 0
    in_flight: int = 0
    peak: int = 0  # most requests in flight at once
    runner: Any = field(default=None, repr=False)

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.Response:
            if request.path == "/healthz":
                self.health_checks += 1
                return web.Response(status=200 if self.healthy else 503, text=self.name)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                if self.delay:
                    await asyncio.sleep(self.delay)
                self.served += 1
                if self.failing:
                    return web.Response(status=500, text=f"{self.name} is failing\n", headers={"x-backend": self.name})
                return web.json_response({"pod": self.name}, headers={"x-backend": self.name})
            finally:
                self.in_flight -= 1

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        return app


class Pool:
    def __init__(self, servers: Servers, service: str, size: int, base: int) -> None:
        """`size` Pods on 127.0.<base>.1..size, one port."""
        self.service = service
        self.port = free_port()
        self.pods = [Pod(f"{service}-{i}", f"127.0.{base}.{i + 1}") for i in range(size)]
        for pod in self.pods:
            async def go(pod: Pod = pod) -> web.AppRunner:
                runner = web.AppRunner(pod.app(), access_log=None)
                await runner.setup()
                await web.TCPSite(runner, pod.address, self.port).start()
                return runner

            pod.runner = servers.loop.run(go())
            servers._stops.append(pod.runner.cleanup)

    def manifest(self) -> str:
        return manifest(self.service, self.port, [p.address for p in self.pods])

    def reset(self) -> None:
        for pod in self.pods:
            pod.served = pod.peak = 0


@dataclass
class GrpcPod:
    """A gRPC server (h2c) with the standard health service and /test.Who/Name,
    which answers with the Pod's name."""

    name: str
    address: str
    servers: Servers = field(repr=False)
    health: Any = field(default=None, repr=False)  # grpc_health's aio HealthServicer

    def serving(self, ok: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if ok else health_pb2.HealthCheckResponse.NOT_SERVING
        self.servers.loop.run(self.health.set("", status))


class GrpcPool:
    def __init__(self, servers: Servers, service: str, size: int, base: int) -> None:
        self.service = service
        self.port = free_port()
        self.pods = [GrpcPod(f"{service}-{i}", f"127.0.{base}.{i + 1}", servers) for i in range(size)]
        for pod in self.pods:
            async def go(pod: GrpcPod = pod) -> Any:
                server = grpc.aio.server()
                pod.health = health.aio.HealthServicer()
                health_pb2_grpc.add_HealthServicer_to_server(pod.health, server)

                async def who(request: bytes, context: Any, name: str = pod.name) -> bytes:
                    return name.encode()

                server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
                    "test.Who", {"Name": grpc.unary_unary_rpc_method_handler(who)})])
                server.add_insecure_port(f"{pod.address}:{self.port}")
                await server.start()
                return server

            server = servers.loop.run(go())
            servers._stops.append(lambda s=server: s.stop(0))
            pod.serving(True)

    def manifest(self) -> str:
        return manifest(self.service, self.port, [p.address for p in self.pods], app_protocol="kubernetes.io/h2c")
