"""Real services the policy tests put behind Envoy, on loopback ports.

- AuthServer: Envoy's `envoy.service.auth.v3.Authorization` over gRPC (grpc.aio,
  generated stubs from xds-protos). Allows `authorization: Bearer <token>` for
  its tokens, denies everything else with 403.
- HttpAuthServer: an HTTP authorization service (ext_authz http_service).
- ProcServer: Envoy's `envoy.service.ext_proc.v3.ExternalProcessor`: adds headers
  to requests and responses, can rewrite a buffered request body and can stop a
  request outright.
- JwksServer: a JSON Web Key Set over HTTP, as an identity provider serves it.
- BodyEcho: a backend that echoes method, path, headers and the request body,
  and can fail or delay on request.

Every server records what it saw, so tests can assert which one was called and
with what context, not only what the client got back.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from aiohttp import web
from envoy.config.core.v3 import base_pb2
from envoy.service.auth.v3 import external_auth_pb2 as auth_pb
from envoy.service.auth.v3 import external_auth_pb2_grpc as auth_grpc
from envoy.service.ext_proc.v3 import external_processor_pb2 as proc_pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as proc_grpc
from envoy.type.v3 import http_status_pb2
from google.rpc import code_pb2, status_pb2

from tests.harness import free_port

T = TypeVar("T")


class Loop:
    """One background asyncio loop that all test servers share."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 10) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def _header(key: str, value: str) -> base_pb2.HeaderValueOption:
    return base_pb2.HeaderValueOption(header=base_pb2.HeaderValue(key=key, value=value))


@dataclass
class Check:
    """One authorization request as the server saw it."""

    path: str
    headers: dict[str, str]
    context: dict[str, str]
    body: str


@dataclass
class AuthServer(auth_grpc.AuthorizationServicer):  # type: ignore[misc]
    name: str
    tokens: set[str] = field(default_factory=lambda: {"good"})
    checks: list[Check] = field(default_factory=list)
    port: int = 0
    server: Any = None

    async def Check(self, request: auth_pb.CheckRequest, context: Any) -> auth_pb.CheckResponse:
        http = request.attributes.request.http
        headers = dict(http.headers)
        ctx = dict(request.attributes.context_extensions)
        self.checks.append(Check(http.path, headers, ctx, http.body))
        token = headers.get("authorization", "").removeprefix("Bearer ")
        if token in self.tokens:
            return auth_pb.CheckResponse(
                status=status_pb2.Status(code=code_pb2.OK),
                ok_response=auth_pb.OkHttpResponse(
                    headers=[
                        _header("x-auth-user", f"user-of-{token}"),
                        _header(f"x-checked-by-{self.name}", "yes"),
                        _header(f"x-context-{self.name}", ",".join(f"{k}={v}" for k, v in sorted(ctx.items()))),
                    ],
                    headers_to_remove=["authorization"],
                ),
            )
        return auth_pb.CheckResponse(
            status=status_pb2.Status(code=code_pb2.PERMISSION_DENIED),
            denied_response=auth_pb.DeniedHttpResponse(
                status=http_status_pb2.HttpStatus(code=http_status_pb2.Forbidden),
                headers=[_header("x-denied-by", self.name)],
                body=f"denied by {self.name}\n",
            ),
        )

    def reset(self) -> None:
        self.checks.clear()


@dataclass
class ProcServer(proc_grpc.ExternalProcessorServicer):  # type: ignore[misc]
    """Adds `x-proc-<name>: request` to requests and `x-proc-<name>: response` to
    responses; uppercases a buffered request body; answers 418 itself when the
    request carries `x-proc-block`."""

    name: str
    seen: list[str] = field(default_factory=list)
    port: int = 0
    server: Any = None

    async def Process(
        self, requests: AsyncIterator[proc_pb.ProcessingRequest], context: Any
    ) -> AsyncIterator[proc_pb.ProcessingResponse]:
        async for req in requests:
            kind = req.WhichOneof("request")
            self.seen.append(kind or "?")
            if kind == "request_headers":
                headers = {h.key: (h.raw_value.decode() or h.value) for h in req.request_headers.headers.headers}
                if "x-proc-block" in headers:
                    yield proc_pb.ProcessingResponse(immediate_response=proc_pb.ImmediateResponse(
                        status=http_status_pb2.HttpStatus(code=418), body=f"blocked by {self.name}\n".encode()))
                    continue
                yield proc_pb.ProcessingResponse(request_headers=proc_pb.HeadersResponse(
                    response=self._mutation(f"x-proc-{self.name}", "request")))
            elif kind == "response_headers":
                yield proc_pb.ProcessingResponse(response_headers=proc_pb.HeadersResponse(
                    response=self._mutation(f"x-proc-{self.name}", "response")))
            elif kind == "request_body":
                body = req.request_body.body.upper()
                yield proc_pb.ProcessingResponse(request_body=proc_pb.BodyResponse(
                    response=proc_pb.CommonResponse(
                        header_mutation=proc_pb.HeaderMutation(set_headers=[
                            base_pb2.HeaderValueOption(header=base_pb2.HeaderValue(
                                key="content-length", raw_value=str(len(body)).encode()))]),
                        body_mutation=proc_pb.BodyMutation(body=body))))
            elif kind == "response_body":
                yield proc_pb.ProcessingResponse(response_body=proc_pb.BodyResponse())
            elif kind == "request_trailers":
                yield proc_pb.ProcessingResponse(request_trailers=proc_pb.TrailersResponse())
            elif kind == "response_trailers":
                yield proc_pb.ProcessingResponse(response_trailers=proc_pb.TrailersResponse())

    @staticmethod
    def _mutation(key: str, value: str) -> proc_pb.CommonResponse:
        return proc_pb.CommonResponse(header_mutation=proc_pb.HeaderMutation(set_headers=[
            base_pb2.HeaderValueOption(header=base_pb2.HeaderValue(key=key, raw_value=value.encode()))]))


