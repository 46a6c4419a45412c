"""The relay's side towards its targets: one MCP session per target and client session,
over the transport the target speaks.

- Streamable HTTP (`StreamableLink`): every message is a POST carrying the target's
  `Mcp-Session-Id`; the answer is JSON or an event stream whose events before the answer
  (progress, logging, requests to the client) go to the caller's sink. Nothing is held:
  a link is rebuilt from the session id for each request.
- HTTP+SSE (`SSELink`): a GET opens the stream, whose first event names the URL to POST
  messages to; every answer and notification arrives on that one stream, so the link is
  held for the session (sessions.Held) and matches answers to requests by id.

Both count as down (`TargetDown`) on a connection error, a 5xx, a timeout or a stream
that ends before the answer; a 404 for a session id means the target ended the session
(`SessionGone`). Connections come from the relay's one pooled, keep-alive ClientSession.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol
from urllib.parse import urljoin

import aiohttp

from lychgate.ai.providers.sse import Event, EventReader
from lychgate.mcp.config import Target

log = logging.getLogger("lychgate.mcp")

Message = dict[str, Any]
Sink = Callable[[Message], Awaitable[None]]

CONNECT_TIMEOUT = 5.0
INITIALIZE_TIMEOUT = 10.0  # a target slower than this to initialize is reported down
CALL_TIMEOUT = 300.0  # a request the target has not answered by then: down
DRAIN_TIMEOUT = 1.0  # after its answer, how long an answer's stream may take to end (keeps the connection pooled)
ACCEPT = "application/json, text/event-stream"
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"


class TargetDown(Exception):
    """The target cannot be reached, failed, or did not answer in time."""


class SessionGone(Exception):
    """The target does not know the session (any more)."""


def key(request_id: Any) -> str:
    """A request id as a dict key (1 and "1" are different ids)."""
    return json.dumps(request_id)


def is_reply(message: Message) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


def _timeout(total: float | None) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=total, sock_connect=CONNECT_TIMEOUT)


def _reason(err: BaseException) -> str:
    if isinstance(err, TimeoutError):
        return "timed out"
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


class Link(Protocol):
    """One MCP session with one target."""

    target: Target
    session_id: str
    version: str

    async def request(self, body: bytes, request_id: Any, sink: Sink, timeout: float = CALL_TIMEOUT) -> Message:
        """Send a request; its answer (notifications before it go to `sink`)."""
        ...

    async def send(self, body: bytes) -> None:
        """Send a notification or an answer to the target's request."""
        ...

    async def listen(self, sink: Sink) -> None:
        """Hand the target's messages outside any request to `sink`, until the target stops."""
        ...

    async def close(self) -> None:
        """End the session on the target."""
        ...


class StreamableLink:
    def __init__(self, http: aiohttp.ClientSession, target: Target, session_id: str = "", version: str = "") -> None:
        self.http = http
        self.target = target
        self.session_id = session_id
        self.version = version

    def _headers(self, accept: str = ACCEPT) -> dict[str, str]:
        headers = {"accept": accept, "content-type": "application/json"}
        if self.session_id:
            headers[SESSION_HEADER] = self.session_id
        if self.version:
            headers[VERSION_HEADER] = self.version
        return headers

    def _check(self, status: int) -> None:
        if status == 404 and self.session_id:
            raise SessionGone(self.target.name)
        if status >= 500:
            raise TargetDown(f"HTTP {status}")

    async def exchange(self, body: bytes, request_id: Any, sink: Sink, timeout: float) -> tuple[Message, str]:
        """The answer and the session id the target answered with."""
        try:
            async with self.http.post(self.target.url, data=body, headers=self._headers(),
                                      timeout=_timeout(timeout)) as resp:
                self._check(resp.status)
                session_id = resp.headers.get(SESSION_HEADER, "")
                if resp.content_type == "text/event-stream":
                    return await _answer_in_stream(resp, request_id, sink), session_id
                message = json.loads(await resp.read())  # a JSON-RPC error at a 4xx too
                if not isinstance(message, dict) or not is_reply(message):
                    raise TargetDown(f"HTTP {resp.status} without a JSON-RPC answer")
                return message, session_id
        except (aiohttp.ClientError, TimeoutError, ValueError) as err:
            raise TargetDown(_reason(err)) from err

    async def request(self, body: bytes, request_id: Any, sink: Sink, timeout: float = CALL_TIMEOUT) -> Message:
        return (await self.exchange(body, request_id, sink, timeout))[0]

    async def send(self, body: bytes) -> None:
        try:
            async with self.http.post(self.target.url, data=body, headers=self._headers(),
                                      timeout=_timeout(INITIALIZE_TIMEOUT)) as resp:
                self._check(resp.status)
                await resp.read()
        except (aiohttp.ClientError, TimeoutError) as err:
            raise TargetDown(_reason(err)) from err

    async def listen(self, sink: Sink) -> None:
        try:
            async with self.http.get(self.target.url, headers=self._headers("text/event-stream"),
                                     timeout=_timeout(None)) as resp:
                if resp.status != 200 or resp.content_type != "text/event-stream":
                    return  # 405: the target offers no stream of its own
                async for message in _messages(resp):
                    await sink(message)
        except (aiohttp.ClientError, ValueError) as err:
            log.debug("MCP target %s: its stream ended: %s", self.target.name, _reason(err))

    async def close(self) -> None:
        if not self.session_id:
            return
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            async with self.http.delete(self.target.url, headers=self._headers(),
                                        timeout=_timeout(INITIALIZE_TIMEOUT)) as resp:
                await resp.read()


async def _events(resp: aiohttp.ClientResponse) -> AsyncIterator[Event]:
    reader = EventReader()
    async for chunk in resp.content.iter_any():
        for event in reader.feed(chunk):
            yield event


