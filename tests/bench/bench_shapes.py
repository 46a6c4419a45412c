"""Propagation on the shapes users have, the way they work (issue 17).

A real `lychgate run` with its Envoys and `lychgate echo` backends, two Gateways
of 3,000 routes each. *plain*: one hostname per route (the propagation
benchmark's shape). *policies*: 300 hostnames x 10 path routes (each route one
PathPrefix), a Gateway-wide TrafficPolicy (request timeout) and a TrafficPolicy
on every 10th route (a request header), as real Gateways carry.

Each change is a file written in place (opened and rewritten, as an editor or
`kubectl apply` in a loop does, not renamed into place), and the next one
follows as soon as the last one is served: no waiting for an idle control
plane, as users never wait. Time from the write until a GET (every 5 ms)
answers as the change says:
- *new route*: a new route file with its own new Service (plain: a new
  hostname; policies: a new path on an existing hostname), until the new
  backend answers;
- *new policy*: a TrafficPolicy file attached to one route that had none, until
  the request header it sets reaches the backend;
- *policy edit*: one of the per-route TrafficPolicies rewritten with a new
  header value, until the new value reaches the backend.
Every shape is measured twice: back to back, and (the propagation benchmark's
way) with the control plane idle before each write (CPU below 10 % for 0.3 s).
A background prober hits 4 stable routes of each Gateway every 10 ms.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bench.bench_propagation import wait_idle
from tests.bench.common import (
    SERVICE_POOL,
    BackgroundProber,
    EchoProcs,
    LychgateProc,
    Probe,
    check,
    free_port_on,
    gateway_yaml,
    log,
    lychgate_process,
    route_host,
    route_name,
    route_yaml,
    service_yaml,
    summary,
    wait_for,
)

ADDR = "127.0.56.{}"
ROUTES = 3000
HOSTS = 300
PATHS = ROUTES // HOSTS
PROBE_INTERVAL = 0.005
TIMEOUT = 30.0


def _host(h: int) -> str:
    return f"host-{h:03d}.shapes.test"


def _path_route(name: str, host: str, path: str, backend: str) -> str:
    return f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: default}}
spec:
  parentRefs: [{{name: shaped}}]
  hostnames: [{host}]
  rules:
    - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]
      backendRefs: [{{name: {backend}, port: 80}}]
"""


def _policy(name: str, kind: str, target: str, body: str) -> str:
    return f"""\
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: {name}, namespace: default}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: {kind}, name: {target}}}]
{body}"""


def _header_policy(name: str, route: str, value: str) -> str:
    return _policy(name, "HTTPRoute", route, f"""\
  headerModifiers:
    request:
      set: [{{name: x-policy, value: "{value}"}}]
""")


def _write_in_place(path: Path, text: str) -> float:
    """Rewrite the file where it is; returns the time just before the write."""
    t0 = time.monotonic()
    with path.open("w") as f:
        f.write(text)
    return t0


def _setup(lg: LychgateProc, old_port: int, new_port: int, fresh: int) -> dict[str, tuple[str, int]]:
    addrs = {"plain": ADDR.format(1), "shaped": ADDR.format(2)}
    ports = {k: free_port_on(a) for k, a in addrs.items()}
    lg.write("gateways.yaml", "---\n".join(gateway_yaml(k, addrs[k], ports[k]) for k in addrs))
    lg.write("backends.yaml", "---\n".join(service_yaml(f"svc-{j}", old_port) for j in range(SERVICE_POOL)))
    lg.write("fresh.yaml", "---\n".join(service_yaml(f"fresh-{j}", new_port) for j in range(fresh)))
    for lo in range(0, ROUTES, 500):
        lg.write(f"plain-{lo:05d}.yaml", "---\n".join(
            route_yaml(route_name(i), "plain", f"svc-{i % SERVICE_POOL}") for i in range(lo, lo + 500)))
    for h in range(HOSTS):
        lg.write(f"shaped-{h:03d}.yaml", "---\n".join(
            _path_route(f"s-{h:03d}-{p}", _host(h), f"/p{p}", f"svc-{(h * PATHS + p) % SERVICE_POOL}")
            for p in range(PATHS)))
    lg.write("policy-gateway.yaml", _policy("gateway-timeouts", "Gateway", "shaped", "  timeouts: {request: 30s}\n"))
    for h in range(HOSTS):  # every 10th route: path 0 of every host
        lg.write(f"policy-{h:03d}.yaml", _header_policy(f"p-{h:03d}", f"s-{h:03d}-0", "initial"))
    return {k: (addrs[k], ports[k]) for k in addrs}


def _until(probe: Probe, host: str, path: str, ok: Callable[[int, bytes], bool], t0: float) -> float | None:
    deadline = t0 + TIMEOUT
    while True:
        tick = time.monotonic()
        status, body = probe.get(host, path)
        if ok(status, body):
            return 1000 * (time.monotonic() - t0)
        if tick > deadline:
            return None
        time.sleep(max(0.0, tick + PROBE_INTERVAL - time.monotonic()))


def _from(pod: str) -> Callable[[int, bytes], bool]:
    def ok(status: int, body: bytes) -> bool:
        try:
            return status == 200 and json.loads(body).get("pod") == pod
        except ValueError:
            return False
    return ok


