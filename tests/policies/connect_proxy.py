"""An HTTP CONNECT proxy on loopback (asyncio): it answers `CONNECT authority` for the
names it knows, when the request carries the expected Proxy-Authorization, and
then carries bytes both ways; everything else gets 407 or 403. Every CONNECT it
sees is logged, so a test can tell traffic really went through it."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from tests.harness import free_port
from tests.policies.servers import Servers


@dataclass
class ConnectProxy:
    routes: dict[str, tuple[str, int]]  # authority -> real address
    authorization: str
    port: int = 0
    log: list[tuple[str, int]] = field(default_factory=list)  # (authority, status answered)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            lines = head.decode("latin-1").split("\r\n")
            method, authority, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
            status = (405 if method != "CONNECT" else 407 if headers.get("proxy-authorization") != self.authorization
                      else 403 if authority not in self.routes else 200)
            self.log.append((authority, status))
            if status != 200:
                writer.write(f"HTTP/1.1 {status} Refused\r\ncontent-length: 0\r\n\r\n".encode())
                await writer.drain()
                return
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.routes[authority])
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    with contextlib.suppress(OSError):
        dst.close()


def start(servers: Servers, routes: dict[str, tuple[str, int]], authorization: str) -> ConnectProxy:
    proxy = ConnectProxy(routes, authorization, port=free_port())

    async def go() -> asyncio.Server:
        return await asyncio.start_server(proxy.handle, "127.0.0.1", proxy.port)

    server = servers.loop.run(go())

    async def stop() -> None:
        server.close()

    servers._stops.append(stop)
    return proxy
