"""The relay's Prometheus metrics, served on its metrics port (`serve(metrics_port=...)`).

Tools are labelled with the target's own name for them (not the prefixed name the
client sees) and the target's name, so a tool keeps its series when targets are added.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)
TOOL_CALLS = Counter("lychgate_mcp_tool_calls", "tools/call requests, by outcome: ok, error (the tool's "
                     "isError or a JSON-RPC error), unavailable (the target was down)",
                     ("backend", "target", "tool", "outcome"), registry=REGISTRY)
TOOL_SECONDS = Histogram("lychgate_mcp_tool_call_seconds", "Time from the relay's tools/call to the target's answer",
                         ("backend", "target", "tool"), registry=REGISTRY,
                         buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300))
REQUESTS = Counter("lychgate_mcp_requests", "JSON-RPC messages from clients, by method",
                   ("backend", "method"), registry=REGISTRY)
TARGET_UP = Gauge("lychgate_mcp_target_up", "1 when the target answered the last request sent to it, 0 when it was down",
                  ("backend", "target"), registry=REGISTRY)
TARGET_FAILURES = Counter("lychgate_mcp_target_failures", "Requests a target failed to answer (down, 5xx, timeout)",
                          ("backend", "target"), registry=REGISTRY)


def up(backend: str, target: str) -> None:
    TARGET_UP.labels(backend, target).set(1)


def down(backend: str, target: str) -> None:
    TARGET_UP.labels(backend, target).set(0)
    TARGET_FAILURES.labels(backend, target).inc()


def tool_call(backend: str, target: str, tool: str, outcome: str, seconds: float) -> None:
    TOOL_CALLS.labels(backend, target, tool, outcome).inc()
    TOOL_SECONDS.labels(backend, target, tool).observe(seconds)
