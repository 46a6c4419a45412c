"""The MCP gateway: what Envoy and the MCP relay add to a tool call.

One `lychgate run`, one Gateway, an MCP Backend of three targets, SDK servers
(tests/mcp/servers.py) in processes of their own, one per target transport: Streamable
HTTP answering with event streams (the SDK's default), Streamable HTTP answering JSON,
and HTTP+SSE. The official SDK's client (an initialized `mcp.ClientSession`) calls the
tool `whoami` on each server directly (over the server's own transport) and, as
`<target>_whoami`, through the Gateway (Streamable HTTP), interleaved in rounds; time
from the call to its result. Added = through the Gateway minus direct, at p50 and p99.
The relay's CPU per call comes from /proc (user + system time over the measured calls).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

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
from tests.mcp.servers import Server, running, sdk_client

ADDR = "127.0.55.10"


def _manifests(gateway_port: int, stream: int, json_: int, sse: int) -> str:
    return f"""\
{gateway_yaml("gw", ADDR, gateway_port)}---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: Backend
metadata: {{name: tools, namespace: default}}
spec:
  mcp:
    targets:
      - {{name: stream, static: {{host: 127.0.0.1, port: {stream}}}}}
      - {{name: json, static: {{host: 127.0.0.1, port: {json_}}}}}
      - {{name: sse, static: {{host: 127.0.0.1, port: {sse}, protocol: SSE}}}}
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




async def _calls(client: mcp.ClientSession, tool: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        result = await client.call_tool(tool, {})
        out.append((time.perf_counter() - t0) * 1000)
        assert not result.is_error
    return out


async def _measure(server: Server, gateway_url: str, relay_pid: int, rounds: int, per_round: int,
                   warmup: int) -> dict[str, Any]:
    direct_transport = "sse" if server.transport == "sse" else "http"
    async with sdk_client(server.url, direct_transport) as direct, sdk_client(gateway_url) as via:
        tool = f"{server.name}_whoami"
        await _calls(direct, "whoami", warmup)
        await _calls(via, tool, warmup)
        d: list[float] = []
        g: list[float] = []
        cpu = 0.0
        for _ in range(rounds):
            d += await _calls(direct, "whoami", per_round)
            c0 = cpu_seconds(relay_pid)
            g += await _calls(via, tool, per_round)
            cpu += cpu_seconds(relay_pid) - c0
    return {"direct": d, "gateway": g, "relay_cpu_ms": cpu * 1000 / len(g)}


def run(opts: argparse.Namespace) -> dict[str, Any]:
    rounds, per_round, warmup = 4, (50 if opts.quick else 150), 30
    with running(("stream", "http"), ("json", "json"), ("sse", "sse")) as servers, lychgate_process("mcp") as lg:
        gateway_port = free_port_on(ADDR)
        lg.write("mcp.yaml", _manifests(gateway_port, *(s.port for s in servers)))
        lg.start()
        url = f"http://{ADDR}:{gateway_port}/mcp"

        async def ready() -> None:
            deadline = time.monotonic() + 60
            while True:
                try:
                    async with sdk_client(url) as client:
                        await client.call_tool("stream_whoami", {})
                        return
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.5)

        asyncio.run(ready())
        pid = json.loads((lg.state / "mcp" / "relay.json").read_text())["pid"]
        results = {s.name: asyncio.run(_measure(s, url, pid, rounds, per_round, warmup)) for s in servers}
    rows, raw = [], {}
    for name, label in (("stream", "Streamable HTTP, event-stream answers"), ("json", "Streamable HTTP, JSON answers"),
                        ("sse", "HTTP+SSE")):
        d, g = results[name]["direct"], results[name]["gateway"]
        added50, added99 = percentile(g, 50) - percentile(d, 50), percentile(g, 99) - percentile(d, 99)
        rows.append([label, f"{percentile(d, 50):.2f}", f"{percentile(g, 50):.2f}", f"{added50:.2f}",
                     f"{added99:.2f}", f"{results[name]['relay_cpu_ms']:.2f}"])
        raw[name] = {"added_p50": added50, "added_p99": added99, "relay_cpu_ms": results[name]["relay_cpu_ms"]}
        log(f"mcp: {label}: tools/call added p50 {added50:.2f} ms, p99 {added99:.2f} ms; relay CPU "
            f"{results[name]['relay_cpu_ms']:.2f} ms/call")
    worst = max(r["added_p50"] for r in raw.values())
    return {
        "name": "mcp",
        "title": "MCP gateway: latency added to a tool call by Envoy and the MCP relay",
        "description": (__doc__ or "").split("\n\n", 1)[1].replace("\n", " ").strip(),
        "tables": [{"title": f"ms ({rounds * per_round} tools/call each way per target, SDK client)",
                    "columns": ["target's transport", "p50 direct", "p50 through the Gateway", "added p50",
                                "added p99", "relay CPU per call (ms)"], "rows": rows}],
        "checks": [check("MCP gateway: p50 added to a tools/call (worst target transport)", worst, 2.0, "ms")],
        "raw": raw,
    }
