"""Many proxies: 200 delta-xDS clients on 20 Gateways, one control plane.

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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from lychgate.xds import types
from tests.bench.common import (
    REPO,
    SERVICE_POOL,
    MiB,
    Sampler,
    check,
    cpu_seconds,
    free_port,
    gateway_yaml,
    log,
    percentile,
    read_status_kb,
    route_name,
    route_yaml,
    service_yaml,
)

GATEWAYS = 20
PER_GATEWAY = 10
ROUTES_PER_GATEWAY = 250
ADDR = "127.0.55.{}"


class DeltaClient:
    """One simulated proxy: a delta ADS stream that subscribes as Envoy does and
    ACKs every response as soon as it arrives."""

    def __init__(self, gateway: str) -> None:
        self.gateway = gateway
        self.requests: asyncio.Queue[discovery_pb2.DeltaDiscoveryRequest | None] = asyncio.Queue()
        self.acks: list[tuple[float, str]] = []  # (monotonic time of the ACK, type)
        self.subscribed: dict[str, set[str]] = {types.ENDPOINT: set(), types.ROUTE: set()}
        self.synced = asyncio.Event()

    async def _outgoing(self) -> Any:
        node = discovery_pb2.DeltaDiscoveryRequest().node
        node.id, node.cluster = self.gateway, "bench"
        for type_url in (types.CLUSTER, types.LISTENER):
            request = discovery_pb2.DeltaDiscoveryRequest(type_url=type_url)
            request.node.CopyFrom(node)
            yield request
        while (request := await self.requests.get()) is not None:
            yield request

    async def run(self, channel: grpc.aio.Channel) -> None:
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
            async for response in stub.DeltaAggregatedResources(self._outgoing()):
                self._follow(response)
                self.requests.put_nowait(discovery_pb2.DeltaDiscoveryRequest(
                    type_url=response.type_url, response_nonce=response.nonce))
                self.acks.append((time.monotonic(), response.type_url))
                if response.type_url == types.ROUTE:
                    self.synced.set()

    def _follow(self, response: discovery_pb2.DeltaDiscoveryResponse) -> None:
        """Subscribe to what Clusters and Listeners name, as Envoy does."""
        wanted: set[str] = set()
        if response.type_url == types.CLUSTER:
            follow = types.ENDPOINT
            wanted = {r.name for r in response.resources}
        elif response.type_url == types.LISTENER:
            follow = types.ROUTE
            for r in response.resources:
                listener = listener_pb2.Listener()
                r.resource.Unpack(listener)
                for chain in listener.filter_chains:
                    for f in chain.filters:
                        hcm = hcm_pb.HttpConnectionManager()
                        if f.typed_config.Unpack(hcm) and hcm.HasField("rds"):
                            wanted.add(hcm.rds.route_config_name)
        else:
            return
        new = wanted - self.subscribed[follow]
        if new:
            self.subscribed[follow] |= new
            self.requests.put_nowait(discovery_pb2.DeltaDiscoveryRequest(
                type_url=follow, resource_names_subscribe=sorted(new)))

    def close(self) -> None:
        self.requests.put_nowait(None)


def _policy_yaml(gateway: str) -> str:
    return f"""\
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: {gateway}-timeouts, namespace: default}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: {gateway}}}]
  timeouts: {{request: 30s}}
