"""Real services the policy tests put behind Envoy, on loopback ports.

- AuthServer: Envoy's `envoy.service.auth.v3.Authorization` over gRPC (grpc.aio,
  generated stubs from xds-protos). Allows `authorization: Bearer <token>` for
  its tokens, denies everything else with 403.
- HttpAuthServer: an HTTP authorization service (ext_authz http_service).
- ProcServer: Envoy's `envoy.service.ext_proc.v3.ExternalProcessor`: adds headers
  to requests and responses, can rewrite a buffered request body and can stop a
  request outright.
- JwksServer: a JSON Web Key Set over HTTP, as an identity provider serves it.
- OidcProvider: an OpenID provider's authorization-code flow: discovery,
  /authorize (logs the user in at once and redirects back with a code),
  /token (checks the client secret, the code, its redirect URI and the PKCE
  verifier) and /logout.
- BodyEcho: a backend that echoes method, path, headers and the request body,
  and can fail or delay on request.
- HeaderAuthServer: the ext-authz service kgateway's suites run: allows a request
  carrying `x-ext-authz: allow` and tells the backend so in a header.
- Httpbin: the go-httpbin endpoints kgateway's suites call (/status, /delay,
  /redirect-to, /html, /json, /headers, /get, /post) and a WebSocket echo at /ws.

Every server records what it saw, so tests can assert which one was called and
with what context, not only what the client got back.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import threading
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import unquote_plus, urlencode

import grpc
from aiohttp import web
from envoy.config.core.v3 import base_pb2
from envoy.service.auth.v3 import external_auth_pb2 as auth_pb
from envoy.service.auth.v3 import external_auth_pb2_grpc as auth_grpc
from envoy.service.ext_proc.v3 import external_processor_pb2 as proc_pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as proc_grpc
from envoy.type.v3 import http_status_pb2
from google.protobuf import json_format
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
class HeaderAuthServer(AuthServer):
    """Allows `x-ext-authz: allow` and adds `x-ext-authz-check-result: allowed` to the request;
    denies anything else with 403, as the ext-authz server of kgateway's extauth suite."""

    async def Check(self, request: auth_pb.CheckRequest, context: Any) -> auth_pb.CheckResponse:
        http = request.attributes.request.http
        headers = dict(http.headers)
        self.checks.append(Check(http.path, headers, dict(request.attributes.context_extensions), http.body))
        if headers.get("x-ext-authz") == "allow":
            return auth_pb.CheckResponse(
                status=status_pb2.Status(code=code_pb2.OK),
                ok_response=auth_pb.OkHttpResponse(headers=[_header("x-ext-authz-check-result", "allowed")]))
        return auth_pb.CheckResponse(
            status=status_pb2.Status(code=code_pb2.PERMISSION_DENIED),
            denied_response=auth_pb.DeniedHttpResponse(
                status=http_status_pb2.HttpStatus(code=http_status_pb2.Forbidden),
                headers=[_header("x-ext-authz-check-result", "denied")]))


@dataclass
class ProcServer(proc_grpc.ExternalProcessorServicer):  # type: ignore[misc]
    """Adds `x-proc-<name>: request` to requests and `x-proc-<name>: response` to
    responses; uppercases a buffered request body; answers 418 itself when the
    request carries `x-proc-block`."""

    name: str
    seen: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # the :path of each request it processed
    # the request headers of each request it processed: what the filters before it left
    requests: list[dict[str, str]] = field(default_factory=list)
    attributes: list[dict[str, Any]] = field(default_factory=list)  # requestAttributes Envoy sent
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
                self.paths.append(headers.get(":path", ""))
                self.requests.append(headers)
                if req.attributes:
                    self.attributes.append({ns: json_format.MessageToDict(v) for ns, v in req.attributes.items()})
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
    """HTTP ext_authz: 200 with `x-user` for `Bearer good`, else 401 with a challenge;
    each answer `delay` seconds late (a slow auth service)."""

    port: int = 0
    paths: list[str] = field(default_factory=list)
    runner: Any = None
    delay: float = 0.0

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.Response:
            self.paths.append(request.path_qs)
            await asyncio.sleep(self.delay)
            if request.headers.get("authorization") == "Bearer good":
                return web.Response(status=200, headers={"x-user": "alice", "x-not-allowed": "leak"})
            return web.Response(status=401, text="no entry\n",
                                headers={"www-authenticate": 'Bearer realm="test"', "x-not-allowed": "leak"})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        return app


@dataclass
class JwksServer:
    """Serves `keys` (a JWKS) at any path; counts the fetches. The first `fail_first`
    fetches get 503; every answer comes `delay` seconds late."""

    keys: dict[str, Any] = field(default_factory=lambda: {"keys": []})
    port: int = 0
    fetches: int = 0
    runner: Any = None
    fail_first: int = 0
    delay: float = 0.0

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.Response:
            self.fetches += 1
            await asyncio.sleep(self.delay)
            if self.fetches <= self.fail_first:
                return web.Response(status=503, text="not now\n")
            return web.json_response(self.keys)

        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", handle)
        return app


