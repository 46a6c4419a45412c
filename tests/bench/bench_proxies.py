"""Many proxies: 200 delta-xDS clients on 20 Gateways, then a fleet of 1,000 on one Gateway.

The controller is `tests.bench.xds_controller` in its own process: local mode's
files, store, control loop and ADS server, with no Envoy started. The proxies
are 200 small delta-ADS clients in this process (real gRPC, Envoy's protos):
node id = their Gateway, 10 per Gateway; each subscribes to Clusters and
Listeners (wildcard), then to the endpoints of every Cluster and the routes
every Listener names, and ACKs every response at once, as Envoy does.

Each Gateway has 250 routes (5,000 in all). Then one route file at a time is
rewritten in place (the route's second match changes), cycling over the
Gateways, the next one as soon as the last change is ACKed (no idle wait): the
time from the write until every client of that Gateway has ACKed a
RouteConfiguration received after the write, and every response that reached a
client of another Gateway meanwhile (there must be none). Then the same with a
TrafficPolicy on every Gateway (Gateway-wide request timeout). The controller's
VmRSS before the clients connect and with all of them connected gives the
memory per proxy; its CPU time while they connect and sync, per proxy.

Last, churn with policies (issue 17): a TrafficPolicy (a request header) on
every 10th route as well (500 more), then for 90 s (20 s with --quick) every
100 ms, cycling over the Gateways: a new route file and the deletion of the one
written 20 steps before, a new TrafficPolicy on a route that had none and the
deletion of the one written 20 steps before, and an edit of one of the per-route
TrafficPolicies (10 route creates, 10 route deletes, 10 policy creates, 10
policy deletes and 10 policy edits a second), all 200 clients connected and
ACKing. The controller's VmRSS every 0.5 s: its peak, and whether it stays flat
(median of the last third of the churn minus median of the first third).

Then the fleet (issue 32, tests/bench/fleet.py), with a controller of its own: one
Gateway of 3,000 routes, each to a Service of its own, and proxies joining it 100
at a time up to 1,000 (the controller's RSS after each hundred: the plot), a
change to every one of them at 200 and at 1,000 (write → all ACKed, p50/p99/max,
and responses to 10 proxies of another Gateway), a reconnect storm of all of them
after a controller restart, and the RSS once they have all left. Last, the floor:
the same simulated proxies against a bare gRPC server (tests/bench/grpc_floor.py:
grpc.aio, no control plane) that pushes one RouteConfiguration to all of them,
the smallest and one the size of lychgate's answers above (a change sends each
proxy its route's scope: ~3 KiB at 3,000 routes, 256 scopes), timed as a change is: what
gRPC in Python and the simulated proxies take on this machine before any
control-plane work.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from lychgate.xds import types
from tests.bench import fleet
from tests.bench import policy_shape as ps
from tests.bench.common import (
    REPO,
    SERVICE_POOL,
    MiB,
    Sampler,
    check,
    cpu_seconds,
    flat_limit,
    free_port,
    gateway_yaml,
    log,
    percentile,
    read_status_kb,
    route_name,
    route_yaml,
    service_yaml,
    thirds,
)
from tests.bench.xds_clients import CHANNEL_OPTIONS, DeltaClient, quiet

GATEWAYS = 20
PER_GATEWAY = 10
ROUTES_PER_GATEWAY = 250
ADDR = "127.0.55.{}"
CHURN_STEP = 0.1  # seconds between churn steps
CHURN_WINDOW = 20  # a churned route or policy is deleted this many steps after it was written


def _route_file(directory: Path, g: int, r: int) -> Path:
    return directory / f"route-{g:02d}-{r:03d}.yaml"


def _route_index(g: int, r: int, per_gateway: int) -> int:
    return g * per_gateway + r


def _write_setup(directory: Path, per_gateway: int) -> None:
    (directory / "gateways.yaml").write_text("---\n".join(
        gateway_yaml(f"px-{g:02d}", ADDR.format(1 + g), 8080) for g in range(GATEWAYS)))
    (directory / "services.yaml").write_text("---\n".join(
        service_yaml(f"svc-{i}", 9) for i in range(SERVICE_POOL)))
    for g in range(GATEWAYS):
        for r in range(per_gateway):
            i = _route_index(g, r, per_gateway)
            _route_file(directory, g, r).write_text(
                route_yaml(route_name(i, "px"), f"px-{g:02d}", f"svc-{i % SERVICE_POOL}"))


async def _changes(directory: Path, clients: list[DeltaClient], count: int, rng: random.Random,
                   variant: int, per_gateway: int) -> tuple[list[float], int, int]:
    """Rewrite `count` route files in place, one after the other; per change, the
    time until every client of its Gateway ACKed routes sent after the write."""
    by_gateway: dict[str, list[DeltaClient]] = {}
    for c in clients:
        by_gateway.setdefault(c.gateway, []).append(c)
    latencies: list[float] = []
    timeouts = stray = 0
    for n in range(count):
        g, r = n % GATEWAYS, rng.randrange(per_gateway)
        gateway = f"default/px-{g:02d}"
        seen = {id(c): len(c.acks) for c in clients}
        i = _route_index(g, r, per_gateway)
        text = route_yaml(route_name(i, "px"), f"px-{g:02d}", f"svc-{i % SERVICE_POOL}", variant=variant * 100_000 + n + 1)
        t0 = time.monotonic()
        with _route_file(directory, g, r).open("w") as f:  # in place, as an editor or kubectl does
            f.write(text)
        deadline = t0 + 10
        done: dict[int, float] = {}
        while len(done) < PER_GATEWAY and time.monotonic() < deadline:
            for c in by_gateway[gateway]:
                if id(c) not in done:
                    acked = [t for t, type_url in c.acks[seen[id(c)]:] if type_url == types.ROUTE]
                    if acked:
                        done[id(c)] = acked[0]
            await asyncio.sleep(0.001)
        if len(done) < PER_GATEWAY:
            timeouts += 1
        else:
            latencies.append(1000 * (max(done.values()) - t0))
        await asyncio.sleep(0.02)  # let a stray push to another Gateway show up before counting
        strays = {c.gateway for c in clients if c.gateway != gateway and len(c.acks) > seen[id(c)]}
        if strays:
            log(f"proxies: change {n} on {gateway} reached {', '.join(sorted(strays))}")
        stray += sum(len(c.acks) - seen[id(c)] for c in clients if c.gateway != gateway)
    return latencies, timeouts, stray


def _route_policy_file(directory: Path, g: int, r: int) -> Path:
    return directory / f"route-policy-{g:02d}-{r:03d}.yaml"


def _write_route_policies(directory: Path, per_gateway: int) -> int:
    """A TrafficPolicy on every 10th route of every Gateway; how many."""
    count = 0
    for g in range(GATEWAYS):
        for r in range(0, per_gateway, ps.PATHS):
            _route_policy_file(directory, g, r).write_text(ps.header_policy_yaml(
                f"rp-{g:02d}-{r:03d}", route_name(_route_index(g, r, per_gateway), "px"), "initial"))
            count += 1
    return count


def _churn(directory: Path, per_gateway: int, seconds: float) -> dict[str, int]:
    """Routes and policies created, deleted and edited every CHURN_STEP for `seconds`
    (blocking: run in a thread while the clients ACK on the event loop)."""
    done = {"route creates": 0, "route deletes": 0, "policy creates": 0, "policy deletes": 0, "policy edits": 0}
    tenths = per_gateway // ps.PATHS  # routes with a policy per Gateway: r = 0, 10, 20, ...
    t_start = time.monotonic()
    k = 0
    while time.monotonic() - t_start < seconds:
        tick = time.monotonic()
        g = k % GATEWAYS
        name = route_name(k, "churn")
        (directory / f"churn-{name}.yaml").write_text(route_yaml(name, f"px-{g:02d}", f"svc-{k % SERVICE_POOL}"))
        done["route creates"] += 1
        # A route without a policy (r not a multiple of 10); the 20 live ones are on 20 different Gateways.
        r = ps.PATHS * ((k // GATEWAYS) % tenths) + 1 + (k // GATEWAYS) % (ps.PATHS - 1)
        (directory / f"churn-policy-{k:06d}.yaml").write_text(ps.header_policy_yaml(
            f"churn-{k:06d}", route_name(_route_index(g, r, per_gateway), "px"), f"churn-{k}"))
        done["policy creates"] += 1
        edited = ps.PATHS * ((k // GATEWAYS) % tenths)
        with _route_policy_file(directory, g, edited).open("w") as f:  # in place
            f.write(ps.header_policy_yaml(f"rp-{g:02d}-{edited:03d}",
                                          route_name(_route_index(g, edited, per_gateway), "px"), f"edit-{k}"))
        done["policy edits"] += 1
        if k >= CHURN_WINDOW:
            (directory / f"churn-{route_name(k - CHURN_WINDOW, 'churn')}.yaml").unlink()
            (directory / f"churn-policy-{k - CHURN_WINDOW:06d}.yaml").unlink()
            done["route deletes"] += 1
            done["policy deletes"] += 1
        k += 1
        time.sleep(max(0.0, tick + CHURN_STEP - time.monotonic()))
    return done


async def _settle(clients: list[DeltaClient], timeout: float) -> None:
    """Until every client received something new, then nothing for 2 s (a change to all Gateways is out)."""
    seen = {id(c): len(c.acks) for c in clients}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(len(c.acks) == seen[id(c)] for c in clients):
        await asyncio.sleep(0.1)
    await quiet(clients, 2.0, max(1.0, deadline - time.monotonic()))


async def _run_async(opts: argparse.Namespace, directory: Path, per_gateway: int) -> dict[str, Any]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.bench.xds_controller", str(directory), str(port)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=(directory.parent / "controller.log").open("wb"))
    clients: list[DeltaClient] = []
    channels: list[grpc.aio.Channel] = []
    tasks: list[asyncio.Task[None]] = []
    facts: dict[str, Any] = {"routes": GATEWAYS * per_gateway}
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 300)
        if line.strip() != b"ready":
            raise RuntimeError(f"the controller did not start: {line!r}")
        await asyncio.sleep(1.0)
        facts["rss_before"] = read_status_kb(proc.pid, "VmRSS") / MiB
        t_base = time.monotonic()  # the sampler's time 0
        sampler = Sampler({"controller": proc.pid}, interval=0.5, max_seconds=1800).start()
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        for g in range(GATEWAYS):
            for _ in range(PER_GATEWAY):
                # One channel per proxy: each Envoy has its own connection.
                channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS)
                client = DeltaClient(f"default/px-{g:02d}")
                clients.append(client)
                channels.append(channel)
                tasks.append(asyncio.create_task(client.run(channel)))
        await asyncio.wait_for(asyncio.gather(*(c.synced.wait() for c in clients)), 120)
        facts["connect_s"] = time.monotonic() - t0
        await quiet(clients, 1.0, 60)
        facts["connect_cpu_s"] = cpu_seconds(proc.pid) - cpu0
        facts["rss_connected"] = read_status_kb(proc.pid, "VmRSS") / MiB
        idle0, idle_t = cpu_seconds(proc.pid), time.monotonic()
        await asyncio.sleep(5.0)
        facts["idle_cpu"] = (cpu_seconds(proc.pid) - idle0) / (time.monotonic() - idle_t)
        log(f"proxies: {len(clients)} clients synced in {facts['connect_s']:.1f} s; controller RSS "
            f"{facts['rss_before']:.0f} → {facts['rss_connected']:.0f} MiB; connect CPU {facts['connect_cpu_s']:.2f} s; "
            f"idle CPU {100 * facts['idle_cpu']:.1f}%")
        rng = random.Random(17)
        count = 40 if opts.quick else 100
        rows = {}
        for variant, shape in enumerate(("plain routes", "a TrafficPolicy on every Gateway")):
            if variant:
                for g in range(GATEWAYS):
                    (directory / f"policy-{g:02d}.yaml").write_text(ps.gateway_policy_yaml(f"px-{g:02d}"))
                await _settle(clients, 120)
            c0, w0 = cpu_seconds(proc.pid), time.monotonic()
            latencies, timeouts, stray = await _changes(directory, clients, count, rng, variant, per_gateway)
            cpu = (cpu_seconds(proc.pid) - c0) / (time.monotonic() - w0)
            rows[shape] = (latencies, timeouts, stray, cpu)
            log(f"proxies ({shape}): p50 {percentile(latencies, 50):.1f} ms, p99 {percentile(latencies, 99):.1f} ms, "
                f"{timeouts} timeouts, {stray} responses to other Gateways' proxies")
        facts["rss_peak"] = max((s.rss / MiB for s in sampler.samples["controller"]), default=facts["rss_connected"])
        facts["churn"] = await _churn_phase(opts, directory, per_gateway, clients, proc.pid, sampler, t_base)
        sampler.stop()
    finally:
        for c in clients:
            c.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for channel in channels:
            await channel.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    return _report(rows, len(clients), facts, count)


async def _churn_phase(opts: argparse.Namespace, directory: Path, per_gateway: int, clients: list[DeltaClient],
                       pid: int, sampler: Sampler, t_base: float) -> dict[str, Any]:
    """A TrafficPolicy on every 10th route, then churn of routes and policies; the controller's RSS meanwhile."""
    policies = _write_route_policies(directory, per_gateway)
    await _settle(clients, 300)
    seconds = 20.0 if opts.quick else 90.0
    cpu0, start = cpu_seconds(pid), time.monotonic()
    acks0 = sum(t == types.ROUTE for c in clients for _, t in c.acks)
    done = await asyncio.to_thread(_churn, directory, per_gateway, seconds)
    end = time.monotonic()
    cpu = (cpu_seconds(pid) - cpu0) / (end - start)
    await quiet(clients, 2.0, 300)
    caught_up = time.monotonic() - end - 2.0
    # Evidence that the churn reached the proxies: RouteConfigurations each received meanwhile.
    pushes = (sum(t == types.ROUTE for c in clients for _, t in c.acks) - acks0) / len(clients)
    rss = [s.rss / MiB for s in sampler.samples["controller"] if start - t_base <= s.t <= end - t_base]
    first, last = thirds(rss)
    out = {"route_policies": policies, "seconds": seconds, "done": done, "cpu": cpu, "caught_up_s": caught_up,
           "route_pushes_per_proxy": pushes,
           "rss_mib": rss, "rss_peak": max(rss, default=float("nan")), "rss_first_third": first,
           "rss_last_third": last, "rss_growth": last - first}
    log(f"proxies, churn with policies ({policies} route policies): {done}; controller RSS peak "
        f"{out['rss_peak']:.0f} MiB, first third {first:.0f} → last third {last:.0f} MiB; CPU {100 * cpu:.0f}%; "
        f"quiet {caught_up:.1f} s after; {pushes:.0f} RouteConfigurations per proxy")
    return out


