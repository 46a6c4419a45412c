"""The AI gateway: what Envoy and the AI extension add to a chat completion.

One `lychgate run`, one Gateway, an AI Backend (an `openai` provider) pointing at the
OpenAI stand-in of the tests (tests/ai/standin_openai.py) in a process of its own,
answering at once. The same requests go to the stand-in directly and through the
Gateway, interleaved in rounds, on one keep-alive connection each (stdlib
http.client: the client is not what is measured):
- *whole answer*: a chat completion of a short reply; time to the last byte;
- *stream of 200 chunks*: `stream: true`, a 200-word reply the stand-in sends a word
  a chunk, 2 ms apart; time to the first chunk and to the last (`[DONE]`). The direct
  arm asks what the gateway asks the provider (the usage chunk too), so the provider's
  work is the same both ways.
Added = through the Gateway minus direct, at p50 and p99. The AI extension's CPU per
request comes from /proc (user + system time over the measured requests).
Target (issue 30): under 2 ms p50 added to a whole answer; the first chunk delayed
by no more than 2 ms.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.bench.common import (
    REPO,
    check,
    free_port_on,
    gateway_yaml,
    log,
    lychgate_process,
    wait_for,
)

ADDR = "127.0.55.9"
KEY = "sk-bench"
CHUNKS = 200
CHUNK_DELAY = 0.002
SHORT = "The gateway answered."
LONG = " ".join(f"w{i}" for i in range(CHUNKS))
BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}
STANDIN = ("import sys, time; from tests.ai.standin_openai import OpenAIStandIn; "
           "s = OpenAIStandIn(key=sys.argv[1], reply=sys.argv[2], chunk_delay=float(sys.argv[3])); s.start(); "
           "print(s.port, flush=True); time.sleep(10**6)")


def _manifests(port: int, gateway_port: int) -> str:
    return f"""\
{gateway_yaml("gw", ADDR, gateway_port)}---
apiVersion: v1
kind: Secret
metadata: {{name: key, namespace: default}}
stringData: {{Authorization: {KEY}}}
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: Backend
metadata: {{name: llm, namespace: default}}
spec:
  ai:
    llm:
      openai: {{authToken: {{kind: SecretRef, secretRef: {{name: key}}}}}}
      host: 127.0.0.1
      port: {port}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: chat, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: llm}}]}}]
"""


class Client:
    """One keep-alive connection; times a whole answer, or a stream's first and last chunk."""

    def __init__(self, host: str, port: int, key: str, upstream: bool = False) -> None:
        """`upstream`: the client stands for the gateway itself, sending the provider what
        the gateway sends it (streams ask for the usage chunk), so both arms cost the
        provider the same and the difference is the gateway's."""
        self.conn = http.client.HTTPConnection(host, port, timeout=30)
        self.headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
        self.stream_body = {**BODY, "stream": True, **({"stream_options": {"include_usage": True}} if upstream else {})}

    def whole(self) -> float:
        t0 = time.perf_counter()
        self.conn.request("POST", "/v1/chat/completions", json.dumps(BODY), self.headers)
        resp = resp_ok(self.conn.getresponse())
        resp.read()
        return (time.perf_counter() - t0) * 1000

    def stream(self) -> tuple[float, float]:
        t0 = time.perf_counter()
        self.conn.request("POST", "/v1/chat/completions", json.dumps(self.stream_body), self.headers)
        resp = resp_ok(self.conn.getresponse())
        first = None
        while line := resp.readline():
            if first is None and line.startswith(b"data: {"):
                first = (time.perf_counter() - t0) * 1000
            if line.startswith(b"data: [DONE]"):
                break
        resp.read()
        assert first is not None
        return first, (time.perf_counter() - t0) * 1000

    def close(self) -> None:
        self.conn.close()