"""


def _route_file(directory: Path, g: int, r: int) -> Path:
    return directory / f"route-{g:02d}-{r:03d}.yaml"


def _write_setup(directory: Path) -> None:
    (directory / "gateways.yaml").write_text("---\n".join(
        gateway_yaml(f"px-{g:02d}", ADDR.format(1 + g), 8080) for g in range(GATEWAYS)))
    (directory / "services.yaml").write_text("---\n".join(
        service_yaml(f"svc-{i}", 9) for i in range(SERVICE_POOL)))
    for g in range(GATEWAYS):
        for r in range(ROUTES_PER_GATEWAY):
            i = g * ROUTES_PER_GATEWAY + r
            _route_file(directory, g, r).write_text(
                route_yaml(route_name(i, "px"), f"px-{g:02d}", f"svc-{i % SERVICE_POOL}"))


async def _changes(directory: Path, clients: list[DeltaClient], count: int, rng: random.Random,
                   variant: int) -> tuple[list[float], int, int]:
    """Rewrite `count` route files in place, one after the other; per change, the
    time until every client of its Gateway ACKed routes sent after the write."""
    by_gateway: dict[str, list[DeltaClient]] = {}
    for c in clients:
        by_gateway.setdefault(c.gateway, []).append(c)
    latencies: list[float] = []
    timeouts = stray = 0
    for n in range(count):
        g, r = n % GATEWAYS, rng.randrange(ROUTES_PER_GATEWAY)
        gateway = f"default/px-{g:02d}"
        seen = {id(c): len(c.acks) for c in clients}
        text = route_yaml(route_name(g * ROUTES_PER_GATEWAY + r, "px"), f"px-{g:02d}",
                          f"svc-{(g * ROUTES_PER_GATEWAY + r) % SERVICE_POOL}", variant=variant * 100_000 + n + 1)
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


async def _quiet(clients: list[DeltaClient], seconds: float, timeout: float) -> None:
    """Until no client has received anything for `seconds` (a rollout is over)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = max((c.acks[-1][0] for c in clients if c.acks), default=0.0)
        if time.monotonic() - last >= seconds:
            return
        await asyncio.sleep(0.1)


async def _run_async(opts: argparse.Namespace, directory: Path) -> dict[str, Any]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.bench.xds_controller", str(directory), str(port)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=(directory.parent / "controller.log").open("wb"))
    clients: list[DeltaClient] = []
    channels: list[grpc.aio.Channel] = []
    tasks: list[asyncio.Task[None]] = []
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 300)
        if line.strip() != b"ready":
            raise RuntimeError(f"the controller did not start: {line!r}")
        await asyncio.sleep(1.0)
        rss_before = read_status_kb(proc.pid, "VmRSS") / MiB
        sampler = Sampler({"controller": proc.pid}, interval=0.5).start()
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        for g in range(GATEWAYS):
            for _ in range(PER_GATEWAY):
                # One channel per proxy: each Envoy has its own connection.
                channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[
                    ("grpc.max_receive_message_length", 64 * 1024 * 1024), ("grpc.use_local_subchannel_pool", 1)])
                client = DeltaClient(f"default/px-{g:02d}")
                clients.append(client)
                channels.append(channel)
                tasks.append(asyncio.create_task(client.run(channel)))
        await asyncio.wait_for(asyncio.gather(*(c.synced.wait() for c in clients)), 120)
        connect_s = time.monotonic() - t0
        await _quiet(clients, 1.0, 60)
        connect_cpu = cpu_seconds(proc.pid) - cpu0
        rss_connected = read_status_kb(proc.pid, "VmRSS") / MiB
        idle0, idle_t = cpu_seconds(proc.pid), time.monotonic()
        await asyncio.sleep(5.0)
        idle_cpu = (cpu_seconds(proc.pid) - idle0) / (time.monotonic() - idle_t)
        log(f"proxies: {len(clients)} clients synced in {connect_s:.1f} s; controller RSS {rss_before:.0f} → "
            f"{rss_connected:.0f} MiB; connect CPU {connect_cpu:.2f} s; idle CPU {100 * idle_cpu:.1f}%")
        rng = random.Random(17)
        count = 40 if opts.quick else 100
        rows = {}
        for variant, shape in enumerate(("plain routes", "a TrafficPolicy on every Gateway")):
            if variant:
                for g in range(GATEWAYS):
                    (directory / f"policy-{g:02d}.yaml").write_text(_policy_yaml(f"px-{g:02d}"))
                await _quiet(clients, 1.0, 120)
            c0, w0 = cpu_seconds(proc.pid), time.monotonic()
            latencies, timeouts, stray = await _changes(directory, clients, count, rng, variant)
            cpu = (cpu_seconds(proc.pid) - c0) / (time.monotonic() - w0)
            rows[shape] = (latencies, timeouts, stray, cpu)
            log(f"proxies ({shape}): p50 {percentile(latencies, 50):.1f} ms, p99 {percentile(latencies, 99):.1f} ms, "
                f"{timeouts} timeouts, {stray} responses to other Gateways' proxies")
        sampler.stop()
        rss_peak = max((s.rss / MiB for s in sampler.samples["controller"]), default=rss_connected)
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
    return _report(rows, len(clients), rss_before, rss_connected, rss_peak, connect_s, connect_cpu, idle_cpu, count)


