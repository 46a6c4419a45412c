"""Propagation on the shapes users have, the way they work (issue 17).

A real `lychgate run` with its Envoy and `lychgate echo` backends, one Gateway
of 3,000 routes, in four runs. *plain*: one hostname per route (the propagation
benchmark's shape). *paths*: 300 hostnames x 10 path routes (each route one
PathPrefix: `/` and /p1 ... /p9). *policies*: the same, with a Gateway-wide
TrafficPolicy (request timeout) and a TrafficPolicy on every 10th route (the `/`
route of each hostname: a request header), as real Gateways carry (the
manifests: `policy_shape.py`; `bench_shapes_10k.py` runs the policies shape at
10,000 routes with the same code). *delegated*: one parent HTTPRoute handing a
path prefix to each of 30 team namespaces, 100 child routes each, all in one
hostname (route delegation, `delegation_shape.py`).

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
  header value, until the new value reaches the backend;
- *new child route* (delegated): a file with a team's new child route and its
  own new Service, until the new backend answers on the new path;
- *child route edit* (delegated): that file rewritten with another path, until
  the new path answers.
Every shape is measured twice: back to back, and (the propagation benchmark's
way) with the control plane idle before each write (CPU below 10 % for 0.3 s).
A background prober hits 4 stable routes every 10 ms.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.bench import delegation_shape as ds
from tests.bench import policy_shape as ps
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
    path_route_yaml,
    route_host,
    route_name,
    route_yaml,
    service_yaml,
    summary,
    wait_for,
)

ADDR = "127.0.56.{}"
ROUTES = 3000
PROBE_INTERVAL = 0.005
TIMEOUT = 30.0
BOTH = ("back to back", "idle")

# (what changed, Host, path, file, its new text, the answer that shows it)
Step = tuple[str, str, str, str, str, Callable[[int, bytes], bool]]


@dataclass(frozen=True)
class Shape:
    """One Gateway of `routes` routes: "plain" (a hostname per route), "paths"
    (hostnames x 10 path routes) or "policies" (paths with TrafficPolicies)."""

    kind: str
    routes: int
    modes: tuple[str, ...] = BOTH

    @property
    def hosts(self) -> int:
        return max(1, self.routes // ps.PATHS)

    @property
    def per_team(self) -> int:
        return max(1, self.routes // ds.TEAMS)

    @property
    def gateway(self) -> str:
        return "plain" if self.kind == "plain" else "shaped"

    @property
    def label(self) -> str:
        return {"plain": "plain", "paths": "paths, no policy", "policies": "policies",
                "delegated": "delegated"}[self.kind]


def scaled(routes: int, opts: argparse.Namespace) -> int:
    """A route count times --scale (a check of the benchmark itself at a small size)."""
    return max(ps.PATHS * 10, int(routes * getattr(opts, "scale", 1.0)))


def _write_in_place(path: Path, text: str) -> float:
    """Rewrite the file where it is; returns the time just before the write."""
    t0 = time.monotonic()
    with path.open("w") as f:
        f.write(text)
    return t0


def _setup(lg: LychgateProc, shape: Shape, old_port: int, new_port: int, fresh: int) -> tuple[str, int]:
    address = ADDR.format(1)
    port = free_port_on(address)
    lg.write("gateway.yaml", gateway_yaml(shape.gateway, address, port))
    lg.write("backends.yaml", "---\n".join(service_yaml(f"svc-{j}", old_port) for j in range(SERVICE_POOL)))
    lg.write("fresh.yaml", "---\n".join(service_yaml(f"fresh-{j}", new_port) for j in range(fresh)))
    if shape.kind == "delegated":
        for file, text in ds.files(shape.gateway, shape.per_team, old_port):
            lg.write(file, text)
        return address, port
    if shape.kind == "plain":
        for lo in range(0, shape.routes, 500):
            lg.write(f"plain-{lo:05d}.yaml", "---\n".join(
                route_yaml(route_name(i), "plain", f"svc-{i % SERVICE_POOL}")
                for i in range(lo, min(lo + 500, shape.routes))))
        return address, port
    for file, text in ps.files(shape.gateway, shape.hosts, policies=shape.kind == "policies"):
        lg.write(file, text)
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


def _steps(shape: Shape, mode: str, k: int, fresh: int, new_port: int) -> list[Step]:
    """The changes of round k: one per kind of change the shape has."""
    change = f"{mode[0]}{k}"
    label = shape.label
    if shape.kind == "delegated":
        t = (k * 7 + (0 if mode == "idle" else 3)) % ds.TEAMS
        ns, file = ds.team(t), f"deleg-new-{change}.yaml"

        def text(path: str) -> str:
            return service_yaml(f"fresh-{fresh}", new_port, ns) + "---\n" + ds.child_yaml(
                f"new-{change}", ns, path, f"fresh-{fresh}")
        return [(f"{label}: new child route", ds.HOST, f"/{ns}/n{change}", file, text(f"/{ns}/n{change}"),
                 _from("new")),
                (f"{label}: child route edit", ds.HOST, f"/{ns}/m{change}", file, text(f"/{ns}/m{change}"),
                 _from("new"))]
    if shape.kind == "plain":
        return [(f"{label}: new route", route_host(f"new-{change}"), "/", f"plain-new-{change}.yaml",
                 route_yaml(f"new-{change}", "plain", f"fresh-{fresh}"), _from("new"))]
    h = (k * 37 + (0 if mode == "idle" else 11)) % shape.hosts
    p = 1 + k % (ps.PATHS - 1)
    new_route = (f"{label}: new path route", ps.host(h), f"/n{change}", f"shaped-new-{change}.yaml",
                 path_route_yaml(f"s-new-{change}", "shaped", ps.host(h), f"/n{change}", f"fresh-{fresh}"),
                 _from("new"))
    if shape.kind == "paths":
        return [new_route]
    file, name = ps.route_policy(h)
    return [
        new_route,
        (f"{label}: new policy", ps.host(h), ps.path(p), f"policy-new-{change}.yaml",
         ps.header_policy_yaml(f"p-new-{change}", ps.route(h, p), change), _header_is(change)),
        (f"{label}: policy edit", ps.host(h), "/", file,
         ps.header_policy_yaml(name, ps.route(h, 0), f"edit-{change}"), _header_is(f"edit-{change}")),
    ]


def run_shape(shape: Shape, n: int, old_port: int, new_port: int,
              results: dict[str, dict[str, list[float | None]]]) -> dict[str, int]:
    """n rounds of changes per mode; latencies (ms, None: timed out) into results[what][mode].
    Returns the background prober's requests and failures."""
    with lychgate_process(f"shapes-{shape.kind}-{shape.routes}") as lg:
        address, port = _setup(lg, shape, old_port, new_port, fresh=len(shape.modes) * n)
        lg.start(timeout=300)
        lg.wait_programmed(shape.gateway, timeout=300)
        probe = Probe(address, port)
        last_host = shape.hosts - 1
        paths = None
        if shape.kind == "delegated":
            last = (ds.TEAMS - 1, shape.per_team - 1)
            wait_for(lambda: probe.get(ds.HOST, ds.path(*last))[0] == 200, 300, "the last child route")
            stable = [ds.HOST] * 4
            paths = [ds.path(t, j) for t, j in ((1, 1), (10, shape.per_team // 2), (20, 3), last)]
        elif shape.kind == "plain":
            wait_for(lambda: probe.get(route_host(route_name(shape.routes - 1)))[0] == 200, 300, "the last plain route")
            r = shape.routes
            stable = [route_host(route_name(i)) for i in (1, r // 3 - 1, 2 * r // 3 - 1, r - 1)]
        else:
            if shape.kind == "paths":
                wait_for(lambda: probe.get(ps.host(last_host), ps.path(ps.PATHS - 1))[0] == 200, 300,
                         "the last path route")
            else:
                wait_for(lambda: _header_is("initial")(*probe.get(ps.host(last_host))), 300,
                         "the last per-route policy")
            hs = shape.hosts
            stable = [ps.host(h) for h in (2, hs // 3 - 2, 2 * hs // 3 - 2, hs - 2)]
        prober = BackgroundProber(address, port, stable, interval=0.01, max_seconds=3000, paths=paths).start()
        fresh = 0
        try:
            for mode in shape.modes:
                for k in range(n):
                    for what, host, path, file, text, ok in _steps(shape, mode, k, fresh, new_port):
                        if mode == "idle":
                            wait_idle(lg.pid)
                        t0 = _write_in_place(lg.manifests / file, text)
                        results.setdefault(what, {m: [] for m in shape.modes})[mode].append(
                            _until(probe, host, path, ok, t0))
                    fresh += 1
                log(f"shapes, {shape.kind} at {shape.routes:,} routes ({mode}): " + "; ".join(
                    f"{what} mean {summary([x for x in v[mode] if x is not None]).get('mean', 0):.0f} ms"
                    for what, v in results.items() if mode in v and what.startswith(shape.label + ":")))
        finally:
            prober.stop()
            probe.close()
        return {"requests": prober.total, "failures": len(prober.failures)}


def run(opts: argparse.Namespace) -> dict[str, Any]:
    n = 8 if opts.quick else 25
    routes = scaled(ROUTES, opts)
    results: dict[str, dict[str, list[float | None]]] = {}
    background = {"requests": 0, "failures": 0}
    echo = EchoProcs()
    try:
        old_port, new_port = echo.start("old"), echo.start("new")
        for kind in ("plain", "paths", "policies", "delegated"):
            seen = run_shape(Shape(kind, routes), n, old_port, new_port, results)
            background = {k: background[k] + seen[k] for k in background}
    finally:
        echo.close()
    return _report(results, background, n, routes)


def _report(results: dict[str, dict[str, list[float | None]]], background: dict[str, Any], n: int,
            routes: int) -> dict[str, Any]:
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
        # A delegated tree is one virtual host of 3,000 routes: each change sends Envoy the
        # whole host (one RouteConfiguration entry), which it rebuilds whole.
        mean, worst = (100, 200) if shape.startswith("delegated") else (15, 50)
        checks.append(check(f"propagation at {routes:,} routes, {shape}, back to back: mean", s.get("mean"), mean,
                            "ms"))
        checks.append(check(f"propagation at {routes:,} routes, {shape}, back to back: max",
                            s.get("max") if not timeouts else None, worst, "ms"))
    checks.append(non_200(background))
    return {
        "name": "shapes",
        "title": "Propagation on the shapes users have (real `lychgate run` + Envoy)",
        "description": __doc__.split("\n\n", 1)[1].replace("\n", " ").strip(),
        "tables": [{"columns": [f"shape ({routes:,} routes)", "writes", "n", "timeouts", "p50 (ms)", "mean (ms)",
                                "p90 (ms)", "max (ms)"], "rows": rows}],
        "checks": checks,
        "notes": [f"{n} changes per shape and mode. Background prober: {background['requests']} requests, "
                  f"{background['failures']} failures."],
        "raw": {"results": results, "background": background},
    }


def non_200(background: dict[str, Any]) -> dict[str, Any]:
    return check("non-200 answers on stable routes during the run", background["failures"], 0, "answers",
                 "==", note=f"of {background['requests']} background requests")
