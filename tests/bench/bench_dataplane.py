"""Data plane: requests/s and p99 through the lychgate-configured Envoy, the same
Envoy binary with an equivalent hand-written static config, and the backend
directly, in the same run; and 10,000 path routes in one hostname, last vs first.

Backend: nginx (Debian's nginx-light, one worker, `return 200`). Load: wrk,
1 thread, 32 connections, bounded by -d (5 s per case and round, 4 rounds;
3 s x 2 rounds with --quick), cases interleaved. All on loopback, nothing
pinned: each Envoy runs with its default concurrency (one worker per core) and
spreads over the cores as a user's would. (Pinning every server to one core
and wrk to the other made wrk the bottleneck and hid a proxy whose workers
were unevenly loaded.) The static Envoy is Envoy's defaults: one listener, one
route, the router filter, no other setting. Both Envoys run with the same
flags (lychgate's local deployer's: `--disable-hot-restart`, log level info).

The 10,000 path routes are 10,000 HTTPRoutes on a second Gateway, hostname
paths.bench.test, each one PathPrefix /pNNNNN to nginx. "First" and "last" are
the first and last route of that virtual host in the RouteConfiguration Envoy
holds (read from its admin /config_dump).

A third Gateway has 2,000 hosts, one route (one PathPrefix /) each: its route table is split into
scopes (docs/gateway-api.md, "Large route tables"), so Envoy's connection
manager computes every request's scope key (lychgate's Envoy module when built, else CEL) before it looks
the route up. A fourth has 1,999 hosts, one below the threshold, so its table
stays whole: split / whole is what the scope key costs (issue 17). Besides
req/s, each of those two Envoys' own CPU time per request (utime + stime over
the requests wrk counted) is compared, which other load on the machine
disturbs less. After the rounds, the two, and then lychgate's and the static Envoy with one
route, run in back-to-back pairs (2 s each,
which one goes first alternating, 16 pairs; 8 with --quick): a burst of other
load then falls on both halves of a pair more often than on one, and the
verdict is the median of the pairs' ratios.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.bench.common import (
    ADDR_DATAPLANE,
    LychgateProc,
    Probe,
    artifact,
    check,
    cpu_seconds,
    doc_link,
    free_port,
    free_port_on,
    gateway_yaml,
    log,
    lychgate_process,
    path_route_yaml,
    route_host,
    route_name,
    safe_plots,
    service_yaml,
    wait_for,
    wrk,
)

PATH_ROUTES = 10_000
BULK = 1000
ONE_HOST = "one.bench.test"
SCOPED_HOSTS = 2000  # the default threshold: a scoped route table
SPLIT, WHOLE = "lychgate Envoy, 2,000 hosts (split)", "lychgate Envoy, 1,999 hosts (whole)"
ONE, STATIC = "lychgate Envoy, 1 route", "static Envoy, 1 route"
PAIR_SECONDS = 2
PATHS_HOST = "paths.bench.test"

NGINX_CONF = """\
worker_processes 1;
daemon off;
master_process on;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  keepalive_requests 10000000;
  keepalive_timeout 120s;
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    location / {{ default_type text/plain; return 200 "ok\\n"; }}
  }}
}}
"""

# What a user would write by hand for one listener with one route, Envoy's
# defaults otherwise: one virtual host, one route, one cluster to nginx (static
# endpoint instead of EDS).
STATIC_ENVOY = """\
node: {{id: bench/static, cluster: bench.static}}
admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}
static_resources:
  listeners:
    - name: http-{port}
      address: {{socket_address: {{address: {address}, port_value: {port}}}}}
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: http-{port}
                route_config:
                  name: http-{port}
                  validate_clusters: false
                  ignore_port_in_host_matching: true
                  virtual_hosts:
                    - name: {port}/{host}
                      domains: [{host}]
                      routes:
                        - match: {{prefix: /}}
                          route: {{cluster: nginx, cluster_not_found_response_code: INTERNAL_SERVER_ERROR}}
                http_filters:
                  - name: envoy.filters.http.router
                    typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
  clusters:
    - name: nginx
      type: STATIC
      connect_timeout: 10s
      load_assignment:
        cluster_name: nginx
        endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {backend}}}}}}}}}]}}]
