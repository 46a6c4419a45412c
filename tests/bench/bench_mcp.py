"""The MCP gateway: what Envoy and the MCP relay add to a tool call.

One `lychgate run`, one Gateway, an MCP Backend of two targets (both SDK servers,
tests/mcp/servers.py, Streamable HTTP, in processes of their own). The official SDK's
client (an initialized `mcp.ClientSession` over `streamable_http_client`) calls the
tool `whoami` on one server directly and, as `one_whoami`, through the Gateway,
interleaved in rounds; time from the call to its result. The SDK client and server
cost the same both ways, so added = through the Gateway minus direct, at p50 and p99.
The relay's CPU per call comes from /proc (user + system time over the measured calls).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client

import mcp
from tests.bench.common import (
    check,
    cpu_seconds,
    free_port_on,
    gateway_yaml,
    log,
    lychgate_process,
    percentile,
)
from tests.mcp.servers import running

ADDR = "127.0.55.10"


def _manifests(gateway_port: int, one: int, two: int) -> str:
    return f"""\
{gateway_yaml("gw", ADDR, gateway_port)}---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: Backend
metadata: {{name: tools, namespace: default}}
spec:
  mcp:
    targets:
      - {{name: one, static: {{host: 127.0.0.1, port: {one}}}}}
      - {{name: two, static: {{host: 127.0.0.1, port: {two}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: mcp, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
    - matches: [{{path: {{type: PathPrefix, value: /mcp}}}}]
      backendRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: tools}}]
"""


@contextlib.asynccontextmanager
async def _session(url: str) -> AsyncIterator[mcp.ClientSession]:
    async with contextlib.AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
        read, write = await stack.enter_async_context(streamable_http_client(url, http_client=http))
        client = await stack.enter_async_context(mcp.ClientSession(read, write))
        await client.initialize()
        yield client


async def _calls(client: mcp.ClientSession, tool: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        result = await client.call_tool(tool, {})
        out.append((time.perf_counter() - t0) * 1000)
        assert not result.is_error
    return out


async def _measure(direct_url: str, gateway_url: str, relay_pid: int, rounds: int, per_round: int,
                   warmup: int) -> dict[str, Any]:
    async with _session(direct_url) as direct, _session(gateway_url) as via:
        await _calls(direct, "whoami", warmup)
        await _calls(via, "one_whoami", warmup)
        d: list[float] = []
        g: list[float] = []
        cpu = 0.0
        for _ in range(rounds):
            d += await _calls(direct, "whoami", per_round)
            c0 = cpu_seconds(relay_pid)
            g += await _calls(via, "one_whoami", per_round)
            cpu += cpu_seconds(relay_pid) - c0
    return {"direct": d, "gateway": g, "relay_cpu_ms": cpu * 1000 / len(g)}


def run(opts: argparse.Namespace) -> dict[str, Any]:
    rounds, per_round, warmup = 4, (50 if opts.quick else 200), 30
    with running(("one", "http"), ("two", "http")) as (one, two), lychgate_process("mcp") as lg:
        gateway_port = free_port_on(ADDR)
        lg.write("mcp.yaml", _manifests(gateway_port, one.port, two.port))
        lg.start()
        url = f"http://{ADDR}:{gateway_port}/mcp"
        relay = lg.state / "mcp" / "relay.json"

        async def ready() -> None:
            deadline = time.monotonic() + 60
            while True:
                try:
                    async with _session(url) as client:
                        await client.call_tool("one_whoami", {})
                        return
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.5)

        asyncio.run(ready())
        pid = json.loads(relay.read_text())["pid"]
        result = asyncio.run(_measure(one.url, url, pid, rounds, per_round, warmup))
    d, g = result["direct"], result["gateway"]
    added50 = percentile(g, 50) - percentile(d, 50)
    added99 = percentile(g, 99) - percentile(d, 99)
    log(f"mcp: tools/call added p50 {added50:.2f} ms, p99 {added99:.2f} ms; relay CPU "
        f"{result['relay_cpu_ms']:.2f} ms/call")
    rows = [["direct (SDK client to the server)", f"{percentile(d, 50):.2f}", f"{percentile(d, 99):.2f}", ""],
            ["through the Gateway (Envoy + relay)", f"{percentile(g, 50):.2f}", f"{percentile(g, 99):.2f}",
             f"{result['relay_cpu_ms']:.2f}"],
            ["added", f"{added50:.2f}", f"{added99:.2f}", ""]]
    return {
        "name": "mcp",
        "title": "MCP gateway: latency added to a tool call by Envoy and the MCP relay",
        "description": (__doc__ or "").split("\n\n", 1)[1].replace("\n", " ").strip(),
        "tables": [{"title": f"ms ({len(g)} tools/call each way, SDK client)",
                    "columns": ["tools/call", "p50 (ms)", "p99 (ms)", "relay CPU per call (ms)"], "rows": rows}],
        "checks": [check("MCP gateway: p50 added to a tools/call", added50, 2.0, "ms")],
        "raw": {"added_p50": added50, "added_p99": added99, "relay_cpu_ms": result["relay_cpu_ms"]},
    }
