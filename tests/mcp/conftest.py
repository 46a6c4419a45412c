"""Fixtures of the MCP relay tests: SDK servers in subprocesses, the relay served in the
test's loop (`serve`, as `lychgate mcp-relay` runs it), and SDK clients against it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import mcp
from lychgate.mcp.config import BACKEND_HEADER, Backend, MCPConfig, Target
from lychgate.mcp.relay import serve
from tests.harness import free_port
from tests.mcp.servers import TIMEOUT, Server, running, sdk_client

BACKEND = "default/tools"


@pytest.fixture(scope="module")
def pair() -> Iterator[list[Server]]:
    """`one` on Streamable HTTP, `two` on HTTP+SSE."""
    with running(("one", "http"), ("two", "sse")) as servers:
        yield servers


def config(backends: dict[str, list[Target]]) -> str:
    return MCPConfig({b: Backend(b, tuple(targets)) for b, targets in backends.items()}).to_json()


@dataclass
class Relay:
    port: int
    metrics_port: int
    config_file: Path

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def configure(self, backends: dict[str, list[Target]]) -> None:
        self.config_file.write_text(config(backends))


async def _listening(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        assert time.monotonic() < deadline, "the relay did not listen"
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def relay_serving(tmp_path: Path, backends: dict[str, list[Target]],
                        idle_timeout: float = 1800.0) -> AsyncIterator[Relay]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    relay = Relay(free_port(), free_port(), tmp_path / "mcp.json")
    relay.configure(backends)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(f"127.0.0.1:{relay.port}", relay.config_file, relay.metrics_port, stop,
                                     idle_timeout=idle_timeout))
    try:
        await _listening(relay.port)
        yield relay
    finally:
        stop.set()
        await asyncio.wait_for(task, TIMEOUT)


def client(url: str, backend: str = BACKEND, transport: str = "http",
           **callbacks: Any) -> contextlib.AbstractAsyncContextManager[mcp.ClientSession]:
    """An initialized SDK client session through the relay (transport: http or sse)."""
    return sdk_client(url, transport, {BACKEND_HEADER: backend}, **callbacks)