"""


class Nginx:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Nginx:
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(binary).exists():
            raise RuntimeError("nginx is not installed: apt-get update && apt-get install -y nginx-light")
        conf = self.directory / "nginx.conf"
        conf.write_text(NGINX_CONF.format(dir=self.directory, port=self.port))
        self.proc = subprocess.Popen([binary, "-p", str(self.directory), "-c", str(conf), "-e", "stderr"],
                                     stdout=subprocess.DEVNULL, stderr=(self.directory / "stderr.log").open("wb"))
        probe = Probe("127.0.0.1", self.port)
        wait_for(lambda: probe.get("x")[0] == 200, 20, "nginx")
        probe.close()
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class StaticEnvoy:
    def __init__(self, directory: Path, address: str, backend: int, log_level: str) -> None:
        from lychgate.deploy.local import envoy_binary

        self.binary = envoy_binary()
        self.directory, self.address, self.backend, self.log_level = directory, address, backend, log_level
        self.port = free_port_on(address)
        self.admin = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> StaticEnvoy:
        conf = self.directory / "static-envoy.yaml"
        conf.write_text(STATIC_ENVOY.format(admin=self.admin, address=self.address, port=self.port,
                                            host=ONE_HOST, backend=self.backend))
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(conf), "--disable-hot-restart", "--base-id", str(self.admin),
             "-l", self.log_level],
            stdout=subprocess.DEVNULL, stderr=(self.directory / "static-envoy.log").open("wb"),
            start_new_session=True,
        )
        probe = Probe(self.address, self.port)
        wait_for(lambda: probe.get(ONE_HOST)[0] == 200, 30, "the static Envoy")
        probe.close()
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _route_order(admin: str) -> list[str]:
    """Paths of the routes of the paths.bench.test virtual host, in Envoy's order."""
    with urllib.request.urlopen(f"http://{admin}/config_dump?resource=dynamic_route_configs", timeout=30) as resp:
        dump = json.loads(resp.read())
    for cfg in dump.get("configs", []):
        for vh in cfg.get("route_config", {}).get("virtual_hosts", []):
            if PATHS_HOST in vh.get("domains", []):
                paths = []
                for r in vh.get("routes", []):
                    m = r.get("match", {})
                    paths.append(m.get("path_separated_prefix") or m.get("prefix") or m.get("path") or "")
                return paths
    return []


def _hcm_filters(admin: str) -> list[str]:
    """The HTTP filters of the proxy's listeners, as Envoy holds them ("name" or "name (disabled)")."""
    with urllib.request.urlopen(f"http://{admin}/config_dump?resource=dynamic_listeners", timeout=30) as resp:
        dump = json.loads(resp.read())
    out: list[str] = []
    for cfg in dump.get("configs", []):
        listener = cfg.get("active_state", {}).get("listener", {})
        for chain in listener.get("filter_chains", []):
            for f in chain.get("filters", []):
                for hf in f.get("typed_config", {}).get("http_filters", []):
                    out.append(hf["name"] + (" (disabled)" if hf.get("disabled") else ""))
    return out


def _scope_key(admin: str) -> tuple[int, int, str]:
    """(scopes, bits of the scope key, what computes it) of the split table's
    proxy, as Envoy holds them: lychgate's module gets the bits' character sets
    after the header, table and alphabet; CEL has a regex per bit."""
    with urllib.request.urlopen(f"http://{admin}/config_dump", timeout=30) as resp:
        dump = json.loads(resp.read())
    scopes = sum(len(d.get("scoped_route_configs", [])) for c in dump.get("configs", [])
                 for d in c.get("dynamic_scoped_route_configs", []))
    text = json.dumps(dump.get("configs", []))
    module = re.search(r'"value": "x-lychgate-scope ([^"]*)"', text)
    if module is not None:
        return scopes, len(module.group(1).split(" ")) - 2, "lychgate's Envoy module"
    return scopes, text.count(".matches("), "CEL"


