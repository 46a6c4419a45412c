"""Sessions through the relay: each client has its own session on every target, the session
id works on any relay (it carries the targets' ids), DELETE ends it everywhere, and ids the
relay did not hand out, or Backends it does not serve, are refused as the spec says."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx2
import pytest

from lychgate.mcp.config import BACKEND_HEADER, Target
from lychgate.mcp.sessions import SessionState
from tests.mcp.conftest import BACKEND, TIMEOUT, client, relay_serving
from tests.mcp.servers import TOOLS, Server, running, text

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
HEADERS = {BACKEND_HEADER: BACKEND, "accept": "application/json, text/event-stream"}




@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_two_clients_keep_their_own_target_sessions(tmp_path: Path, pair: list[Server], transport: str) -> None:
    async with relay_serving(tmp_path, {BACKEND: [s.target for s in pair]}) as relay:
        url = relay.url("/mcp" if transport == "http" else "/sse")
        async with client(url, transport=transport) as ann, client(url, transport=transport) as bob:
            for server in ("one", "two"):
                await asyncio.gather(ann.call_tool(f"{server}_remember", {"value": "ann's"}),
                                     bob.call_tool(f"{server}_remember", {"value": "bob's"}))
                assert text(await ann.call_tool(f"{server}_recall", {})) == "ann's"
                assert text(await bob.call_tool(f"{server}_recall", {})) == "bob's"


async def test_delete_ends_the_session_on_every_target(tmp_path: Path, pair: list[Server]) -> None:
    async with relay_serving(tmp_path, {BACKEND: [s.target for s in pair]}) as relay, \
            httpx2.AsyncClient(timeout=TIMEOUT) as http:
        init = await http.post(relay.url(), json=INIT, headers=HEADERS)
        assert init.status_code == 200, init.text
        assert init.json()["result"]["serverInfo"]["name"] == "lychgate"
        sid = init.headers["mcp-session-id"]
        state = SessionState.decode(sid)
        assert state is not None and set(state.targets) == {"one", "two"}
        own = state.targets["one"].session_id
        session = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        listed = await http.post(relay.url(), json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session)
        assert listed.status_code == 200 and len(listed.json()["result"]["tools"]) == 2 * len(TOOLS)

        assert (await http.delete(relay.url(), headers=session)).status_code == 200
        # Target one (Streamable HTTP) no longer knows its session; two's stream is closed.
        direct = await http.post(pair[0].url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                                 headers={"accept": HEADERS["accept"], "mcp-session-id": own,
                                          "mcp-protocol-version": "2025-11-25"})
        assert direct.status_code == 404
        again = await http.post(relay.url(), json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, headers=session)
        assert again.status_code == 404
        assert again.json()["error"]["message"] == "Session not found"


async def test_any_relay_serves_a_streamable_session(tmp_path: Path, pair: list[Server]) -> None:
    """The id is the state: a second relay (a replica, or this one restarted) carries on."""
    targets = {BACKEND: [pair[0].target]}
    async with relay_serving(tmp_path / "a", targets) as first, relay_serving(tmp_path / "b", targets) as second, \
            httpx2.AsyncClient(timeout=TIMEOUT) as http:
        sid = (await http.post(first.url(), json=INIT, headers=HEADERS)).headers["mcp-session-id"]
        session = {**HEADERS, "mcp-session-id": sid}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "remember", "arguments": {"value": "v"}}}
        assert (await http.post(first.url(), json=call, headers=session)).status_code == 200
        recall = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "recall", "arguments": {}}}
        answer = await http.post(second.url(), json=recall, headers=session)
        assert answer.status_code == 200
        assert answer.json()["result"]["content"][0]["text"] == "v"


async def test_unknown_sessions_and_backends_are_refused(tmp_path: Path, pair: list[Server]) -> None:
    async with relay_serving(tmp_path, {BACKEND: [pair[0].target]}) as relay, \
            httpx2.AsyncClient(timeout=TIMEOUT) as http:
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        forged = await http.post(relay.url(), json=ping, headers={**HEADERS, "mcp-session-id": "not-ours"})
        assert forged.status_code == 404 and forged.json()["error"]["code"] == -32001
        missing = await http.post(relay.url(), json=ping, headers=HEADERS)
        assert missing.status_code == 400
        other = await http.post(relay.url(), json=INIT, headers={**HEADERS, BACKEND_HEADER: "default/other"})
        assert other.status_code == 404
        assert "default/other" in other.json()["error"]["message"]
        # A session of one Backend is not a session of another.
        sid = (await http.post(relay.url(), json=INIT, headers=HEADERS)).headers["mcp-session-id"]
        relay.configure({BACKEND: [pair[0].target], "default/other": [pair[0].target]})
        for _ in range(100):
            probe = await http.post(relay.url(), json=INIT, headers={**HEADERS, BACKEND_HEADER: "default/other"})
            if probe.status_code == 200:
                break
            await asyncio.sleep(0.05)
        crossed = await http.post(relay.url(), json=ping,
                                  headers={**HEADERS, BACKEND_HEADER: "default/other", "mcp-session-id": sid})
        assert crossed.status_code == 404


async def test_a_service_target_spreads_sessions_over_its_replicas_and_keeps_each_on_one(tmp_path: Path) -> None:
    """A selector target with three ready endpoints (three server processes): new sessions
    open on each in turn; a session's calls stay on its replica, through another relay too."""
    with running(("r1", "http"), ("r2", "http"), ("r3", "http")) as replicas:
        target = Target("search", "127.0.0.1", replicas[0].port, "/mcp",
                        replicas=tuple(("127.0.0.1", r.port) for r in replicas))
        async with relay_serving(tmp_path / "a", {BACKEND: [target]}) as first, \
                relay_serving(tmp_path / "b", {BACKEND: [target]}) as second:
            owners = []
            for n in range(3):
                async with client(first.url()) as session:
                    owner = text(await session.call_tool("whoami", {}))
                    await session.call_tool("remember", {"value": f"client {n}"})
                    for _ in range(3):
                        assert text(await session.call_tool("whoami", {})) == owner
                    owners.append(owner)
            assert sorted(owners) == ["r1", "r2", "r3"]

            async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
                init = await http.post(first.url(), json=INIT, headers=HEADERS)
                sid = init.headers["mcp-session-id"]
                of_session = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
                call = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
                on_first = await http.post(first.url(), json={**call, "id": 2}, headers=of_session)
                on_second = await http.post(second.url(), json={**call, "id": 3}, headers=of_session)
                answers = [r.json()["result"]["content"][0]["text"] for r in (on_first, on_second)]
                assert answers[0] == answers[1]  # the session's replica, whichever relay serves it
