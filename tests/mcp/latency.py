"""The relay's added latency per tools/call, measured with the SDK's client:
`python -m tests.mcp.latency [ROUNDS]`.

One SDK server per target transport (Streamable HTTP answering with event streams, the
SDK's default; Streamable HTTP answering JSON; HTTP+SSE), the relay in a process of its own
(`serve`, as `lychgate mcp-relay` runs it) with one Backend per server, and one client
session direct and one through the relay for each. Calls alternate between the two (so
both see the same machine load) and the median of each is printed. Not a test: figures
depend on the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

import mcp
from lychgate.mcp.config import BACKEND_HEADER, Backend, MCPConfig
from tests.harness import free_port
from tests.mcp.servers import Server, running, wait_ready

RELAY = """
import asyncio, logging, sys
from pathlib import Path
from lychgate.mcp.relay import serve
logging.basicConfig(level=logging.WARNING)
asyncio.run(serve(sys.argv[1], Path(sys.argv[2])))
"""


@contextlib.asynccontextmanager
async def session(url: str, headers: dict[str, str], sse: bool) -> AsyncIterator[mcp.ClientSession]:
    async with contextlib.AsyncExitStack() as stack:
        if sse:
            read, write = await stack.enter_async_context(sse_client(url, headers=headers))
        else:
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=30))
            read, write = await stack.enter_async_context(streamable_http_client(url, http_client=http))
        client = await stack.enter_async_context(mcp.ClientSession(read, write))
        await client.initialize()
        yield client


async def compare(direct: mcp.ClientSession, relayed: mcp.ClientSession, rounds: int) -> tuple[float, float]:
    times: dict[str, list[float]] = {"direct": [], "relay": []}
    for _ in range(20):  # warm up both paths (connections, caches)
        await direct.call_tool("whoami", {})
        await relayed.call_tool("whoami", {})
    for i in range(rounds):
        pair = [("direct", direct), ("relay", relayed)]
        for name, client in pair if i % 2 else reversed(pair):
            start = time.perf_counter()
            await client.call_tool("whoami", {})
            times[name].append(time.perf_counter() - start)
    return statistics.median(times["direct"]) * 1e3, statistics.median(times["relay"]) * 1e3


async def main(rounds: int) -> None:
    with running(("http", "http"), ("json", "json"), ("sse", "sse")) as servers, \
            tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "mcp.json"
        config.write_text(MCPConfig({f"default/{s.name}": Backend(f"default/{s.name}", (s.target,))
                                     for s in servers}).to_json())
        port = free_port()
        relay = subprocess.Popen([sys.executable, "-c", RELAY, f"127.0.0.1:{port}", str(config)])
        try:
            wait_ready([Server("relay", "http", port, relay)])
            for server in servers:
                sse = server.transport == "sse"
                async with session(server.url, {}, sse) as direct, \
                        session(f"http://127.0.0.1:{port}/mcp", {BACKEND_HEADER: f"default/{server.name}"},
                                False) as relayed:
                    d, r = await compare(direct, relayed, rounds)
                print(f"target {server.name:5s}: tools/call p50 direct {d:.2f} ms, through the relay {r:.2f} ms "
                      f"(+{r - d:.2f} ms)", flush=True)
        finally:
            relay.terminate()
            relay.wait(10)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
