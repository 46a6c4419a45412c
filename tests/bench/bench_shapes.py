"""Propagation on the shapes users have, the way they work (issue 17).

A real `lychgate run` with its Envoy and `lychgate echo` backends, one Gateway
of 3,000 routes, in two runs. *plain*: one hostname per route (the propagation
benchmark's shape). *paths*: 300 hostnames x 10 path routes (each route one
PathPrefix: `/` and /p1 ... /p9). *policies*: the same, with a Gateway-wide
TrafficPolicy (request timeout) and a TrafficPolicy on every 10th route (the `/`
route of each hostname: a request header), as real Gateways carry.

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
A background prober hits 4 stable routes every 10 ms.
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


def _path(p: int) -> str:
    return "/" if p == 0 else f"/p{p}"


def _setup(lg: LychgateProc, shape: str, old_port: int, new_port: int, fresh: int) -> tuple[str, int]:
    address = ADDR.format(1)
    port = free_port_on(address)
    name = "plain" if shape == "plain" else "shaped"
    lg.write("gateway.yaml", gateway_yaml(name, address, port))
    lg.write("backends.yaml", "---\n".join(service_yaml(f"svc-{j}", old_port) for j in range(SERVICE_POOL)))
    lg.write("fresh.yaml", "---\n".join(service_yaml(f"fresh-{j}", new_port) for j in range(fresh)))
    if shape == "plain":
        for lo in range(0, ROUTES, 500):
            lg.write(f"plain-{lo:05d}.yaml", "---\n".join(
                route_yaml(route_name(i), "plain", f"svc-{i % SERVICE_POOL}") for i in range(lo, lo + 500)))
        return address, port
    for h in range(HOSTS):
        lg.write(f"shaped-{h:03d}.yaml", "---\n".join(
            _path_route(f"s-{h:03d}-{p}", _host(h), _path(p), f"svc-{(h * PATHS + p) % SERVICE_POOL}")
            for p in range(PATHS)))
    if shape == "paths":
        return address, port
    lg.write("policy-gateway.yaml", _policy("gateway-timeouts", "Gateway", "shaped", "  timeouts: {request: 30s}\n"))
    for h in range(HOSTS):  # every 10th route: the / route of every host
        lg.write(f"policy-{h:03d}.yaml", _header_policy(f"p-{h:03d}", f"s-{h:03d}-0", "initial"))
    return address, port


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


def _steps(shape: str, mode: str, k: int, fresh: int) -> list[tuple[str, str, str, str, str, Callable[[int, bytes], bool]]]:
    """(what, Host, path, file, its new text, the answer that shows it) for change k."""
    change = f"{mode[0]}{k}"
    if shape == "plain":
        return [("plain: new route", route_host(f"new-{change}"), "/", f"plain-new-{change}.yaml",
                 route_yaml(f"new-{change}", "plain", f"fresh-{fresh}"), _from("new"))]
    h = (k * 37 + (0 if mode == "idle" else 11)) % HOSTS
    p = 1 + k % (PATHS - 1)
    if shape == "paths":
        return [("paths, no policy: new path route", _host(h), f"/n{change}", f"shaped-new-{change}.yaml",
                 _path_route(f"s-new-{change}", _host(h), f"/n{change}", f"fresh-{fresh}"), _from("new"))]
    return [
        ("policies: new path route", _host(h), f"/n{change}", f"shaped-new-{change}.yaml",
         _path_route(f"s-new-{change}", _host(h), f"/n{change}", f"fresh-{fresh}"), _from("new")),
        ("policies: new policy", _host(h), _path(p), f"policy-new-{change}.yaml",
         _header_policy(f"p-new-{change}", f"s-{h:03d}-{p}", change), _header_is(change)),
        ("policies: policy edit", _host(h), "/", f"policy-{h:03d}.yaml",
         _header_policy(f"p-{h:03d}", f"s-{h:03d}-0", f"edit-{change}"), _header_is(f"edit-{change}")),
    ]


def _run_shape(shape: str, n: int, old_port: int, new_port: int,
               results: dict[str, dict[str, list[float | None]]]) -> dict[str, int]:
    with lychgate_process(f"shapes-{shape}") as lg:
        address, port = _setup(lg, shape, old_port, new_port, fresh=2 * n)
        lg.start(timeout=300)
        lg.wait_programmed("plain" if shape == "plain" else "shaped", timeout=300)
        probe = Probe(address, port)
        if shape == "plain":
            wait_for(lambda: probe.get(route_host(route_name(ROUTES - 1)))[0] == 200, 300, "the last plain route")
            stable = [route_host(route_name(i)) for i in (1, 999, 1999, 2999)]
        elif shape == "paths":
            wait_for(lambda: probe.get(_host(HOSTS - 1), f"/p{PATHS - 1}")[0] == 200, 300, "the last path route")
            stable = [_host(h) for h in (2, 98, 198, 298)]
        else:
            wait_for(lambda: _header_is("initial")(*probe.get(_host(HOSTS - 1))), 300, "the last per-route policy")
            stable = [_host(h) for h in (2, 98, 198, 298)]  # never changed: (k * 37 + 0 or 11) % 300 misses them
        prober = BackgroundProber(address, port, stable, interval=0.01, max_seconds=3000).start()
        fresh = 0
        try:
            for mode in ("back to back", "idle"):
                for k in range(n):
                    for what, host, path, file, text, ok in _steps(shape, mode, k, fresh):
                        if mode == "idle":
                            wait_idle(lg.pid)
                        t0 = _write_in_place(lg.manifests / file, text)
                        results.setdefault(what, {"back to back": [], "idle": []})[mode].append(
                            _until(probe, host, path, ok, t0))
                    fresh += 1
                log(f"shapes, {shape} ({mode}): " + "; ".join(
                    f"{what} mean {summary([x for x in v[mode] if x is not None]).get('mean', 0):.0f} ms"
                    for what, v in results.items()))
        finally:
            prober.stop()
            probe.close()
        return {"requests": prober.total, "failures": len(prober.failures)}


def run(opts: argparse.Namespace) -> dict[str, Any]:
    n = 8 if opts.quick else 25
    results: dict[str, dict[str, list[float | None]]] = {}
    background = {"requests": 0, "failures": 0}
    echo = EchoProcs()
    try:
        old_port, new_port = echo.start("old"), echo.start("new")
        for shape in ("plain", "paths", "policies"):
            seen = _run_shape(shape, n, old_port, new_port, results)
            background = {k: background[k] + seen[k] for k in background}
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
