"""The MCP relay: the HTTP server Envoy sends every request of an MCP route to.

Envoy names the route's Backend in the header config.BACKEND_HEADER (a Backend this
relay does not know: 404 with a JSON-RPC error naming it, so Envoy's answer fails
closed). Clients speak either MCP transport at the route's own path:

- Streamable HTTP: POST a JSON-RPC message (requests are answered with JSON, or with an
  event stream as soon as a target sends something before the answer: progress, logging,
  a request to the client; notifications and answers with 202); GET opens the session's
  stream of the targets' messages outside requests; DELETE ends the session on every
  target. The session id is the session's state (sessions.py): a request of an unknown
  session is answered 404, as the specification says.
- HTTP+SSE (the 2024-11-05 transport): GET on a path ending in `/sse` opens the stream,
  whose `endpoint` event is that same path with `?sessionId=`; POSTs there answer 202
  and their answers go out on the stream. That session lives in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from lychgate.config_watch import follow
from lychgate.mcp import metrics
from lychgate.mcp.aggregate import (
    INVALID_REQUEST,
    PARSE_ERROR,
    SESSION_NOT_FOUND,
    Gateway,
    Session,
    error,
)
from lychgate.mcp.config import BACKEND_HEADER, Backend, MCPConfig
from lychgate.mcp.sessions import IDLE_TIMEOUT, Held, SessionState
from lychgate.mcp.upstream import SESSION_HEADER, Message, SessionGone

log = logging.getLogger("lychgate.mcp")

LEGACY_QUERY = "sessionId"
KEEPALIVE = 25.0  # seconds between comments on an idle stream (so proxies keep it, and a gone client is noticed)


def _event(message: Message) -> bytes:
    return b"event: message\ndata: " + json.dumps(message, separators=(",", ":")).encode() + b"\n\n"


def _json(message: Message, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=json.dumps(message, separators=(",", ":")).encode(), status=status,
                        content_type="application/json", headers=headers)


class Answer:
    """The answer to one POSTed request: JSON, or an event stream once a target sends
    something before the answer."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.stream: web.StreamResponse | None = None

    async def send(self, message: Message) -> None:
        if self.stream is None:
            self.stream = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
            await self.stream.prepare(self.request)
        await self.stream.write(_event(message))

    async def end(self) -> web.StreamResponse:
        """An answer without a message."""
        if self.stream is None:
            self.stream = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await self.stream.prepare(self.request)
        await self.stream.write_eof()
        return self.stream

    async def finish(self, message: Message, status: int = 200) -> web.StreamResponse:
        if self.stream is None:
            return _json(message, status)
        await self.stream.write(_event(message))
        await self.stream.write_eof()
        return self.stream


@dataclass
class Legacy:
    """A client on the HTTP+SSE transport: its stream and, once initialized, its session."""

    backend: str
    queue: asyncio.Queue[Message] = field(default_factory=asyncio.Queue)
    state: SessionState | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