def _pairs(cases: dict[str, tuple[str, str]], envoy_pid: dict[str, int], count: int,
           a: str, b: str) -> list[tuple[float, float]]:
    """(a / b req/s, b / a Envoy CPU per request) of `count` back-to-back pairs,
    which one goes first alternating."""
    out = []
    for i in range(count):
        got = {}
        for name in ((a, b) if i % 2 == 0 else (b, a)):
            url, host = cases[name]
            e0 = cpu_seconds(envoy_pid[name])
            res = wrk(url, host, PAIR_SECONDS)
            got[name] = (res.rps, (cpu_seconds(envoy_pid[name]) - e0) / max(res.requests, 1))
        out.append((got[a][0] / got[b][0], got[b][1] / got[a][1]))
        log(f"dataplane pair {i + 1}: {a} / {b} {out[-1][0]:.3f} req/s, {out[-1][1]:.3f} Envoy CPU")
    return out


def _setup_lychgate(lg: LychgateProc, nginx_port: int) -> list[tuple[str, int]]:
    addrs = [ADDR_DATAPLANE.format(k) for k in (1, 2, 5, 6)]
    ports = [free_port_on(a) for a in addrs]
    lg.write("gateways.yaml", "---\n".join(gateway_yaml(name, a, p) for name, a, p in
                                           zip(("dp-one", "dp-paths", "dp-hosts", "dp-whole"), addrs, ports, strict=True)))
    # One rule and one match per route: 2,000 routes split (the default threshold), 1,999 stay whole.
    lg.write("hosts.yaml", "---\n".join(path_route_yaml(route_name(i, "h"), "dp-hosts", route_host(route_name(i, "h")),
                                                        "/", "nginx") for i in range(SCOPED_HOSTS)))
    lg.write("whole.yaml", "---\n".join(path_route_yaml(route_name(i, "w"), "dp-whole", route_host(route_name(i, "w")),
                                                        "/", "nginx") for i in range(SCOPED_HOSTS - 1)))
    lg.write("nginx.yaml", service_yaml("nginx", nginx_port))
    lg.write("route-one.yaml", f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: one, namespace: default}}
spec:
  parentRefs: [{{name: dp-one}}]
  hostnames: [{ONE_HOST}]
  rules:
    - backendRefs: [{{name: nginx, port: 80}}]
