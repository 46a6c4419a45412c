"""Real MCP servers for the relay's tests, written with the official SDK (MCPServer), run as
`python -m tests.mcp.servers NAME TRANSPORT PORT` (TRANSPORT: http, json (answers JSON
rather than event streams) or sse), so a test can kill one as a crash would.

Every server has the tools `whoami` (its name), `add` (reports progress and logs before
answering), `slow` and `cancellations` (how many slow calls were cancelled), `later` (a
notification outside any request), `roots` (asks the client), `fail` (a tool error), `remember`/`recall` (a value
kept per MCP session), a prompt `greet`, a resource `res://NAME/readme` and a template
`res://NAME/item/{item}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer

import mcp
from lychgate.mcp.config import Target
from mcp import types
from tests.harness import free_port

warnings.filterwarnings("ignore", category=DeprecationWarning)

TOOLS = {"whoami", "add", "slow", "cancellations", "later", "roots", "fail", "remember", "recall"}


def main(name: str, transport: str, port: int) -> None:
    import uvicorn

    app = MCPServer(name, instructions=f"the {name} server")

    @app.tool()
    def whoami() -> str:
        """The server's name."""
        return name

    @app.tool()
    async def add(a: int, b: int, ctx: Context) -> int:
        """a + b, reporting progress on the way."""
        await ctx.report_progress(1, 2, f"{name} half way")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await ctx.info(f"{name} adds {a} and {b}")
        return a + b

    cancelled: list[float] = []
    background: set[asyncio.Task[None]] = set()

    @app.tool()
    async def slow(seconds: float) -> str:
        """Answers after `seconds` (unless cancelled: counted)."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cancelled.append(seconds)
            raise
        return "done"

    @app.tool()
    def cancellations() -> int:
        """How many `slow` calls were cancelled."""
        return len(cancelled)

    @app.tool()
    async def later(ctx: Context) -> str:
        """Says its tool list changed, shortly after answering (outside any request)."""
        session = ctx.request_context.session

        async def announce() -> None:
            await asyncio.sleep(0.2)
            await session.send_tool_list_changed()

        task = asyncio.create_task(announce())
        background.add(task)
        task.add_done_callback(background.discard)
        return "soon"

    @app.tool()
    def fail() -> str:
        """Always fails."""
        raise ValueError(f"{name} failed on purpose")

    memory: dict[str, str] = {}

    def session_of(ctx: Context) -> str:  # the transport's session: the header, or SSE's query
        request: Any = ctx.request_context.request
        return str(request.headers.get("mcp-session-id") or request.query_params.get("session_id"))

    @app.tool()
    def remember(value: str, ctx: Context) -> str:
        """Keep a value for this session."""
        memory[session_of(ctx)] = value
        return value

    @app.tool()
    def recall(ctx: Context) -> str:
        """The value this session kept."""
        return memory.get(session_of(ctx), "")

    @app.tool()
    async def roots(ctx: Context) -> str:
        """The client's roots, asked of the client."""
        listed = await ctx.request_context.session.list_roots()
        return ",".join(str(root.uri) for root in listed.roots)

    @app.prompt()
    def greet(who: str) -> str:
        return f"{name} greets {who}"

    @app.resource(f"res://{name}/readme")
    def readme() -> str:
        return f"readme of {name}"

    @app.resource(f"res://{name}/item/{{item}}")
    def item(item: str) -> str:
        return f"{name} item {item}"

    asgi = app.sse_app() if transport == "sse" else app.streamable_http_app(json_response=transport == "json")
    uvicorn.run(asgi, host="127.0.0.1", port=port, log_level="error")


@dataclass
class Server:
    name: str
    transport: str
    port: int
    process: subprocess.Popen[bytes]

    @property
    def target(self) -> Target:
        sse = self.transport == "sse"
        return Target(self.name, "127.0.0.1", self.port, "/sse" if sse else "/mcp", "SSE" if sse else "StreamableHTTP")

    @property
    def url(self) -> str:
        return self.target.url

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


def start(name: str, transport: str) -> Server:
    port = free_port()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    process = subprocess.Popen([sys.executable, "-m", "tests.mcp.servers", name, transport, str(port)],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return Server(name, transport, port, process)


def wait_ready(servers: list[Server], timeout: float = 30.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    for server in servers:
        while True:
            assert server.process.poll() is None, f"MCP server {server.name} exited"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", server.port), 0.5):
                break
            assert time.monotonic() < deadline, f"MCP server {server.name} did not listen in {timeout}s"
            time.sleep(0.05)


@contextlib.contextmanager
def running(*specs: tuple[str, str]) -> Iterator[list[Server]]:
    """Servers (name, transport) started together, killed at the end."""
    servers = [start(name, transport) for name, transport in specs]
    try:
        wait_ready(servers)
        yield servers
    finally:
        for server in servers:
            server.kill()



def initializes(url: str) -> bool:
    """Whether an MCP endpoint (a Gateway's) answers a raw initialize: routes and relay are up."""
    try:
        r = httpx.post(url, timeout=5, headers={"accept": "application/json, text/event-stream"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    except httpx.HTTPError:
        return False
    return r.status_code == 200


TIMEOUT = 15.0


@contextlib.asynccontextmanager
async def sdk_client(url: str, transport: str = "http", headers: dict[str, str] | None = None,
                     **callbacks: Any) -> AsyncIterator[mcp.ClientSession]:
    """An initialized session of the SDK's own client (transport: http or sse), as an MCP
    user's program opens one, against a server, the relay or a Gateway."""
    async with contextlib.AsyncExitStack() as stack:
        if transport == "sse":
            read, write = await stack.enter_async_context(sse_client(url, headers=headers, timeout=TIMEOUT))
        else:
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers or {}, timeout=TIMEOUT))
            read, write = await stack.enter_async_context(streamable_http_client(url, http_client=http))
        session = await stack.enter_async_context(mcp.ClientSession(read, write, read_timeout_seconds=TIMEOUT,
                                                                    **callbacks))
        await session.initialize()
        yield session


def text(result: types.CallToolResult) -> str:
    """A tool's answer: its text blocks."""
    assert all(isinstance(block, types.TextContent) for block in result.content), result.content
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