class Relay:
    def __init__(self, config: MCPConfig, idle_timeout: float = IDLE_TIMEOUT) -> None:
        self.config = config
        self.held = Held(idle_timeout)
        self._http: aiohttp.ClientSession | None = None
        self._gateway: Gateway | None = None
        self._legacy: dict[str, Legacy] = {}

    @property
    def gateway(self) -> Gateway:
        if self._gateway is None:  # made in the loop that serves (aiohttp's ClientSession needs one)
            self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
                                               auto_decompress=False)
            self._gateway = Gateway(self._http, self.held)
        return self._gateway

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self.handle)
        return app

    async def close(self) -> None:
        await self.held.close()
        if self._http is not None:
            await self._http.close()

    async def reload(self, config: MCPConfig) -> None:
        """A new config: connections to targets that changed or left are closed; sessions
        of unchanged Backends go on."""
        old, self.config = self.config, config

        def stale(backend: str, target: str) -> bool:
            return _target(old, backend, target) != _target(config, backend, target)

        await self.held.drop_where(stale)
        log.info("MCP relay config reloaded: %d Backends", len(config.backends))

    # --- HTTP -----------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.headers.get(BACKEND_HEADER, "")
        backend = self.config.backends.get(name)
        if backend is None:
            return _json(error(None, INVALID_REQUEST, f"MCP Backend {name or '(none named)'} is not served here",
                               {"backend": name}), 404)
        if request.method == "POST":
            if LEGACY_QUERY in request.query:
                return await self._legacy_post(request, backend)
            return await self._post(request, backend)
        if request.method == "GET":
            if request.path.endswith("/sse") and SESSION_HEADER not in request.headers:
                return await self._legacy_stream(request, backend)
            return await self._stream(request, backend)
        if request.method == "DELETE":
            return await self._delete(request, backend)
        return _json(error(None, INVALID_REQUEST, f"{request.method} is not an MCP method"), 405,
                     {"allow": "GET, POST, DELETE"})

    def _session(self, request: web.Request, backend: Backend) -> Session | web.Response:
        text = request.headers.get(SESSION_HEADER)
        if not text:
            return _json(error(None, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required"), 400)
        state = SessionState.decode(text)
        session = None if state is None else self.gateway.session(backend, state)
        if session is None:
            return _json(error(None, SESSION_NOT_FOUND, "Session not found"), 404)
        return session

    async def _post(self, request: web.Request, backend: Backend) -> web.StreamResponse:
        message = await _message(request)
        if isinstance(message, web.Response):
            return message
        body = await request.read()
        if message.get("method") == "initialize":
            return await self._initialize(request, backend, message, body)
        session = self._session(request, backend)
        if isinstance(session, web.Response):
            return session
        answer = Answer(request)
        try:
            reply = await self.gateway.handle(session, message, body, answer.send)
        except SessionGone:
            return await answer.finish(error(message.get("id"), SESSION_NOT_FOUND, "Session not found"), 404)
        if reply is not None:
            return await answer.finish(reply)
        if "method" in message and "id" in message:  # a request the client cancelled: no answer
            return await answer.end()
        return web.Response(status=202)

    async def _initialize(self, request: web.Request, backend: Backend, message: Message,
                          body: bytes) -> web.StreamResponse:
        collected: list[Message] = []  # before the session id is known, nothing can be streamed

        async def collect(m: Message) -> None:
            collected.append(m)

        state, reply = await self.gateway.initialize(backend, message, body, collect)
        if state is None:
            return _json(reply, 502)
        metrics.REQUESTS.labels(backend.id, "initialize").inc()
        headers = {SESSION_HEADER: state.encode()}
        if not collected:
            return _json(reply, headers=headers)
        answer = Answer(request)
        answer.stream = web.StreamResponse(headers={"content-type": "text/event-stream", **headers})
        await answer.stream.prepare(request)
        for m in collected:
            await answer.send(m)
        return await answer.finish(reply)

    async def _stream(self, request: web.Request, backend: Backend) -> web.StreamResponse:
        session = self._session(request, backend)
        if isinstance(session, web.Response):
            return session
        stream = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
        await stream.prepare(request)

        async def send(message: Message) -> None:
            await stream.write(_event(message))

        await _keepalive(stream, self.gateway.listen(session, send))
        return stream

    async def _delete(self, request: web.Request, backend: Backend) -> web.StreamResponse:
        session = self._session(request, backend)
        if isinstance(session, web.Response):
            return session
        await self.gateway.close(session)
        return web.Response(status=200)

    # --- HTTP+SSE -------------------------------------------------------------------------

    async def _legacy_stream(self, request: web.Request, backend: Backend) -> web.StreamResponse:
        token = secrets.token_urlsafe(16)
        legacy = self._legacy[token] = Legacy(backend.id)
        stream = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
        try:
            await stream.prepare(request)
            await stream.write(f"event: endpoint\ndata: {request.path}?{LEGACY_QUERY}={token}\n\n".encode())

            async def forward() -> None:
                while True:
                    await stream.write(_event(await legacy.queue.get()))

            await _keepalive(stream, forward())
        finally:
            del self._legacy[token]
            for task in legacy.tasks:
                task.cancel()
            current = self.config.backends.get(backend.id)
            session = None if legacy.state is None or current is None else self.gateway.session(current, legacy.state)
            if session is not None:
                await self.gateway.close(session)
        return stream

    async def _legacy_post(self, request: web.Request, backend: Backend) -> web.StreamResponse:
        legacy = self._legacy.get(request.query[LEGACY_QUERY])
        if legacy is None or legacy.backend != backend.id:
            return _json(error(None, SESSION_NOT_FOUND, "Session not found"), 404)
        message = await _message(request)
        if isinstance(message, web.Response):
            return message
        body = await request.read()
        task = asyncio.create_task(self._legacy_handle(legacy, backend, message, body))
        legacy.tasks.add(task)
        task.add_done_callback(legacy.tasks.discard)
        return web.Response(status=202, text="Accepted")

    async def _legacy_handle(self, legacy: Legacy, backend: Backend, message: Message, body: bytes) -> None:
        send = legacy.queue.put
        if message.get("method") == "initialize":
            legacy.state, reply = await self.gateway.initialize(backend, message, body, send)
            if legacy.state is not None:
                metrics.REQUESTS.labels(backend.id, "initialize").inc()
                session = self.gateway.session(backend, legacy.state)
                if session is not None:
                    listener = asyncio.create_task(self.gateway.listen(session, send))
                    legacy.tasks.add(listener)
            await send(reply)
            return
        session = None if legacy.state is None else self.gateway.session(backend, legacy.state)
        gone = error(message.get("id"), SESSION_NOT_FOUND, "Session not found") if "id" in message else None
        try:
            answer = gone if session is None else await self.gateway.handle(session, message, body, send)
        except SessionGone:
            answer = gone
        if answer is not None:
            await send(answer)


async def _message(request: web.Request) -> Message | web.Response:
    """The POST's one JSON-RPC message, read exactly as Envoy's MCP filter read it before the
    route's policies looked at it (a JSON body, one object, no key twice): a body it may
    have read otherwise is refused here, so no policy over its metadata can be stepped around."""
    if request.content_type != "application/json":
        return _json(error(None, INVALID_REQUEST, "a JSON-RPC message is sent as Content-Type: application/json"), 415)
    try:
        message: Any = json.loads(await request.read(), object_pairs_hook=_no_key_twice)
    except ValueError as err:
        return _json(error(None, PARSE_ERROR, f"Parse error: {err}"), 400)
    if not isinstance(message, dict):
        return _json(error(None, INVALID_REQUEST, "one JSON-RPC message per POST (batches are not supported)"), 400)
    return message


def _no_key_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        twice = sorted({k for k, _ in pairs if sum(1 for j, _ in pairs if j == k) > 1})
        raise ValueError(f"key {', '.join(map(repr, twice))} given twice in one object")
    return out


async def _keepalive(stream: web.StreamResponse, work: Any) -> None:
    """Run `work` (writing to the stream) with comments between, until it ends or the client goes."""
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=KEEPALIVE)
            if not task.done():
                await stream.write(b": keepalive\n\n")
    except (ConnectionResetError, aiohttp.ClientConnectionResetError):
        pass
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionResetError, aiohttp.ClientConnectionResetError):
            await task