""")
    for lo in range(0, PATH_ROUTES, BULK):
        lg.write(f"paths-{lo:05d}.yaml", "---\n".join(
            path_route_yaml(f"p{i:05d}", "dp-paths", PATHS_HOST, f"/p{i:05d}", "nginx")
            for i in range(lo, min(PATH_ROUTES, lo + BULK))))
    return list(zip(addrs, ports, strict=True))


def run(opts: argparse.Namespace) -> dict[str, Any]:
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed: apt-get update && apt-get install -y wrk nginx-light")
    seconds = 3 if opts.quick else 5
    rounds = 2 if opts.quick else 4
    with tempfile.TemporaryDirectory(prefix="lychgate-bench-dataplane-") as tmp, \
            lychgate_process("dataplane") as lg:
        nginx = Nginx(Path(tmp)).start()
        static: StaticEnvoy | None = None
        twin: StaticEnvoy | None = None
        try:
            (one_addr, one_port), (paths_addr, paths_port), (hosts_addr, hosts_port), (whole_addr, whole_port) = \
                _setup_lychgate(lg, nginx.port)
            lg.start(timeout=300)
            lg.wait_programmed("dp-one", timeout=120)
            lg.wait_programmed("dp-paths", timeout=300)
            lg.wait_programmed("dp-hosts", timeout=300)
            lg.wait_programmed("dp-whole", timeout=300)
            probe = Probe(paths_addr, paths_port)
            wait_for(lambda: probe.get(PATHS_HOST, f"/p{PATH_ROUTES - 1:05d}")[0] == 200, 300,
                     "the last path route")
            probe.close()
            proxies = lg.proxies()
            log_level = proxies.get("default/dp-one", {}).get("logLevel") or "info"
            order = _route_order(proxies["default/dp-paths"]["admin"])
            if len(order) >= 2:
                first_path, last_path, order_note = order[0], order[-1], (
                    f"Envoy holds {len(order)} routes in the virtual host; first {order[0]}, last {order[-1]}")
            else:
                first_path, last_path = "/p00000", f"/p{PATH_ROUTES - 1:05d}"
                order_note = ("the virtual host has no plain route list (a matcher tree?); "
                              f"hitting {first_path} and {last_path}")
            log(f"dataplane: {order_note}")
            filters = _hcm_filters(proxies["default/dp-one"]["admin"])
            log(f"dataplane: lychgate's HTTP filters: {', '.join(filters)}")
            static = StaticEnvoy(Path(tmp), ADDR_DATAPLANE.format(3), nginx.port, log_level).start()
            # A second, identical static Envoy: static vs static shows the noise floor of a ratio.
            twin_dir = Path(tmp) / "twin"
            twin_dir.mkdir()
            twin = StaticEnvoy(twin_dir, ADDR_DATAPLANE.format(4), nginx.port, log_level).start()
            time.sleep(2.0)  # let lychgate's passes after the proxies' ACKs finish
            cases = {
                "nginx direct": (f"http://127.0.0.1:{nginx.port}/", "localhost"),
                "static Envoy, 1 route": (f"http://{static.address}:{static.port}/", ONE_HOST),
                "lychgate Envoy, 1 route": (f"http://{one_addr}:{one_port}/", ONE_HOST),
                "static Envoy #2 (A/A)": (f"http://{twin.address}:{twin.port}/", ONE_HOST),
                "lychgate Envoy, 10k paths, first": (f"http://{paths_addr}:{paths_port}{first_path}", PATHS_HOST),
                "lychgate Envoy, 10k paths, last": (f"http://{paths_addr}:{paths_port}{last_path}", PATHS_HOST),
                SPLIT: (f"http://{hosts_addr}:{hosts_port}/", route_host(route_name(SCOPED_HOSTS - 1, "h"))),
                WHOLE: (f"http://{whole_addr}:{whole_port}/", route_host(route_name(SCOPED_HOSTS - 2, "w"))),
            }
            assert static.proc is not None
            envoy_pid = {SPLIT: int(proxies["default/dp-hosts"]["pid"]), WHOLE: int(proxies["default/dp-whole"]["pid"]),
                         ONE: int(proxies["default/dp-one"]["pid"]), STATIC: static.proc.pid}
            split_dump = json.loads(urllib.request.urlopen(
                f"http://{proxies['default/dp-hosts']['admin']}/config_dump?resource=dynamic_scoped_route_configs",
                timeout=30).read())
            if not split_dump.get("configs"):
                raise RuntimeError("the 2,000-host table is not split into scopes")
            scopes, bits, keyed_by = _scope_key(proxies["default/dp-hosts"]["admin"])
            log(f"dataplane: the split table has {scopes} scopes, a key of {bits} bits ({keyed_by})")
            for name, (url, host) in cases.items():  # each answers 200 before load
                addr, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
                p = Probe(addr, int(port))
                status, body = p.get(host, "/" + url.split("/", 3)[3])
                p.close()
                if status != 200:
                    raise RuntimeError(f"{name}: {url} answers {status}: {body[:200]!r}")
            runs: dict[str, list[Any]] = {k: [] for k in cases}
            names = list(cases)
            for rnd in range(rounds):
                for name in (names if rnd % 2 == 0 else list(reversed(names))):
                    url, host = cases[name]
                    cp0 = cpu_seconds(lg.pid)
                    e0 = cpu_seconds(envoy_pid[name]) if name in envoy_pid else 0.0
                    res = wrk(url, host, seconds)
                    res.control_plane_cpu = (cpu_seconds(lg.pid) - cp0) / seconds
                    if name in envoy_pid:  # the proxy's own CPU per request, in microseconds
                        res.envoy_us = (cpu_seconds(envoy_pid[name]) - e0) / max(res.requests, 1) * 1e6
                    runs[name].append(res)
                    log(f"dataplane round {rnd + 1}: {name}: {res.rps:,.0f} req/s, p99 {res.p99_ms:.2f} ms"
                        + (f", {res.non2xx} non-2xx" if res.non2xx else "")
                        + (f", {res.socket_errors} socket errors" if res.socket_errors else ""))
            count = 8 if opts.quick else 16
            one_pairs = _pairs(cases, envoy_pid, count, ONE, STATIC)
            pairs = _pairs(cases, envoy_pid, count, SPLIT, WHOLE)
        finally:
            for envoy in (static, twin):
                if envoy is not None:
                    envoy.stop()
            nginx.stop()
    return _report(runs, seconds, rounds, order_note, filters, one_pairs, pairs, (scopes, bits, keyed_by))


def _report(runs: dict[str, list[Any]], seconds: int, rounds: int, order_note: str,
            filters: list[str], one_pairs: list[tuple[float, float]], pairs: list[tuple[float, float]],
            key: tuple[int, int, str]) -> dict[str, Any]:
    # Medians over rounds; the ratios are taken within each round (the two cases
    # compared run back to back) and their median reported, which keeps bursts
    # of other load on the machine from deciding a verdict.
    agg = {k: {"rps": statistics.median([r.rps for r in v]), "p50_ms": statistics.median([r.p50_ms for r in v]),
               "p99_ms": statistics.median([r.p99_ms for r in v]), "non2xx": sum(r.non2xx for r in v),
               "errors": sum(r.socket_errors for r in v), "rounds": [r.rps for r in v]}
           for k, v in runs.items()}

    def ratio(a: str, b: str) -> tuple[float, list[float]]:
        per_round = [x.rps / y.rps for x, y in zip(runs[a], runs[b], strict=True)]
        return statistics.median(per_round), per_round

    rows = [[k, f"{a['rps']:,.0f}", f"{a['p50_ms']:.2f}", f"{a['p99_ms']:.2f}",
             f"{ratio(k, 'static Envoy, 1 route')[0]:.3f}", a["non2xx"] + a["errors"]] for k, a in agg.items()]
    one = agg["lychgate Envoy, 1 route"]
    first, last = agg["lychgate Envoy, 10k paths, first"], agg["lychgate Envoy, 10k paths, last"]
    _, one_rounds = ratio(ONE, STATIC)
    one_ratio = statistics.median(p[0] for p in one_pairs)
    one_cpu = statistics.median(p[1] for p in one_pairs)
    one_quartiles = statistics.quantiles([p[0] for p in one_pairs], n=4)
    paths_ratio, paths_rounds = ratio("lychgate Envoy, 10k paths, last", "lychgate Envoy, 10k paths, first")
    aa_ratio, aa_rounds = ratio("static Envoy #2 (A/A)", "static Envoy, 1 route")
    _, scoped_rounds = ratio(SPLIT, WHOLE)
    us = {k: statistics.median(r.envoy_us for r in runs[k]) for k in (SPLIT, WHOLE)}
    pair_rps, pair_cpu = sorted(p[0] for p in pairs), sorted(p[1] for p in pairs)
    scoped_ratio, cpu_ratio = statistics.median(pair_rps), statistics.median(pair_cpu)
    quartiles = statistics.quantiles(pair_rps, n=4)
    scopes, bits, keyed_by = key
    cp_cpu = max(getattr(r, "control_plane_cpu", 0.0) for v in runs.values() for r in v)
    checks = [
        check("data plane: lychgate Envoy / static Envoy (Envoy's defaults), 1 route (req/s)", one_ratio, 0.97, "",
              ">=", note=f"median of {len(one_pairs)} back-to-back pairs, quartiles {one_quartiles[0]:.3f}-"
              f"{one_quartiles[2]:.3f}; Envoy CPU per request static / lychgate {one_cpu:.3f}; "
              f"rounds {', '.join(f'{x:.2f}' for x in one_rounds)}; p99 {one['p99_ms']:.2f} ms vs "
              f"{agg['static Envoy, 1 route']['p99_ms']:.2f} ms; noise floor: identical static Envoy vs static "
              f"{aa_ratio:.2f} (per round {', '.join(f'{x:.2f}' for x in aa_rounds)})"),
        check("data plane: 10,000 path routes in one host, last route / first route (req/s)",
              paths_ratio, 0.9, "", ">=",
              note=f"per round {', '.join(f'{x:.2f}' for x in paths_rounds)}; {last['rps']:,.0f} vs "
              f"{first['rps']:,.0f} req/s; p99 {last['p99_ms']:.2f} vs {first['p99_ms']:.2f} ms"),
        check("data plane: split table (2,000 hosts) / whole table (1,999 hosts), req/s", scoped_ratio, 0.95, "",
              ">=", note=f"{scopes} scopes, a key of {bits} bits ({keyed_by}); median of {len(pairs)} back-to-back pairs, "
              f"quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}; Envoy CPU per request whole / split "
              f"{cpu_ratio:.3f}; rounds {', '.join(f'{x:.2f}' for x in scoped_rounds)}"),
        check("data plane: non-2xx answers and socket errors under load", sum(a["non2xx"] + a["errors"] for a in agg.values()),
              0, "", "=="),
    ]
    return {
        "name": "dataplane",
        "title": "Data plane (wrk through Envoy)",
        "description": __doc__.split("\n\n", 1)[1].replace("\n", " ").strip()
        + f" This run: {seconds} s per case and round, {rounds} rounds (order reversed every other round); "
        f"figures are medians over rounds, ratios the median of per-round ratios. {order_note}.",
        "tables": [{"columns": ["case", "req/s", "p50 (ms)", "p99 (ms)", "vs static Envoy", "errors"], "rows": rows}],
        "checks": checks,
        "notes": [
            f"Noise floor: a second static Envoy with the identical config measured {aa_ratio:.3f} of the first "
            f"(per round {', '.join(f'{x:.2f}' for x in aa_rounds)}); a ratio closer to 1 than that spread is "
            "within noise on this 2-core machine. "
            f"Control-plane CPU during the load runs: at most {100 * cp_cpu:.0f}% of one core.",
            f"A split route table (2,000 hosts in {scopes} scopes, a scope key of {bits} bits computed by Envoy "
            f"({keyed_by}) "
            f"for every request) served {scoped_ratio:.3f} of the req/s of a whole table of 1,999 hosts (median of "
            f"{len(pairs)} back-to-back pairs, quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}; in the rounds "
            f"{', '.join(f'{x:.2f}' for x in scoped_rounds)}); Envoy's CPU per request {us[SPLIT]:.1f} µs split, "
            f"{us[WHOLE]:.1f} µs whole (pairs: whole / split {cpu_ratio:.3f}).",
            "HTTP filters of the lychgate-configured listener (the static config has the router only): "
            + ", ".join(f"`{f}`" for f in filters) + "."
        ],
        "plots": safe_plots(_plots, agg),
        "raw": {"aa_ratio": aa_ratio, "aa_rounds": aa_rounds, "one_route_pairs": one_pairs,
                "scoped_ratio": scoped_ratio, "scoped_pairs": pairs,
                "scopes": scopes, "scope_bits": bits, "scope_key": keyed_by, "envoy_us_per_request": us, "control_plane_cpu_max": cp_cpu, "filters": filters, "cases": agg, "wrk": {k: [r.raw for r in v] for k, v in runs.items()}, "order": order_note},
    }


def _plots(agg: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(agg)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4))
    a1.barh(names, [agg[n]["rps"] for n in names])
    a1.set_xlabel("requests/s (wrk -t1 -c32)")
    a1.invert_yaxis()
    a2.barh(names, [agg[n]["p99_ms"] for n in names], color="tab:orange")
    a2.set_xlabel("p99 latency (ms)")
    a2.invert_yaxis()
    a2.set_yticklabels([])
    fig.suptitle("data plane")
    fig.tight_layout()
    path = artifact("dataplane.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return [doc_link(path)]
