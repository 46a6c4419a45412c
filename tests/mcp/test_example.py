"""docs/mcp.md's "Try it", as written: examples/mcp served by `lychgate run`, the two
example servers (examples/mcp/server.py, one on each transport) and the SDK's client doing
what the page shows (only the servers' ports are picked free, in case 3101 and 3102 are
taken)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import mcp
from tests.harness import Lychgate, free_port, wait_for
from tests.mcp.servers import initializes

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp"


@pytest.fixture
def servers() -> Iterator[dict[str, int]]:
    ports = {"time": free_port(), "notes": free_port()}
    procs = [subprocess.Popen([sys.executable, str(EXAMPLE / "server.py"), "--name", name, "--port", str(port),
                               *(["--transport", "sse"] if name == "notes" else [])],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for name, port in ports.items()]
    try:
        for port in ports.values():
            wait_for(lambda p=port: _listening(p), 20, f"the example server on {port}")
        yield ports
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
    except OSError:
        return False
    return True


async def test_the_documented_example(lychgate: Lychgate, servers: dict[str, int]) -> None:
    for path in EXAMPLE.glob("*.yaml"):
        lychgate.write(path.name, path.read_text().replace("port: 3101", f"port: {servers['time']}")
                       .replace("port: 3102", f"port: {servers['notes']}"))
    lychgate.start()
    url = f"http://{lychgate.address('mcp')}:8080/mcp"
    wait_for(lambda: initializes(url), 30, "the example's Gateway to answer initialize")

    async with streamable_http_client(url) as (read, write, *_), mcp.ClientSession(read, write) as client:
        await client.initialize()
        assert [t.name for t in (await client.list_tools()).tools] == [
            "time_whoami", "time_add", "time_set_alarm", "notes_whoami", "notes_add", "notes_set_alarm"]
        assert (await client.call_tool("notes_add", {"a": 2, "b": 3})).content[0].text == "5"  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="RBAC: access denied"):
            await client.call_tool("time_set_alarm", {"at": "7:00"})

    async with sse_client(f"{url}/sse") as (read, write), mcp.ClientSession(read, write) as client:
        await client.initialize()
        assert (await client.call_tool("time_whoami", {})).content[0].text == "time"  # type: ignore[union-attr]
