"""One MCP server made of two: an SDK server on Streamable HTTP (`one`) and one on HTTP+SSE
(`two`) behind the relay, used with the SDK's clients over both transports."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest

import mcp
from mcp import types
from tests.mcp.conftest import BACKEND, TIMEOUT, client, relay_serving
from tests.mcp.servers import TOOLS, Server, text


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_tools_of_both_servers_are_listed_and_called(tmp_path: Path, pair: list[Server], transport: str) -> None:
    async with relay_serving(tmp_path, {BACKEND: [s.target for s in pair]}) as relay, \
            client(relay.url("/mcp" if transport == "http" else "/mcp/sse"), transport=transport) as session:
        assert session.initialize_result is not None
        assert session.initialize_result.server_info.name == "lychgate"
        assert session.initialize_result.capabilities.tools is not None
        names = {t.name for t in (await session.list_tools()).tools}
        assert names == {f"{server}_{tool}" for server in ("one", "two") for tool in TOOLS}
        assert text(await session.call_tool("one_whoami", {})) == "one"
        assert text(await session.call_tool("two_whoami", {})) == "two"
        assert (await session.call_tool("two_add", {"a": 2, "b": 3})).structured_content == {"result": 5}


async def test_one_target_keeps_its_names(tmp_path: Path, pair: list[Server]) -> None:
    async with relay_serving(tmp_path, {BACKEND: [pair[1].target]}) as relay, client(relay.url()) as session:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        assert text(await session.call_tool("whoami", {})) == "two"
        assert [p.name for p in (await session.list_prompts()).prompts] == ["greet"]


async def test_prompts_and_resources(tmp_path: Path, pair: list[Server]) -> None:
    async with relay_serving(tmp_path, {BACKEND: [s.target for s in pair]}) as relay, \
            client(relay.url()) as session:
        assert {p.name for p in (await session.list_prompts()).prompts} == {"one_greet", "two_greet"}
        prompt = await session.get_prompt("two_greet", {"who": "ann"})
        content = prompt.messages[0].content
        assert isinstance(content, types.TextContent) and content.text == "two greets ann"
        resources = (await session.list_resources()).resources
        assert {(r.name, str(r.uri)) for r in resources} == {
            ("one_readme", "res://one/readme"), ("two_readme", "res://two/readme")}
        templates = (await session.list_resource_templates()).resource_templates
        assert {t.name for t in templates} == {"one_item", "two_item"}
        for server in ("one", "two"):
            read = await session.read_resource(f"res://{server}/readme")
            assert isinstance(read.contents[0], types.TextResourceContents)
            assert read.contents[0].text == f"readme of {server}"
        # A URI no list named (a template's): each target is asked in turn.
        item = await session.read_resource("res://two/item/7")
        assert isinstance(item.contents[0], types.TextResourceContents) and item.contents[0].text == "two item 7"


@pytest.mark.parametrize("tool", ["one_add", "two_add"])
async def test_progress_and_logs_reach_the_client(tmp_path: Path, pair: list[Server], tool: str) -> None:
    progress: list[tuple[float, str | None]] = []
    logs: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(str(params.data))

    server = tool.split("_")[0]
    async with relay_serving(tmp_path, {BACKEND: [s.target for s in pair]}) as relay, \
            client(relay.url(), logging_callback=on_log) as session:
        result = await session.call_tool(tool, {"a": 1, "b": 2}, progress_callback=on_progress)
        assert result.structured_content == {"result": 3}
    assert progress == [(1.0, f"{server} half way")]
    assert logs == [f"{server} adds 1 and 2"]


async def test_unknown_tool_and_failing_tool(tmp_path: Path, pair: list[Server]) -> None:
    async with relay_serving(tmp_path, {BACKEND: [s.target for s in pair]}) as relay, \
            client(relay.url()) as session:
        with pytest.raises(mcp.MCPError) as raised:
            await session.call_tool("three_whoami", {})
        assert raised.value.error.code == -32602
        assert "three_whoami" in raised.value.error.message
        failed = await session.call_tool("one_fail", {})
        assert failed.is_error and text(failed) == "Error executing tool fail"
        assert (await session.send_ping()) is not None


@pytest.mark.parametrize(("transport", "server"), [("http", "one"), ("http", "two"), ("sse", "one"), ("sse", "two")])
async def test_notifications_outside_requests_reach_the_client(
        tmp_path: Path, pair: list[Server], transport: str, server: str) -> None:
    """On the session's GET stream (Streamable HTTP) or the SSE stream (HTTP+SSE)."""
    changed = asyncio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with relay_serving(tmp_path, {BACKEND: [s.target for s in pair]}) as relay, \
            client(relay.url("/mcp" if transport == "http" else "/sse"), transport=transport,
                   message_handler=on_message) as session:
        assert text(await session.call_tool(f"{server}_later", {})) == "soon"
        await asyncio.wait_for(changed.wait(), TIMEOUT)


@pytest.mark.parametrize("server", ["one", "two"])
async def test_a_cancelled_call_is_cancelled_on_its_target(tmp_path: Path, pair: list[Server], server: str) -> None:
    async with relay_serving(tmp_path, {BACKEND: [s.target for s in pair]}) as relay, \
            client(relay.url()) as session:
        before = int(text(await session.call_tool(f"{server}_cancellations", {})))
        with anyio.move_on_after(0.5):
            await session.call_tool(f"{server}_slow", {"seconds": 30})
        for _ in range(100):
            if int(text(await session.call_tool(f"{server}_cancellations", {}))) > before:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"the slow call on {server} was not cancelled")


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_targets_request_to_the_client_is_answered(tmp_path: Path, pair: list[Server], transport: str) -> None:
    async def list_roots(context: object) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    async with relay_serving(tmp_path, {BACKEND: [s.target for s in pair]}) as relay, \
            client(relay.url("/mcp" if transport == "http" else "/sse"), transport=transport,
                   list_roots_callback=list_roots) as session:
        for server in ("one", "two"):
            assert text(await session.call_tool(f"{server}_roots", {})) == "file:///work"