def _header_is(value: str) -> Callable[[int, bytes], bool]:
    def ok(status: int, body: bytes) -> bool:
        try:
            return status == 200 and json.loads(body).get("headers", {}).get("X-Policy") == [value]
        except ValueError:
            return False
    return ok


def run(opts: argparse.Namespace) -> dict[str, Any]:
    n = 8 if opts.quick else 25
    shapes = ["plain: new route", "policies: new path route", "policies: new policy", "policies: policy edit"]
    results: dict[str, dict[str, list[float | None]]] = {s: {"back to back": [], "idle": []} for s in shapes}
    echo = EchoProcs()
    try:
        old_port, new_port = echo.start("old"), echo.start("new")
        with lychgate_process("shapes") as lg:
            gw = _setup(lg, old_port, new_port, fresh=4 * n)
            lg.start(timeout=300)
            for name in gw:
                lg.wait_programmed(name, timeout=300)
            probes = {k: Probe(*gw[k]) for k in gw}
            wait_for(lambda: _header_is("initial")(*probes["shaped"].get(_host(HOSTS - 1), "/p0")), 300,
                     "the last per-route policy")
            wait_for(lambda: probes["plain"].get(route_host(route_name(ROUTES - 1)))[0] == 200, 300,
                     "the last plain route")
            hosts = {"plain": [route_host(route_name(i)) for i in (1, 999, 1999, 2999)],
                     "shaped": [_host(h) for h in (1, 99, 199, 299)]}
            probers = [BackgroundProber(*gw[k], hosts[k], interval=0.01, max_seconds=3000).start() for k in gw]
            fresh = 0
            try:
                for mode in ("back to back", "idle"):
                    for k in range(n):
                        change = f"{mode[0]}{k}"
                        h = (k * 37 + (0 if mode == "idle" else 11)) % HOSTS
                        steps = [
                            ("plain: new route", probes["plain"], route_host(f"new-{change}"), "/",
                             f"plain-new-{change}.yaml", route_yaml(f"new-{change}", "plain", f"fresh-{fresh}"),
                             _from("new")),
                            ("policies: new path route", probes["shaped"], _host(h), f"/n{change}",
                             f"shaped-new-{change}.yaml",
                             _path_route(f"s-new-{change}", _host(h), f"/n{change}", f"fresh-{fresh + 1}"),
                             _from("new")),
                            ("policies: new policy", probes["shaped"], _host(h), f"/p{1 + k % (PATHS - 1)}",
                             f"policy-new-{change}.yaml",
                             _header_policy(f"p-new-{change}", f"s-{h:03d}-{1 + k % (PATHS - 1)}", change),
                             _header_is(change)),
                            ("policies: policy edit", probes["shaped"], _host(h), "/p0", f"policy-{h:03d}.yaml",
                             _header_policy(f"p-{h:03d}", f"s-{h:03d}-0", f"edit-{change}"),
                             _header_is(f"edit-{change}")),
                        ]
                        fresh += 2
                        for shape, probe, host, path, file, text, ok in steps:
                            if mode == "idle":
                                wait_idle(lg.pid)
                            t0 = _write_in_place(lg.manifests / file, text)
                            results[shape][mode].append(_until(probe, host, path, ok, t0))
                    log(f"shapes ({mode}): " + "; ".join(
                        f"{s} mean {summary([x for x in results[s][mode] if x is not None]).get('mean', 0):.0f} ms"
                        for s in shapes))
            finally:
                for prober in probers:
                    prober.stop()
                for probe in probes.values():
                    probe.close()
            background = {"requests": sum(p.total for p in probers), "failures": sum(len(p.failures) for p in probers),
                          "examples": [f for p in probers for f in p.failures[:5]]}
    finally:
        echo.close()
    return _report(results, background, n)


def _report(results: dict[str, dict[str, list[float | None]]], background: dict[str, Any], n: int) -> dict[str, Any]:
    rows, checks = [], []
    for shape, modes in results.items():
        for mode, values in modes.items():
            lat = [v for v in values if v is not None]
            s = summary(lat)
            rows.append([shape, mode, len(values), len(values) - len(lat)]
                        + [f"{s.get(k, float('nan')):.0f}" for k in ("p50", "mean", "p90", "max")])
        lat = [v for v in modes["back to back"] if v is not None]
        timeouts = len(modes["back to back"]) - len(lat)
        s = summary(lat)
        checks.append(check(f"propagation at 3,000 routes, {shape}, back to back: mean", s.get("mean"), 15, "ms"))
        checks.append(check(f"propagation at 3,000 routes, {shape}, back to back: max",
                            s.get("max") if not timeouts else None, 50, "ms"))
    checks.append(check("non-200 answers on stable routes during the run", background["failures"], 0, "answers",
                        "==", note=f"of {background['requests']} background requests"))
    return {
        "name": "shapes",
        "title": "Propagation on the shapes users have (real `lychgate run` + Envoy)",
        "description": __doc__.split("\n\n", 1)[1].replace("\n", " ").strip(),
        "tables": [{"columns": ["shape (3,000 routes)", "writes", "n", "timeouts", "p50 (ms)", "mean (ms)",
                                "p90 (ms)", "max (ms)"], "rows": rows}],
        "checks": checks,
        "notes": [f"{n} changes per shape and mode. Background prober: {background['requests']} requests, "
                  f"{background['failures']} failures."],
        "raw": {"results": results, "background": background},
    }
