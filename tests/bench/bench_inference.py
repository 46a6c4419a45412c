"""InferencePool: what the endpoint picker's round trips add to a request.

One `lychgate run --inference-extension`, one Gateway, one `lychgate echo` model
server. Two routes reach the same echo: a plain HTTPRoute to a Service, and an
HTTPRoute to an InferencePool whose endpoint picker (tests/picker.py, in a
process of its own) answers at once with that echo's endpoint. The picker sees
each request's headers and body and the response's headers and body (the
protocol's FULL_DUPLEX_STREAMED mode), so a request costs the proxy a picker
exchange on the way in and one on the way out.

Load: sequential GETs on one keep-alive connection per route, the two routes
interleaved in rounds (4 rounds of 500 requests each; 4 x 150 with --quick),
after 200 warm-up requests each. Each request is timed on the client
(perf_counter around request and response); p50 and p99 per route, and the
difference. No target: the figure is there to watch.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from typing import Any

from tests import harness
from tests.bench.common import (
    REPO,
    EchoProcs,
    Probe,
    free_port,
    free_port_on,
    gateway_yaml,
    log,
    lychgate_process,
    service_yaml,
    wait_for,
)

ADDR_INFERENCE = "127.0.55.1"
POOL_HOST, PLAIN_HOST = "pool.bench.test", "plain.bench.test"


def _manifests(echo_port: int, picker_port: int) -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata: {{name: model-0, namespace: default, labels: {{app: model}}}}
status: {{phase: Running, podIP: 127.0.0.1, conditions: [{{type: Ready, status: "True"}}]}}
---
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {{name: pool, namespace: default}}
spec:
  selector: {{matchLabels: {{app: model}}}}
  targetPorts: [{{number: {echo_port}}}]
  endpointPickerRef: {{name: epp, port: {{number: 9002}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: pool, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{POOL_HOST}]
  rules: [{{backendRefs: [{{group: inference.networking.k8s.io, kind: InferencePool, name: pool}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: plain, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{PLAIN_HOST}]
  rules: [{{backendRefs: [{{name: model, port: 80}}]}}]
---
{service_yaml("model", echo_port)}---
{harness.service_yaml("epp", 9002, picker_port)}"""


def _timed(probe: Probe, host: str, count: int) -> list[float]:
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        status, _ = probe.get(host)
        out.append((time.perf_counter() - t0) * 1000)
        if status != 200:
            raise RuntimeError(f"{host} answered {status}")
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(opts: argparse.Namespace) -> dict[str, Any]:
    rounds, per_round, warmup = 4, (150 if opts.quick else 500), 200
    echoes = EchoProcs()
    picker: subprocess.Popen[bytes] | None = None
    try:
        echo_port = echoes.start("model-0")
        picker_port = free_port()
        picker = subprocess.Popen(
            [sys.executable, "-c", "import sys, time; from tests.picker import EndpointPicker; "
             f"EndpointPicker({{'127.0.0.1:{echo_port}': 0}}, port={picker_port}).start(); time.sleep(10**6)"],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with lychgate_process("inference") as lg:
            port = free_port_on(ADDR_INFERENCE)
            lg.write("gateway.yaml", gateway_yaml("gw", ADDR_INFERENCE, port))
            lg.write("inference.yaml", _manifests(echo_port, picker_port))
            lg.start("--inference-extension")
            probes = {host: Probe(ADDR_INFERENCE, port) for host in (PLAIN_HOST, POOL_HOST)}
            for host, probe in probes.items():
                wait_for(lambda p=probe, h=host: p.get(h)[0] == 200, 30, f"{host} to answer")
                _timed(probe, host, warmup)
            samples: dict[str, list[float]] = {PLAIN_HOST: [], POOL_HOST: []}
            for _ in range(rounds):
                for host, probe in probes.items():
                    samples[host] += _timed(probe, host, per_round)
            for probe in probes.values():
                probe.close()
    finally:
        if picker is not None:
            picker.terminate()
            picker.wait(10)
        echoes.close()
    plain, pool = samples[PLAIN_HOST], samples[POOL_HOST]
    rows = [
        ["plain HTTPRoute → Service", f"{_pct(plain, 0.5):.3f}", f"{_pct(plain, 0.99):.3f}",
         f"{statistics.fmean(plain):.3f}"],
        ["HTTPRoute → InferencePool (picker)", f"{_pct(pool, 0.5):.3f}", f"{_pct(pool, 0.99):.3f}",
         f"{statistics.fmean(pool):.3f}"],
        ["added by the picker", f"{_pct(pool, 0.5) - _pct(plain, 0.5):.3f}",
         f"{_pct(pool, 0.99) - _pct(plain, 0.99):.3f}", f"{statistics.fmean(pool) - statistics.fmean(plain):.3f}"],
    ]
    log(f"inference: p50 plain {rows[0][1]} ms, pool {rows[1][1]} ms; added p50 {rows[2][1]} ms, p99 {rows[2][2]} ms")
    return {
        "name": "inference",
        "title": "InferencePool: endpoint picker latency",
        "description": (__doc__ or "").strip(),
        "tables": [{"title": f"Per request, ms ({rounds * per_round} requests per route)",
                    "columns": ["route", "p50", "p99", "mean"], "rows": rows}],
        "checks": [],
    }