@dataclass
class OidcProvider:
    client_id: str
    client_secret: str
    user: str = "ada"
    port: int = 0
    runner: Any = None
    codes: dict[str, dict[str, str]] = field(default_factory=dict)  # code -> the /authorize query
    tokens: list[str] = field(default_factory=list)  # access tokens issued
    logins: int = 0
    logouts: int = 0
    token_requests: list[dict[str, str]] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def app(self) -> web.Application:
        async def discovery(request: web.Request) -> web.Response:
            return web.json_response({
                "issuer": self.base, "authorization_endpoint": f"{self.base}/authorize",
                "token_endpoint": f"{self.base}/token", "end_session_endpoint": f"{self.base}/logout",
                "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
            })

        async def authorize(request: web.Request) -> web.Response:
            q = dict(request.query)
            if q.get("client_id") != self.client_id or q.get("response_type") != "code" or "redirect_uri" not in q:
                return web.Response(status=400, text=f"bad authorization request {q}\n")
            self.logins += 1
            code = secrets.token_urlsafe(16)
            self.codes[code] = q
            target = q["redirect_uri"] + "?" + urlencode({"code": code, "state": q.get("state", "")})
            raise web.HTTPFound(target)

        async def token(request: web.Request) -> web.Response:
            form = dict(await request.post())
            self.token_requests.append(form)
            client_id, client_secret = form.get("client_id"), form.get("client_secret")
            auth = request.headers.get("authorization", "")
            if auth.startswith("Basic "):
                client_id, _, client_secret = base64.b64decode(auth[6:]).decode().partition(":")
                client_id, client_secret = unquote_plus(client_id), unquote_plus(client_secret)
            if (client_id, client_secret) != (self.client_id, self.client_secret):
                return web.json_response({"error": "invalid_client"}, status=401)
            asked = self.codes.pop(str(form.get("code")), None)
            if asked is None or form.get("grant_type") != "authorization_code" \
                    or form.get("redirect_uri") != asked["redirect_uri"]:
                return web.json_response({"error": "invalid_grant"}, status=400)
            challenge = asked.get("code_challenge")
            if challenge:
                verifier = str(form.get("code_verifier", ""))
                digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                if digest != challenge:
                    return web.json_response({"error": "invalid_grant", "detail": "PKCE"}, status=400)
            access = "at-" + secrets.token_urlsafe(12)
            self.tokens.append(access)
            return web.json_response({"access_token": access, "token_type": "Bearer", "expires_in": 3600,
                                      "id_token": "id-" + self.user, "refresh_token": "rt-" + self.user})

        async def logout(request: web.Request) -> web.Response:
            self.logouts += 1
            return web.Response(text="logged out at the provider\n")

        app = web.Application()
        app.router.add_get("/.well-known/openid-configuration", discovery)
        app.router.add_get("/authorize", authorize)
        app.router.add_post("/token", token)
        app.router.add_get("/logout", logout)
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


@dataclass
class Httpbin:
    """What kgateway's suites ask of go-httpbin: /status/<code>, /delay/<seconds>,
    /redirect-to?url=&status_code=, /html (chunked), /json (with a Content-Length),
    /headers (every request header as a list of values), /get and /post (echo the body),
    /ws (a WebSocket that echoes each text message)."""

    port: int = 0
    runner: Any = None
    hits: dict[str, int] = field(default_factory=dict)
    html: str = "<html><body>" + "<p>go-httpbin says hello</p>" * 40 + "</body></html>"

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.StreamResponse:
            self.hits[request.path] = self.hits.get(request.path, 0) + 1
            parts = request.path.strip("/").split("/")
            body = await request.read()
            if parts[0] == "status" and len(parts) > 1 and parts[1].isdigit():
                return web.Response(status=int(parts[1]))
            if parts[0] == "delay" and len(parts) > 1:
                await asyncio.sleep(float(parts[1]))
            if parts[0] == "redirect-to":
                return web.Response(status=int(request.query.get("status_code", "302")),
                                    headers={"location": request.query["url"]})
            if parts[0] == "html":
                resp = web.StreamResponse(headers={"content-type": "text/html; charset=utf-8"})
                resp.enable_chunked_encoding()
                await resp.prepare(request)
                await resp.write(self.html.encode())
                await resp.write_eof()
                return resp
            if parts[0] == "ws":
                ws = web.WebSocketResponse()
                await ws.prepare(request)
                async for msg in ws:
                    await ws.send_str(msg.data)
                return ws
            headers: dict[str, list[str]] = {}
            for k, v in request.headers.items():
                headers.setdefault(k.title(), []).append(v)
            return web.json_response({"headers": headers, "path": request.path_qs, "method": request.method,
                                      "data": body.decode(errors="replace")})

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

    def http(self, target: HttpAuthServer | BodyEcho | JwksServer | OidcProvider | Httpbin, port: int = 0) -> int:
        """Serve `target` on `port` (a free one by default)."""
        port = port or free_port()

        async def go() -> web.AppRunner:
            # Long request lines are legal (an OAuth2 state can be several kB).
            runner = web.AppRunner(target.app(), access_log=None, max_line_size=65536, max_field_size=65536)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            return runner

        target.port = port
        target.runner = self.loop.run(go())
        self._stops.append(target.runner.cleanup)
        return port

    def stop(self, target: BodyEcho | Httpbin) -> None:
        """Stop an HTTP server now (its port refuses connections until `http` serves it again)."""
        self._stops.remove(target.runner.cleanup)
        self.loop.run(target.runner.cleanup())

    def http_auth(self) -> HttpAuthServer:
        server = HttpAuthServer()
        self.http(server)
        return server

    def oidc(self, client_id: str, client_secret: str) -> OidcProvider:
        server = OidcProvider(client_id, client_secret)
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