async def _messages(resp: aiohttp.ClientResponse) -> AsyncIterator[Message]:
    async for event in _events(resp):
        if event.name == "message":
            yield json.loads(event.data)


async def _answer_in_stream(resp: aiohttp.ClientResponse, request_id: Any, sink: Sink) -> Message:
    wanted = key(request_id)
    messages = _messages(resp)
    async for message in messages:
        if is_reply(message) and key(message.get("id")) == wanted:
            break
        await sink(message)
    else:
        raise TargetDown("the answer's stream ended before the answer")

    async def rest() -> None:
        async for more in messages:
            await sink(more)

    with contextlib.suppress(TimeoutError):  # the server ends the stream after the answer
        await asyncio.wait_for(rest(), DRAIN_TIMEOUT)
    return message


class SSELink:
    """A held HTTP+SSE session: answers come back on the stream, matched by request id."""

    def __init__(self, http: aiohttp.ClientSession, target: Target) -> None:
        self.http = http
        self.target = target
        self.session_id = ""
        self.version = ""
        self._endpoint = ""
        self._pending: dict[str, tuple[asyncio.Future[Message], Sink]] = {}
        self._progress: dict[str, Sink] = {}  # progress tokens of the requests in flight
        self._background: Sink | None = None
        self._response: aiohttp.ClientResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()

    async def open(self, timeout: float = INITIALIZE_TIMEOUT) -> None:
        endpoint: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        try:
            self._response = await self.http.get(self.target.url, headers={"accept": "text/event-stream"},
                                                 timeout=_timeout(None))
            if self._response.status >= 300:
                raise TargetDown(f"HTTP {self._response.status}")
            self._reader = asyncio.create_task(self._read(endpoint))
            self._endpoint = await asyncio.wait_for(asyncio.shield(endpoint), timeout)
        except (aiohttp.ClientError, TimeoutError) as err:
            await self.close()
            raise TargetDown(_reason(err)) from err
        except BaseException:  # TargetDown, or the client went away (cancelled): nothing left open
            await self.close()
            raise
        self.session_id = self._endpoint

    async def _read(self, endpoint: asyncio.Future[str]) -> None:
        assert self._response is not None
        try:
            async for event in _events(self._response):
                if event.name == "endpoint" and not endpoint.done():
                    endpoint.set_result(urljoin(self.target.url, event.data))
                elif event.name == "message":
                    await self._dispatch(json.loads(event.data))
        except (aiohttp.ClientError, ValueError) as err:
            log.debug("MCP target %s: its SSE stream failed: %s", self.target.name, _reason(err))
        finally:
            self.closed.set()
            gone = TargetDown("its SSE stream ended")
            if not endpoint.done():
                endpoint.set_exception(gone)
            for future, _ in self._pending.values():
                if not future.done():
                    future.set_exception(gone)

    async def _dispatch(self, message: Message) -> None:
        if is_reply(message):
            pending = self._pending.get(key(message.get("id")))
            if pending is not None and not pending[0].done():
                pending[0].set_result(message)
            return
        sink = self._background
        if message.get("method") == "notifications/progress":
            sink = self._progress.get(key(message.get("params", {}).get("progressToken")), sink)
        elif self._pending:  # logging and requests to the client while a request runs: its stream
            sink = next(reversed(self._pending.values()))[1]
        if sink is not None:
            await sink(message)

    async def request(self, body: bytes, request_id: Any, sink: Sink, timeout: float = CALL_TIMEOUT) -> Message:
        if self.closed.is_set():
            raise TargetDown("its SSE stream ended")
        wanted = key(request_id)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[wanted] = (future, sink)
        token = json.loads(body).get("params", {}).get("_meta", {}).get("progressToken")
        if token is not None:
            self._progress[key(token)] = sink
        try:
            await self.send(body)
            return await asyncio.wait_for(future, timeout)
        except TimeoutError as err:
            raise TargetDown(_reason(err)) from err
        finally:
            self._pending.pop(wanted, None)
            if token is not None:
                self._progress.pop(key(token), None)

    async def send(self, body: bytes) -> None:
        try:
            async with self.http.post(self._endpoint, data=body, headers={"content-type": "application/json"},
                                      timeout=_timeout(INITIALIZE_TIMEOUT)) as resp:
                await resp.read()
                if resp.status == 404:
                    raise SessionGone(self.target.name)
                if resp.status >= 300:
                    raise TargetDown(f"HTTP {resp.status}")
        except (aiohttp.ClientError, TimeoutError) as err:
            raise TargetDown(_reason(err)) from err

    async def listen(self, sink: Sink) -> None:
        self._background = sink
        try:
            await self.closed.wait()
        finally:
            if self._background is sink:
                self._background = None

    async def close(self) -> None:
        self.closed.set()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._response is not None:
            self._response.close()


async def connect(http: aiohttp.ClientSession, target: Target, body: bytes, request_id: Any,
                  sink: Sink) -> tuple[Link, Message]:
    """A new session with the target: its link and its answer to the client's `initialize`."""
    link: Link
    if target.protocol == "SSE":
        sse = SSELink(http, target)
        await sse.open()
        try:
            answer = await sse.request(body, request_id, sink, INITIALIZE_TIMEOUT)
        except BaseException:
            await sse.close()
            raise
        link = sse
    else:
        streamable = StreamableLink(http, target)
        answer, streamable.session_id = await streamable.exchange(body, request_id, sink, INITIALIZE_TIMEOUT)
        link = streamable
    result = answer.get("result")
    link.version = str(result.get("protocolVersion", "")) if isinstance(result, dict) else ""
    return link, answer
