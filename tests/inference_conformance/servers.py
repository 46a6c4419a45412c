"""Local stand-ins for the Inference Extension conformance suite's pods.

- Model servers (upstream image echo-basic): one echo server per Pod and port, on
  the Pod's own loopback address (its Pod IP), answering like echo-basic
  (tests/conformance/echo.py). An `HTTP_PORT` speaks HTTP/1.1 only and an
  `H2C_PORT` HTTP/2 without TLS only (stricter than echo-basic, whose h2c port
  also takes HTTP/1.1: a request that reaches the wrong protocol fails), and
  `INCLUDE_HTTP_PORT_HEADER` adds the `httpPort` field the data-parallel test reads.
- Endpoint pickers (upstream image lwepp, the conformance picker): a real ext_proc
  picker (tests/picker.py) over its pool's endpoints. The request header
  `test-epp-endpoint-selection` ("IP" or "IP:port", comma-separated) narrows the
  candidates to those listed, in that order; when it lists none of the pool's
  endpoints, or is absent, every endpoint is a candidate. Candidates are picked
  round robin. On the response it adds `x-conformance-test-served-endpoint`: the
  endpoint the proxy reported in `envoy.lb` / `x-gateway-destination-endpoint-served`,
  or "fail: ..." when the proxy did not report it.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from dataclasses import dataclass
from typing import Any

from tests.conformance.echo import HttpEchoServer, Identity
from tests.picker import Picker

SELECTION_HEADER = "test-epp-endpoint-selection"
RESULT_HEADER = "x-conformance-test-served-endpoint"


@dataclass(frozen=True)
class PortIdentity(Identity):
    """echo-basic's identity, with the port in the answer when INCLUDE_HTTP_PORT_HEADER is set."""

    http_port: str = ""

    def context(self) -> dict[str, str]:
        out = super().context()
        if self.http_port:
            out["httpPort"] = self.http_port
        return out


class OneProtocolEcho(HttpEchoServer):
    """An echo port speaking one protocol: "h1" (HTTP/1.1) or "h2c"; the other is cut off."""

    def __init__(self, identity: Identity, protocol: str) -> None:
        super().__init__(identity)
        self.protocol = protocol

    async def _serve_h1(self, data: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        tls: dict[str, Any] | None) -> None:
        if self.protocol == "h1":
            await super()._serve_h1(data, reader, writer, tls)

    async def _serve_h2(self, data: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        tls: dict[str, Any] | None) -> None:
        if self.protocol == "h2c":
            await super()._serve_h2(data, reader, writer, tls)


class ModelServers:
    """The echo servers of every model-server Pod, in one background event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="model-servers")
        self.thread.start()
        self.servers: list[asyncio.AbstractServer] = []

    def serve(self, identity: Identity, ip: str, port: int, protocol: str) -> None:
        async def go() -> None:
            handler = OneProtocolEcho(identity, protocol).handle
            self.servers.append(await asyncio.start_server(handler, ip, port))

        asyncio.run_coroutine_threadsafe(go(), self.loop).result(10)

    def close(self) -> None:
        async def stop() -> None:
            for server in self.servers:
                server.close()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def parse_endpoint(token: str) -> tuple[str, str | None]:
    """("ip", "port") of "IP:port", ("ip", None) of "IP"; IPv6 with or without brackets."""
    token = token.strip()
    if token.startswith("["):
        ip, _, rest = token[1:].partition("]")
        return ip, rest.removeprefix(":") or None
    if token.count(":") == 1:
        ip, _, port = token.partition(":")
        return ip, port
    return token, None


class ConformancePicker(Picker):
    """The conformance endpoint picker of one InferencePool (see the module docstring)."""

    def __init__(self, pool: str, endpoints: list[str], host: str, port: int) -> None:
        super().__init__(answer="both", host=host, port=port)
        self.pool = pool  # "namespace/name"
        self.endpoints = endpoints  # "ip:port", in Pod order
        self._turn = itertools.count()

    def choose(self, headers: dict[str, str], body: bytes) -> list[str] | int:
        wanted = [t.strip() for t in headers.get(SELECTION_HEADER, "").split(",") if t.strip()]
        candidates: list[str] = []
        for ip, port in map(parse_endpoint, wanted):
            candidates += [ep for ep in self.endpoints if ep not in candidates
                           and parse_endpoint(ep)[0] == ip and port in (None, parse_endpoint(ep)[1])]
        candidates = candidates or self.endpoints
        if not candidates:
            return 503
        return [candidates[next(self._turn) % len(candidates)]]

    def response_headers(self, served: str, picked: str) -> list[tuple[str, str]]:
        report = served or "fail: missing destination endpoint served metadata"
        return [(RESULT_HEADER, report), ("x-went-into-resp-headers", "true")]
