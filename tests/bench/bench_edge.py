"""The proxy as an edge: connections held, their memory, and latency beside slow clients.

One `lychgate run`, one Gateway with the defaults of a new Gateway (no
ListenerPolicy, no GatewayParameters), one `lychgate echo` backend in its own
process. Measured on Envoy's own process (VmRSS in /proc):

- idle connections: 5,000 opened that never send a byte, then 5,000 that made
  one request and stay open (keep-alive); Envoy's RSS before and after, per
  1,000 connections;
- the connection limit: the limit plus 1,000 connections opened; how many the
  proxy still holds a second later (the rest it closes as it accepts them).
  Locally the limit is half the open-file limit lychgate's Envoy gets (ulimit -n)
  when that is below one per 32 KiB of the 1 GiB heap limit;
- latency beside slow clients: a normal client's requests (one keep-alive
  connection, sequential) with 5,000 slowloris connections open (each sent a
  request line and one header, and nothing since), interleaved with the same
  client alone: 4 rounds of 500 requests each way (4 x 200 with --quick). A
  round lasts less than the 10 s request-header timeout, which would close the
  slow ones; they are opened anew for each round.
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import time
from typing import Any

from lychgate.deploy.overload import CONNECTIONS
from tests.bench.common import (
    EchoProcs,
    Probe,
    check,
    free_port_on,
    gateway_yaml,
    log,
    lychgate_process,
    percentile,
    read_status_kb,
    service_yaml,
    wait_for,
)
from tests.edge.clients import open_many, wait_closed

ADDR = "127.0.55.20"
HOST = "edge.bench.test"
SLOW = 5000
IDLE = 5000

ROUTE = f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{HOST}]
  rules: [{{backendRefs: [{{name: echo, port: 80}}]}}]
"""


def _rss_mib(pid: int) -> float:
    time.sleep(0.5)  # let Envoy's workers finish accepting
    return read_status_kb(pid, "VmRSS") / 2**20


def _close(socks: list[socket.socket]) -> None:
    for s in socks:
        s.close()


def _keepalive(port: int, count: int) -> list[socket.socket]:
    """`count` connections that each made one request and read its answer, left open (one
    request at a time: the backend cluster's circuit breaker allows 1,024 at once)."""
    out = open_many(ADDR, port, count, timeout=60)
    request = f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
    for s in out:
        s.sendall(request)
        answer = s.recv(65536)
        if not answer.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"a keep-alive request was answered {answer[:100]!r}")
    return out


def _timed(probe: Probe, count: int) -> list[float]:
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        status, _ = probe.get(HOST)
        out.append((time.perf_counter() - t0) * 1000)
        if status != 200:
            raise RuntimeError(f"the normal client got {status}")
    return out


def run(opts: argparse.Namespace) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    rounds, per_round = 4, (200 if opts.quick else 500)
    echoes = EchoProcs()
    try:
        echo_port = echoes.start("echo")
        with lychgate_process("edge") as lg:
            port = free_port_on(ADDR)
            lg.write("gateway.yaml", gateway_yaml("gw", ADDR, port))
            lg.write("route.yaml", ROUTE + "---\n" + service_yaml("echo", echo_port))
            lg.start()
            probe = Probe(ADDR, port)
            wait_for(lambda: probe.get(HOST)[0] == 200, 30, "the route to answer")
            pid = lg.envoy_pid("gw")
            assert pid is not None
            boot = lg.state / "proxies" / "default" / "gw" / "bootstrap.json"
            monitors = json.loads(boot.read_text())["overload_manager"]["resource_monitors"]
            limit = next(m["typed_config"]["max_active_downstream_connections"] for m in monitors
                         if m["name"] == CONNECTIONS)

            base = _rss_mib(pid)
            idle = open_many(ADDR, port, IDLE, timeout=60)
            idle_rss = _rss_mib(pid)
            _close(idle)
            time.sleep(1)
            base_ka = _rss_mib(pid)
            keepalive = _keepalive(port, IDLE)
            ka_rss = _rss_mib(pid)
            _close(keepalive)
            time.sleep(1)
            log(f"edge: RSS {base:.1f} MiB; +{IDLE} idle {idle_rss:.1f} MiB; +{IDLE} keep-alive {ka_rss:.1f} MiB")

            probe.close()  # its keep-alive connection would count against the limit
            flood = open_many(ADDR, port, limit + 1000, timeout=120)
            time.sleep(1)
            held = len(wait_closed(flood, timeout=2))
            flood_rss = read_status_kb(pid, "VmRSS") / 2**20
            _close(flood)
            log(f"edge: {held} of {limit + 1000} connections held (limit {limit}), RSS {flood_rss:.1f} MiB")
            wait_for(lambda: probe.get(HOST)[0] == 200, 30, "the route to answer after the flood")

            _timed(probe, 200)  # warm-up
            alone: list[float] = []
            beside: list[float] = []
            for _ in range(rounds):
                alone += _timed(probe, per_round)
                slow = open_many(ADDR, port, SLOW, timeout=60)
                for s in slow:
                    s.sendall(f"GET / HTTP/1.1\r\nHost: {HOST}\r\n".encode())
                beside += _timed(probe, per_round)
                _close(slow)
                time.sleep(0.5)
            probe.close()
    finally:
        echoes.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    per_k_idle = (idle_rss - base) * 1000 / IDLE
    per_k_ka = (ka_rss - base_ka) * 1000 / IDLE
    p99_alone, p99_beside = percentile(alone, 99), percentile(beside, 99)
    log(f"edge: RSS per 1,000 idle {per_k_idle:.2f} MiB, keep-alive {per_k_ka:.2f} MiB; "
        f"p99 alone {p99_alone:.2f} ms, beside {SLOW} slow connections {p99_beside:.2f} ms")
    return {
        "name": "edge",
        "title": "The proxy as an edge: connections and slow clients",
        "description": (__doc__ or "").strip(),
        "tables": [
            {"title": "Connections held by the default Gateway's Envoy",
             "columns": ["what", "connections", "Envoy RSS, MiB", "RSS per 1,000 connections, MiB"],
             "rows": [["at rest", "0", f"{base:.1f}", ""],
                      ["idle (never sent a byte)", f"{IDLE:,}", f"{idle_rss:.1f}", f"{per_k_idle:.2f}"],
                      ["keep-alive (one request each)", f"{IDLE:,}", f"{ka_rss:.1f}", f"{per_k_ka:.2f}"],
                      [f"flood: limit + 1,000 opened (limit {limit:,})", f"{held:,} held", f"{flood_rss:.1f}", ""]]},
            {"title": f"A normal client's latency, ms ({rounds * per_round} requests each way)",
             "columns": ["", "p50", "p99"],
             "rows": [["alone", f"{percentile(alone, 50):.3f}", f"{p99_alone:.3f}"],
                      [f"beside {SLOW:,} slowloris connections", f"{percentile(beside, 50):.3f}",
                       f"{p99_beside:.3f}"]]},
        ],
        "checks": [check("connections held at the limit (the rest closed)", held, limit, "connections", "==")],
        "raw": {"rss_per_1000_idle_mib": per_k_idle, "rss_per_1000_keepalive_mib": per_k_ka, "held": held,
                "limit": limit, "p99_alone_ms": p99_alone, "p99_beside_slow_ms": p99_beside},
    }
