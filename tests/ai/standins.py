"""Plumbing shared by the LLM provider stand-ins (tests/ai/standin_<provider>.py).

A stand-in is an aiohttp app on 127.0.0.1 (a free port the OS picks), served from its
own event loop in a background thread, so synchronous tests (httpx, the openai SDK)
and async tests alike can call it. It records every request and can be told to fail.

Write a provider's stand-in by subclassing `StandIn`:

    class MyProvider(StandIn):
        def __init__(self, key: str = "k") -> None:
            super().__init__()
            self.key = key
            self.route("POST", "/v1/things/{name}", self.things)

        def error(self, status: int, message: str) -> web.Response:  # the provider's error body
            return web.json_response({"error": {"message": message}}, status=status)

        async def things(self, request: web.Request) -> web.StreamResponse:
            if request.headers.get("x-key") != self.key:
                return self.refuse(request, 401, "bad key")  # error(), the reason noted on the record
            body = self.json_body(request)  # None when not JSON
            if body.get("stream"):
                return await self.send_stream(request, [b"data: 1\\n\\n", b"data: 2\\n\\n"],
                                              "text/event-stream")
            return web.json_response({...})

`count_tokens(text)` (one token per word) and `words(text)` (the pieces to stream) keep
the stand-ins' usage figures and chunks predictable. Use a stand-in as a context manager
(or call start() / stop()):

    with MyProvider() as provider:
        httpx.post(provider.url + "/v1/things/x", ...)
        provider.requests[-1].json()         # what it was sent (Recorded)
        provider.fail(503, times=1)          # the next request gets the provider's 503
        provider.fail(429)                   # every request gets 429 until recover()
        provider.recover()

A test's own check of what was received belongs in the test; a stand-in checks what the
real provider checks and answers as the real provider would (its status and error body).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Recorded:
    """One request a stand-in received."""

    method: str
    path: str  # as sent (percent-escapes kept), without the query string
    query: dict[str, str]
    headers: dict[str, str]  # names lowercased (HTTP headers are case-insensitive)
    body: bytes
    status: int = 0  # what the stand-in answered (set once it answered)
    problems: list[str] = field(default_factory=list)  # why a stand-in refused it, if it did

    def json(self) -> Any:
        return json.loads(self.body)


RECORDED = web.RequestKey("recorded", Recorded)


def count_tokens(text: str) -> int:
    """A stand-in's token count: one per word, so a test can say what usage to expect."""
    return len(text.split())


def words(text: str) -> list[str]:
    """`text` cut into streamed pieces: the words, each but the first with its leading space
    (joined back, they are `text` with runs of spaces made single)."""
    parts = text.split()
    return parts[:1] + [" " + w for w in parts[1:]]


class StandIn:
    """An HTTP server on loopback speaking one provider's API (subclass it)."""

    host = "127.0.0.1"

    def __init__(self, ssl_context: ssl.SSLContext | None = None, chunk_delay: float = 0.02,
                 pieces: int = 0) -> None:
        self.ssl_context = ssl_context
        self.chunk_delay = chunk_delay  # seconds between streamed chunks
        # > 0: whole answers (errors too) are sent chunked in this many pieces, `chunk_delay`
        # apart, as a slow link delivers them, not in one write
        self.pieces = pieces
        self.requests: list[Recorded] = []
        self.port = 0
        self._routes: list[tuple[str, str, Handler]] = []
        self._failure: tuple[int, str] | None = None
        self._failures_left: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    # -- what a subclass defines ------------------------------------------------------

    def route(self, method: str, path: str, handler: Handler) -> None:
        """Serve `handler` for `method` on `path` (aiohttp patterns: "/v1/{name}", "/{tail:.*}")."""
        self._routes.append((method, path, handler))

    def error(self, status: int, message: str) -> web.Response:
        """The provider's error answer (override with the provider's real error body)."""
        return web.json_response({"error": {"message": message}}, status=status)

    # -- what a test uses ---------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://{self.host}:{self.port}"

    def fail(self, status: int, times: int | None = None, message: str = "the stand-in was told to fail") -> None:
        """Answer the next `times` requests (every request when None) with `status` and the
        provider's error body, without calling the handler."""
        self._failure, self._failures_left = (status, message), times

    def recover(self) -> None:
        self._failure, self._failures_left = None, None

    @property
    def last(self) -> Recorded:
        return self.requests[-1]

    def start(self) -> StandIn:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=type(self).__name__, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
        self._loop = self._thread = self._runner = None

    def __enter__(self) -> Any:  # Any: the subclass, without a TypeVar at every use
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers for handlers ---------------------------------------------------------------

    @staticmethod
    def recorded(request: web.Request) -> Recorded:
        """The request's record (`body` holds its bytes, already read)."""
        return request[RECORDED]

    @staticmethod
    def json_body(request: web.Request) -> Any:
        """The request's body as JSON, or None when it is not JSON."""
        try:
            return json.loads(request[RECORDED].body)
        except ValueError:
            return None

    def refuse(self, request: web.Request, status: int, message: str, **details: Any) -> web.Response:
        """The provider's error answer (`details`: what its error() takes besides), noting
        why on the recorded request."""
        request[RECORDED].problems.append(message)
        return self.error(status, message, **details)

    async def send_stream(self, request: web.Request, chunks: Iterable[bytes], content_type: str,
                          headers: dict[str, str] | None = None) -> web.StreamResponse:
        """Stream `chunks` as they are (one write each, `chunk_delay` apart) with status 200."""
        response = web.StreamResponse(status=200, headers={"Content-Type": content_type, **(headers or {})})
        await response.prepare(request)
        for i, chunk in enumerate(chunks):
            if i and self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            await response.write(chunk)
        await response.write_eof()
        return response

    # -- internals -----------------------------------------------------------------------------

    async def _serve(self) -> None:
        app = web.Application(middlewares=[self._record], client_max_size=64 * 1024 * 1024)
        for method, path, handler in self._routes:
            app.router.add_route(method, path, handler)
        # A stream still being sent when the test ends is cut after a second, not a minute.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0, ssl_context=self.ssl_context)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    @web.middleware
    async def _record(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        recorded = Recorded(request.method, request.raw_path.partition("?")[0], dict(request.query),
                            {k.lower(): v for k, v in request.headers.items()}, await request.read())
        self.requests.append(recorded)
        request[RECORDED] = recorded
        if self._failure is not None:
            status, message = self._failure
            if self._failures_left is not None:
                self._failures_left -= 1
                if self._failures_left <= 0:
                    self.recover()
            response: web.StreamResponse = self.error(status, message)
        else:
            try:
                response = await handler(request)
            except web.HTTPException as exc:  # an unknown path or method: the provider's 404/405
                response = self.error(exc.status, exc.reason)
        recorded.status = response.status
        if self.pieces and isinstance(response, web.Response) and isinstance(response.body, bytes):
            return await self._in_pieces(request, response, response.body)
        return response

    async def _in_pieces(self, request: web.Request, whole: web.Response, body: bytes) -> web.StreamResponse:
        response = web.StreamResponse(status=whole.status, headers={"Content-Type": whole.headers["Content-Type"]})
        await response.prepare(request)
        size = -(-len(body) // self.pieces)
        for i in range(0, len(body), size):
            if i:
                await asyncio.sleep(self.chunk_delay)
            await response.write(body[i:i + size])
        await response.write_eof()
        return response
