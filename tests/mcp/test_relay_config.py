"""The relay follows its config file (sessions of unchanged Backends go on), closes SSE
target connections left idle, and counts tool calls for Prometheus."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx2
import pytest

import mcp
from lychgate.mcp.config import BACKEND_HEADER
from tests.mcp.conftest import BACKEND, TIMEOUT, client, relay_serving
from tests.mcp.servers import Server
from tests.mcp.test_relay_sessions import HEADERS, INIT, text


async def test_a_reload_keeps_the_sessions_of_unchanged_backends(tmp_path: Path, pair: list[Server]) -> None:
    async with relay_serving(tmp_path, {BACKEND: [s.target for s in pair]}) as relay, \
            client(relay.url()) as session, httpx2.AsyncClient(timeout=TIMEOUT) as http:
        await session.call_tool("two_remember", {"value": "kept"})
        relay.configure({BACKEND: [s.target for s in pair], "default/more": [pair[0].target]})
        for _ in range(100):  # until the relay serves the new Backend
            more = await http.post(relay.url(), json=INIT, headers={**HEADERS, BACKEND_HEADER: "default/more"})
            if more.status_code == 200:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the relay did not load the new config")
        assert text(await session.call_tool("two_recall", {})) == "kept"  # the SSE target's connection too

        relay.configure({"default/more": [pair[0].target]})  # the client's Backend is gone
        for _ in range(100):
            try:
                await session.list_tools()
            except mcp.MCPError as err:
                assert err.error.message == f"MCP Backend {BACKEND} is not served here"  # a 404
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the relay still serves a Backend removed from its config")


async def test_idle_sse_target_connections_are_closed(tmp_path: Path, pair: list[Server]) -> None:
    async with relay_serving(tmp_path, {BACKEND: [pair[1].target]}, idle_timeout=0.3) as relay, \
            httpx2.AsyncClient(timeout=TIMEOUT) as http:
        sid = (await http.post(relay.url(), json=INIT, headers=HEADERS)).headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert (await http.post(relay.url(), json=ping, headers={**HEADERS, "mcp-session-id": sid})).status_code == 200
        await asyncio.sleep(0.8)
        assert (await http.post(relay.url(), json=ping, headers={**HEADERS, "mcp-session-id": sid})).status_code == 404


def sample(scraped: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in scraped.splitlines():
        match = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if match and ",".join(sorted(match.group(1).split(","))) == wanted:
            return float(match.group(2))
    return 0.0


@pytest.mark.parametrize("server", ["one", "two"])
async def test_tool_calls_are_counted(tmp_path: Path, pair: list[Server], server: str) -> None:
    backend = f"default/counted-{server}"  # series of their own (the registry is the process's)
    async with relay_serving(tmp_path, {backend: [s.target for s in pair]}) as relay, \
            client(relay.url(), backend=backend) as session, httpx2.AsyncClient(timeout=TIMEOUT) as http:
        await session.call_tool(f"{server}_whoami", {})
        await session.call_tool(f"{server}_whoami", {})
        await session.call_tool(f"{server}_fail", {})
        scraped = (await http.get(f"http://127.0.0.1:{relay.metrics_port}/metrics")).text
    labels = {"backend": backend, "target": server}
    assert sample(scraped, "lychgate_mcp_tool_calls_total", **labels, tool="whoami", outcome="ok") == 2
    assert sample(scraped, "lychgate_mcp_tool_calls_total", **labels, tool="fail", outcome="error") == 1
    assert sample(scraped, "lychgate_mcp_tool_call_seconds_count", **labels, tool="whoami") == 2
    assert sample(scraped, "lychgate_mcp_requests_total", backend=backend, method="tools/call") == 3
    assert sample(scraped, "lychgate_mcp_target_up", **labels) == 1