def _report(rows: dict[str, tuple[list[float], int, int, float]], proxies: int, facts: dict[str, Any],
            count: int) -> dict[str, Any]:
    table = [[shape, len(lat) + to, to, f"{percentile(lat, 50):.1f}", f"{statistics.fmean(lat):.1f}",
              f"{percentile(lat, 99):.1f}", f"{max(lat):.1f}", stray, f"{100 * cpu:.0f}"]
             for shape, (lat, to, stray, cpu) in rows.items() if lat]
    plain = rows["plain routes"]
    routes = f"{facts['routes']:,}"
    per_proxy_kib = 1024 * (facts["rss_connected"] - facts["rss_before"]) / proxies
    churn = facts["churn"]
    done = churn["done"]
    checks = [
        check(f"a change reaches all its Gateway's simulated proxies (ACKed), {proxies} proxies: p99",
              percentile(plain[0], 99), 100, "ms", note=f"plain routes; with a TrafficPolicy on every Gateway "
              f"{percentile(rows[list(rows)[1]][0], 99):.0f} ms"),
        check("responses to proxies of unaffected Gateways", sum(r[2] for r in rows.values()), 0, "", "=="),
        check(f"controller RSS, {routes} routes, {proxies} proxies connected, changes: peak", facts["rss_peak"], 300,
              "MiB"),
        check(f"controller RSS, {routes} routes with policies, {proxies} proxies connected, churn: peak",
              churn["rss_peak"], 150, "MiB", note=f"{churn['route_policies']} route TrafficPolicies and one per "
              f"Gateway; {churn['seconds']:.0f} s of churn"),
        check(f"controller RSS, {routes} routes with policies, {proxies} proxies connected, churn: "
              "growth (median of the last third minus the first)", churn["rss_growth"],
              flat_limit(churn["rss_first_third"]), "MiB",
              note=f"{churn['rss_first_third']:.0f} → {churn['rss_last_third']:.0f} MiB"),
    ]
    return {
        "name": "proxies",
        "title": "Many proxies (200 delta-xDS clients on 20 Gateways; 1,000 on one)",
        "description": __doc__.split("\n\n", 1)[1].replace("\n", " ").strip(),
        "tables": [
            {"columns": ["proxies", "Gateways", "routes", "synced after (s)", "controller RSS before (MiB)",
                         "with the proxies (MiB)", "per proxy (KiB)", "connect CPU per proxy (ms)",
                         "idle CPU with all connected (% of a core)"],
             "rows": [[proxies, GATEWAYS, facts["routes"], f"{facts['connect_s']:.1f}", f"{facts['rss_before']:.0f}",
                       f"{facts['rss_connected']:.0f}", f"{per_proxy_kib:.0f}",
                       f"{1000 * facts['connect_cpu_s'] / proxies:.1f}", f"{100 * facts['idle_cpu']:.1f}"]]},
            {"columns": ["shape", "changes", "timeouts", "p50 (ms)", "mean (ms)", "p99 (ms)", "max (ms)",
                         "responses to other Gateways", "controller CPU (% of a core)"], "rows": table},
            {"title": "Churn with policies, all proxies connected",
             "columns": ["seconds", "route TrafficPolicies", *done, "controller CPU (% of a core)",
                         "RouteConfigurations per proxy", "RSS first third (MiB)", "RSS last third (MiB)", "RSS peak (MiB)",
                         "quiet after (s)"],
             "rows": [[f"{churn['seconds']:.0f}", churn["route_policies"], *done.values(), f"{100 * churn['cpu']:.0f}",
                       f"{churn['route_pushes_per_proxy']:.0f}", f"{churn['rss_first_third']:.0f}", f"{churn['rss_last_third']:.0f}",
                       f"{churn['rss_peak']:.0f}", f"{churn['caught_up_s']:.1f}"]]},
        ],
        "checks": checks,
        "notes": [f"{count} changes per shape, each a route file rewritten in place; latency = write → the last of "
                  f"the Gateway's {PER_GATEWAY} clients ACKs a RouteConfiguration received after the write. "
                  f"Controller RSS peak {facts['rss_peak']:.0f} MiB before the churn, {churn['rss_peak']:.0f} MiB "
                  "during it."],
        "raw": {shape: {"latencies_ms": lat, "timeouts": to, "stray": stray, "cpu": cpu}
                for shape, (lat, to, stray, cpu) in rows.items()} | facts,
    }


def run(opts: argparse.Namespace) -> dict[str, Any]:
    scale = getattr(opts, "scale", 1.0)
    with tempfile.TemporaryDirectory(prefix="lychgate-bench-proxies-") as tmp:
        directory = Path(tmp) / "manifests"
        directory.mkdir()
        per_gateway = max(2 * ps.PATHS, int(ROUTES_PER_GATEWAY * scale))
        _write_setup(directory, per_gateway)
        result = asyncio.run(_run_async(opts, directory, per_gateway))
    with tempfile.TemporaryDirectory(prefix="lychgate-bench-fleet-") as tmp:
        directory = Path(tmp) / "manifests"
        directory.mkdir()
        routes = max(100, int(fleet.ROUTES * scale))
        fleet.write_setup(directory, routes)
        measured = asyncio.run(fleet.run_fleet(directory, routes, fleet.MEASURE_AT, 30 if opts.quick else 100))
    part = fleet.report(measured)
    result["tables"] += part["tables"]
    result["checks"] += part["checks"]
    result["plots"] = part["plots"]
    result["raw"]["fleet"] = measured
    return result