def _target(config: MCPConfig, backend: str, target: str) -> object:
    found = config.backends.get(backend)
    return None if found is None else next((t for t in found.targets if t.name == target), None)


# --- the process --------------------------------------------------------------------------


def load(config_file: Path) -> MCPConfig:
    try:
        return MCPConfig.from_json(config_file.read_text())
    except FileNotFoundError:
        return MCPConfig()
    except (ValueError, TypeError, KeyError) as err:
        # A config the control plane wrote cannot be half-valid; keep serving the last one.
        log.error("MCP relay config %s cannot be read: %s", config_file, err)
        raise ValueError(str(err)) from err


async def serve(listen: str, config_file: Path, metrics_port: int | None = None,
                stop: asyncio.Event | None = None, idle_timeout: float = IDLE_TIMEOUT,
                metrics_host: str | None = None) -> None:
    """Serve the relay on `listen` ("host:port") with the config in `config_file` (followed as
    it changes), its metrics on `metrics_port` when given (at `metrics_host`, else the same
host: in a Pod, 0.0.0.0 for scrapers), until `stop` is set."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    relay = Relay(load(config_file), idle_timeout)
    runners = [web.AppRunner(relay.app(), handler_cancellation=True, access_log=None)]
    if metrics_port:
        runners.append(web.AppRunner(_metrics_app(), access_log=None))
    tasks: list[asyncio.Task[None]] = []
    try:
        for runner, (on, at) in zip(runners, ((host, int(port)), (metrics_host or host, metrics_port)), strict=False):
            await runner.setup()
            await web.TCPSite(runner, on, at).start()
        log.info("MCP relay listening on %s (%d Backends)", listen, len(relay.config.backends))

        async def reload() -> None:
            with contextlib.suppress(ValueError):  # logged by load(); the last config stays
                await relay.reload(load(config_file))

        tasks = [asyncio.create_task(follow(config_file, reload)), asyncio.create_task(relay.held.sweep_forever())]
        await (stop or asyncio.Event()).wait()
    finally:
        for task in tasks:
            task.cancel()
        for runner in runners:
            await runner.cleanup()
        await relay.close()


def _metrics_app() -> web.Application:
    async def scrape(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.REGISTRY), headers={"content-type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    return app


__all__ = ["Relay", "load", "serve"]
