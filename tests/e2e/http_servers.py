"""Backends for the HTTPRoute feature tests: they record what reaches them.

`Recorder` is an HTTP/1.1 server (aiohttp) that keeps every request it gets
and answers like the echo backend; some paths make it misbehave on purpose:

- `?fail=<code>&times=<n>`: answer <code> the first n times that URL is asked;
- `?reset=<n>`: close the connection without an answer the first n times;
- `?delay=<ms>`: wait before answering;
- a WebSocket upgrade: echo its messages.

`H2cServer` speaks only HTTP/2 with prior knowledge (no HTTP/1.1, no
upgrade), so an answer from it proves the proxy used h2c upstream.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from aiohttp import WSMsgType, web


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, list[str]]


@dataclass
class Recorder:
    pod: str
    port: int = 0
    seen: list[Seen] = field(default_factory=list)
    hits: dict[str, int] = field(default_factory=dict)

    def paths(self) -> list[str]:
        return [s.path for s in self.seen]

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.StreamResponse:
            headers: dict[str, list[str]] = {}
            for key, value in request.headers.items():
                headers.setdefault(key.lower(), []).append(value)
            self.seen.append(Seen(request.method, request.path_qs, headers))
            count = self.hits[request.path_qs] = self.hits.get(request.path_qs, 0) + 1
            q = request.query
            if request.headers.get("upgrade", "").lower() == "websocket":
                return await self._websocket(request)
            if "fail" in q and count <= int(q.get("times", "1")):
                return web.Response(status=int(q["fail"]), text="failing on purpose\n")
            if "reset" in q and count <= int(q["reset"]):
                assert request.transport is not None
                request.transport.abort()  # no answer at all: the connection just dies
                return web.Response()
            if "delay" in q:
                await asyncio.sleep(int(q["delay"]) / 1000)
            return web.json_response({"pod": self.pod, "path": request.path_qs, "host": request.host,
                                      "method": request.method, "headers": headers, "hits": count})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        return app

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                await ws.send_str(msg.data)
            elif msg.type == WSMsgType.BINARY:
                await ws.send_bytes(msg.data)
        return ws


class _H2cProtocol(asyncio.Protocol):
    def __init__(self, pod: str) -> None:
        self.pod = pod
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.conn.initiate_connection()
        transport.write(self.conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:  # e.g. an HTTP/1.1 request
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                headers = {_text(k): _text(v) for k, v in event.headers}
                body = json.dumps({"pod": self.pod, "proto": "HTTP/2.0", "path": headers.get(":path"),
                                   "host": headers.get(":authority")}).encode()
                self.conn.send_headers(event.stream_id, [
                    (":status", "200"), ("content-type", "application/json"), ("content-length", str(len(body))),
                ])
                self.conn.send_data(event.stream_id, body, end_stream=True)
        self.transport.write(self.conn.data_to_send())


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def serve_h2c(pod: str, host: str, port: int) -> asyncio.Server:
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: _H2cProtocol(pod), host, port)