def _report(rows: dict[str, tuple[list[float], int, int, float]], proxies: int, rss_before: float,
            rss_connected: float, rss_peak: float, connect_s: float, connect_cpu: float, idle_cpu: float,
            count: int) -> dict[str, Any]:
    table = [[shape, len(lat) + to, to, f"{percentile(lat, 50):.1f}", f"{statistics.fmean(lat):.1f}",
              f"{percentile(lat, 99):.1f}", f"{max(lat):.1f}", stray, f"{100 * cpu:.0f}"]
             for shape, (lat, to, stray, cpu) in rows.items() if lat]
    plain = rows["plain routes"]
    per_proxy_kib = 1024 * (rss_connected - rss_before) / proxies
    checks = [
        check("a change reaches all its Gateway's simulated proxies (ACKed), 200 proxies: p99", percentile(plain[0], 99),
              100, "ms", note=f"plain routes; with a TrafficPolicy on every Gateway "
              f"{percentile(rows[list(rows)[1]][0], 99):.0f} ms (full passes until policy changes are incremental)"),
        check("responses to proxies of unaffected Gateways", sum(r[2] for r in rows.values()), 0, "", "=="),
        check("controller RSS, 5,000 routes, 200 proxies connected, changes: peak", rss_peak, 300, "MiB"),
    ]
    return {
        "name": "proxies",
        "title": "Many proxies (200 delta-xDS clients)",
        "description": __doc__.split("\n\n", 1)[1].replace("\n", " ").strip(),
        "tables": [
            {"columns": ["proxies", "Gateways", "routes", "synced after (s)", "controller RSS before (MiB)",
                         "with the proxies (MiB)", "per proxy (KiB)", "connect CPU per proxy (ms)",
                         "idle CPU with all connected (% of a core)"],
             "rows": [[proxies, GATEWAYS, GATEWAYS * ROUTES_PER_GATEWAY, f"{connect_s:.1f}", f"{rss_before:.0f}",
                       f"{rss_connected:.0f}", f"{per_proxy_kib:.0f}", f"{1000 * connect_cpu / proxies:.1f}",
                       f"{100 * idle_cpu:.1f}"]]},
            {"columns": ["shape", "changes", "timeouts", "p50 (ms)", "mean (ms)", "p99 (ms)", "max (ms)",
                         "responses to other Gateways", "controller CPU (% of a core)"], "rows": table},
        ],
        "checks": checks,
        "notes": [f"{count} changes per shape, each a route file rewritten in place; latency = write → the last of "
                  f"the Gateway's {PER_GATEWAY} clients ACKs a RouteConfiguration received after the write. "
                  f"Controller RSS peak {rss_peak:.0f} MiB."],
        "raw": {shape: {"latencies_ms": lat, "timeouts": to, "stray": stray, "cpu": cpu}
                for shape, (lat, to, stray, cpu) in rows.items()}
        | {"rss_before": rss_before, "rss_connected": rss_connected, "rss_peak": rss_peak,
           "connect_s": connect_s, "connect_cpu_s": connect_cpu, "idle_cpu": idle_cpu},
    }


def run(opts: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lychgate-bench-proxies-") as tmp:
        directory = Path(tmp) / "manifests"
        directory.mkdir()
        _write_setup(directory)
        return asyncio.run(_run_async(opts, directory))