def resp_ok(resp: http.client.HTTPResponse) -> http.client.HTTPResponse:
    if resp.status != 200:
        raise RuntimeError(f"answered {resp.status}: {resp.read()[:300]!r}")
    return resp


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _standin(reply: str, delay: float) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", STANDIN, KEY, reply, str(delay)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def run(opts: argparse.Namespace) -> dict[str, Any]:
    rounds, per_round, streams, warmup = 4, (100 if opts.quick else 300), (10 if opts.quick else 40), 100
    procs: list[subprocess.Popen[str]] = []
    try:
        short, short_port = _standin(SHORT, 0.0)
        long, long_port = _standin(LONG, CHUNK_DELAY)
        procs += [short, long]
        results: dict[str, Any] = {}
        for label, standin_port in (("whole", short_port), ("stream", long_port)):
            with lychgate_process(f"ai-{label}") as lg:
                gateway_port = free_port_on(ADDR)
                lg.write("ai.yaml", _manifests(standin_port, gateway_port))
                lg.start()
                via = Client(ADDR, gateway_port, "client-key")
                wait_for(lambda v=via: _answers(v), 60, "the AI route to answer")
                extension = json.loads((lg.state / "ai" / "extension.json").read_text())["pid"]
                direct = Client("127.0.0.1", standin_port, KEY, upstream=True)
                if label == "whole":
                    for _ in range(warmup):
                        direct.whole(), via.whole()
                    d: list[float] = []
                    g: list[float] = []
                    cpu0 = _cpu_seconds(extension)
                    for _ in range(rounds):
                        d += [direct.whole() for _ in range(per_round)]
                        g += [via.whole() for _ in range(per_round)]
                    results["whole"] = {"direct": d, "gateway": g,
                                        "cpu_ms": (_cpu_seconds(extension) - cpu0) * 1000 / len(g)}
                else:
                    for _ in range(2):
                        direct.stream(), via.stream()
                    ds, gs = [], []
                    cpu0 = _cpu_seconds(extension)
                    for _ in range(streams):
                        ds.append(direct.stream())
                        gs.append(via.stream())
                    results["stream"] = {"direct": ds, "gateway": gs,
                                         "cpu_ms": (_cpu_seconds(extension) - cpu0) * 1000 / len(gs)}
                direct.close()
                via.close()
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
    return _report(results, rounds * per_round, streams)


def _answers(client: Client) -> bool:
    try:
        client.whole()
        return True
    except (RuntimeError, OSError, http.client.HTTPException):
        client.close()
        return False


def _report(results: dict[str, Any], n: int, streams: int) -> dict[str, Any]:
    whole = results["whole"]
    d, g = whole["direct"], whole["gateway"]
    added50, added99 = _pct(g, 0.5) - _pct(d, 0.5), _pct(g, 0.99) - _pct(d, 0.99)
    stream = results["stream"]
    first_d, last_d = [f for f, _ in stream["direct"]], [la for _, la in stream["direct"]]
    first_g, last_g = [f for f, _ in stream["gateway"]], [la for _, la in stream["gateway"]]
    first_added = statistics.median(first_g) - statistics.median(first_d)
    last_added = statistics.median(last_g) - statistics.median(last_d)
    rows = [
        ["whole answer: direct", f"{_pct(d, 0.5):.2f}", f"{_pct(d, 0.99):.2f}", ""],
        ["whole answer: through the Gateway", f"{_pct(g, 0.5):.2f}", f"{_pct(g, 0.99):.2f}",
         f"{whole['cpu_ms']:.2f}"],
        ["whole answer: added", f"{added50:.2f}", f"{added99:.2f}", ""],
        [f"stream of {CHUNKS} chunks, first chunk: direct / Gateway",
         f"{statistics.median(first_d):.2f} / {statistics.median(first_g):.2f}", "", ""],
        [f"stream of {CHUNKS} chunks, last chunk: direct / Gateway",
         f"{statistics.median(last_d):.1f} / {statistics.median(last_g):.1f}", "", f"{stream['cpu_ms']:.2f}"],
    ]
    log(f"ai: whole answer added p50 {added50:.2f} ms, p99 {added99:.2f} ms, extension CPU "
        f"{whole['cpu_ms']:.2f} ms/request; stream first chunk +{first_added:.2f} ms, last +{last_added:.1f} ms")
    return {
        "name": "ai",
        "title": "AI gateway: latency added by Envoy and the AI extension",
        "description": (__doc__ or "").split("\n\n", 1)[1].replace("\n", " ").strip(),
        "tables": [{"title": f"ms ({n} whole answers, {streams} streams each way)",
                    "columns": ["request", "p50 (ms)", "p99 (ms)", "extension CPU per request (ms)"],
                    "rows": rows}],
        "checks": [check("AI gateway: p50 added to a whole answer", added50, 2.0, "ms"),
                   check("AI gateway: first chunk of a stream delayed (median)", first_added, 2.0, "ms")],
        "raw": {"whole_added_p50": added50, "whole_added_p99": added99, "first_chunk_added": first_added,
                "last_chunk_added": last_added, "cpu_ms_whole": whole["cpu_ms"], "cpu_ms_stream": stream["cpu_ms"]},
    }