@dataclass
class HttpAuthServer:
    """HTTP ext_authz: 200 with `x-user` for `Bearer good`, else 401 with a challenge."""

    port: int = 0
    paths: list[str] = field(default_factory=list)
    runner: Any = None

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.Response:
            self.paths.append(request.path_qs)
            if request.headers.get("authorization") == "Bearer good":
                return web.Response(status=200, headers={"x-user": "alice", "x-not-allowed": "leak"})
            return web.Response(status=401, text="no entry\n",
                                headers={"www-authenticate": 'Bearer realm="test"', "x-not-allowed": "leak"})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        return app


@dataclass
class JwksServer:
    """Serves `keys` (a JWKS) at any path; counts the fetches."""

    keys: dict[str, Any] = field(default_factory=lambda: {"keys": []})
    port: int = 0
    fetches: int = 0
    runner: Any = None

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.Response:
            self.fetches += 1
            return web.json_response(self.keys)

        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", handle)
        return app


@dataclass
class BodyEcho:
    """A backend answering with JSON: method, path, headers and the request body.

    `/fail/<n>` fails with 503 the first n times it is asked (per path), then answers;
    `/delay/<ms>` waits before answering.
    """

    pod: str
    port: int = 0
    runner: Any = None
    hits: dict[str, int] = field(default_factory=dict)

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.Response:
            body = await request.read()
            self.hits[request.path] = self.hits.get(request.path, 0) + 1
            parts = request.path.strip("/").split("/")
            if len(parts) >= 2 and parts[0] == "fail" and parts[1].isdigit() \
                    and self.hits[request.path] <= int(parts[1]):
                return web.Response(status=503, text="failing on purpose\n")
            if len(parts) >= 2 and parts[0] == "delay" and parts[1].isdigit():
                await asyncio.sleep(int(parts[1]) / 1000)
            return web.json_response({
                "pod": self.pod, "method": request.method, "path": request.path_qs,
                "headers": {k.lower(): v for k, v in request.headers.items()},
                "body": body.decode(errors="replace"),
            }, headers={"x-backend": self.pod})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        return app


class Servers:
    """Starts and stops the test services on one background loop."""

    def __init__(self) -> None:
        self.loop = Loop()
        self._stops: list[Any] = []

    def grpc(self, servicer: AuthServer | ProcServer) -> int:
        port = free_port()

        async def go() -> Any:
            server = grpc.aio.server()
            if isinstance(servicer, AuthServer):
                auth_grpc.add_AuthorizationServicer_to_server(servicer, server)
            else:
                proc_grpc.add_ExternalProcessorServicer_to_server(servicer, server)
            server.add_insecure_port(f"127.0.0.1:{port}")
            await server.start()
            return server

        servicer.port = port
        servicer.server = self.loop.run(go())
        self._stops.append(lambda s=servicer.server: s.stop(0))
        return port

    def auth(self, name: str, tokens: set[str] | None = None) -> AuthServer:
        server = AuthServer(name, tokens or {"good"})
        self.grpc(server)
        return server

    def proc(self, name: str) -> ProcServer:
        server = ProcServer(name)
        self.grpc(server)
        return server

    def http(self, target: HttpAuthServer | BodyEcho | JwksServer) -> int:
        port = free_port()

        async def go() -> web.AppRunner:
            runner = web.AppRunner(target.app(), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            return runner

        target.port = port
        target.runner = self.loop.run(go())
        self._stops.append(target.runner.cleanup)
        return port

    def http_auth(self) -> HttpAuthServer:
        server = HttpAuthServer()
        self.http(server)
        return server

    def jwks(self, keys: dict[str, Any]) -> JwksServer:
        server = JwksServer(keys)
        self.http(server)
        return server

    def echo(self, pod: str) -> BodyEcho:
        server = BodyEcho(pod)
        self.http(server)
        return server

    def close(self) -> None:
        async def stop() -> None:
            for s in reversed(self._stops):
                await s()

        self.loop.run(stop())
        self.loop.close()


def body_of(resp: Any) -> dict[str, Any]:
    return dict(json.loads(resp.text))
