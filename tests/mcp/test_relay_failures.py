"""Targets that are down: reported (the answer's `_meta`, the log, the metrics), the others
keep serving, calls to the lost target's tools answer an error saying so."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx2
import pytest

import mcp
from lychgate.mcp.aggregate import UNAVAILABLE
from lychgate.mcp.config import BACKEND_HEADER, Target
from tests.mcp.conftest import BACKEND, TIMEOUT, client, relay_serving
from tests.mcp.servers import TOOLS, Server, running
from tests.mcp.test_relay_sessions import HEADERS, INIT


def closed_port_target(name: str) -> Target:
    from tests.harness import free_port

    return Target(name, "127.0.0.1", free_port(), "/mcp")


async def test_a_target_down_at_start_is_reported_and_the_other_serves(
        tmp_path: Path, pair: list[Server], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "lychgate.mcp")
    async with relay_serving(tmp_path, {BACKEND: [pair[1].target, closed_port_target("gone")]}) as relay, \
            client(relay.url()) as session:
        assert session.initialize_result is not None and session.initialize_result.meta == {UNAVAILABLE: ["gone"]}
        tools = await session.list_tools()
        assert tools.meta == {UNAVAILABLE: ["gone"]}
        assert {t.name for t in tools.tools} == {f"two_{t}" for t in TOOLS}
        with pytest.raises(mcp.MCPError) as raised:
            await session.call_tool("gone_whoami", {})
        assert "MCP target gone of Backend default/tools is unavailable" in raised.value.error.message
        async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
            scraped = (await http.get(f"http://127.0.0.1:{relay.metrics_port}/metrics")).text
    assert f'lychgate_mcp_target_up{{backend="{BACKEND}",target="gone"}} 0.0' in scraped
    assert any("target gone is unavailable" in r.getMessage() and BACKEND in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_target_dying_mid_session(tmp_path: Path, pair: list[Server], transport: str) -> None:
    with running(("dying", transport)) as (dying,):
        async with relay_serving(tmp_path, {BACKEND: [pair[0].target, dying.target]}) as relay, \
                client(relay.url()) as session:
            assert len((await session.list_tools()).tools) == 2 * len(TOOLS)
            dying.kill()
            tools = await session.list_tools()
            assert tools.meta == {UNAVAILABLE: ["dying"]}
            assert all(t.name.startswith("one_") for t in tools.tools) and len(tools.tools) == len(TOOLS)
            with pytest.raises(mcp.MCPError) as raised:
                await session.call_tool("dying_whoami", {})
            assert "MCP target dying of Backend default/tools is unavailable" in raised.value.error.message
            result = await session.call_tool("one_whoami", {})
            assert not result.is_error


async def test_every_target_down_fails_initialize(tmp_path: Path) -> None:
    async with relay_serving(tmp_path, {BACKEND: [closed_port_target("a"), closed_port_target("b")]}) as relay, \
            httpx2.AsyncClient(timeout=TIMEOUT) as http:
        answer = await http.post(relay.url(), json=INIT, headers={**HEADERS, BACKEND_HEADER: BACKEND})
        assert answer.status_code == 502
        err = answer.json()["error"]
        assert err["message"].startswith("no target of MCP Backend default/tools is available: a (")
        assert err["data"][UNAVAILABLE] == ["a", "b"]
