"""A fleet of proxies on one Gateway (issue 32), part of the proxies benchmark.

One Gateway of 3,000 routes, each to a Service of its own (3,000 Clusters and
their endpoints), and beside it a small Gateway of 30 routes with
10 proxies of its own. Simulated delta-xDS proxies (tests/bench/xds_clients.py)
join the big Gateway 100 at a time up to 1,000; after each hundred, once all
are synced and the streams quiet, the controller's VmRSS (the plot of RSS
against proxies connected). At 200 and at 1,000 proxies, route files of the
big Gateway are rewritten in place one after the other: the time from the write
until every proxy of the Gateway has ACKed a RouteConfiguration received after
it (p50/p99/max; the first change after the fleet joined is reported on its own:
_fan_out says why), every response that reached the small Gateway's proxies
meanwhile (there must be none), and the CPU time per change of the controller
and of the simulated fleet (at 1,000 proxies they are about equal: the fleet's
own cost bounds what the latency can show). Then the reconnect storm: the controller is
stopped and started again, and once it is ready all 1,010 proxies reconnect at
once, as Envoy does (their subscriptions and the versions they hold): the time
until all are synced, and the controller's RSS peak meanwhile against its RSS
with them connected before the restart. Then every proxy disconnects: the RSS
with none connected against the restarted controller's before the storm. Last,
the floor: the same simulated proxies, joining the same way, against a bare gRPC
server (tests/bench/grpc_floor.py) that pushes one RouteConfiguration to all of
them, the smallest and one the size of lychgate's answers, timed as a change is:
what gRPC in Python and the simulated proxies take on this machine before any
control-plane work.

`python -m tests.bench.fleet [--proxies 200,1000] [--changes N] [--src DIR]`
runs this part alone (`--src` runs the controller from another source tree:
A/B comparisons).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from lychgate.xds import types
from tests.bench import grpc_floor
from tests.bench.common import (
    REPO,
    MiB,
    Sampler,
    artifact,
    check,
    cpu_seconds,
    doc_link,
    free_port,
    gateway_yaml,
    log,
    percentile,
    read_status_kb,
    route_name,
    route_yaml,
    safe_plots,
    service_yaml,
)
from tests.bench.xds_clients import CHANNEL_OPTIONS, DeltaClient, quiet

ROUTES = 3000
OTHER_ROUTES = 30
OTHER_PROXIES = 10
STEP = 100  # proxies joining at a time
FLEET = "default/fleet"
OTHER = "default/fleet-other"
ADDR = "127.0.55.{}"
MEASURE_AT = (200, 1000)


def _route_file(directory: Path, r: int) -> Path:
    return directory / f"fleet-route-{r:04d}.yaml"


def write_setup(directory: Path, routes: int) -> None:
    (directory / "fleet-gateways.yaml").write_text(gateway_yaml("fleet", ADDR.format(101), 8080) + "---\n"
                                                   + gateway_yaml("fleet-other", ADDR.format(102), 8080))
    (directory / "fleet-services.yaml").write_text("---\n".join(
        service_yaml(f"fsvc-{i}", 9) for i in range(routes)))
    for r in range(routes):
        _route_file(directory, r).write_text(route_yaml(route_name(r, "fl"), "fleet", f"fsvc-{r}"))
    for r in range(OTHER_ROUTES):
        (directory / f"fleet-other-{r:03d}.yaml").write_text(
            route_yaml(route_name(r, "fo"), "fleet-other", f"fsvc-{r}"))


@dataclass
class Fleet:
    port: int
    clients: list[DeltaClient] = field(default_factory=list)
    channels: list[grpc.aio.Channel] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self, clients: list[DeltaClient]) -> None:
        """Each client on its own channel (each Envoy has its own connection)."""
        for client in clients:
            channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.port}", options=CHANNEL_OPTIONS)
            self.channels.append(channel)
            self.tasks.append(asyncio.create_task(client.run(channel)))

    def add(self, gateway: str, count: int) -> list[DeltaClient]:
        new = [DeltaClient(gateway) for _ in range(count)]
        self.clients += new
        self.start(new)
        return new

    async def drop(self) -> None:
        """Every stream ends; the clients keep what they hold (for a reconnect)."""
        for c in self.clients:
            c.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for channel in self.channels:
            await channel.close()
        self.tasks, self.channels = [], []


async def _synced(clients: list[DeltaClient], timeout: float) -> bool:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(c.synced.wait() for c in clients)), timeout)
        return True
    return False


async def _fan_out(directory: Path, fleet: list[DeltaClient], others: list[DeltaClient], count: int,
                   rng: random.Random, routes: int, variant: int, pid: int) -> dict[str, Any]:
    """Rewrite `count` route files of the big Gateway in place, one after the other;
    per change, the time until every proxy of the Gateway ACKed routes sent after the write,
    and the CPU time of the controller (`pid`) and of the simulated fleet per change. The
    fleet's garbage collector is off meanwhile: its pauses (up to 200 ms with 1,000 clients)
    are not the controller's.

    The first change after the fleet joined is timed on its own, not among the `count`: with
    1,000 proxies it took about twice as long as the next ones (195-218 ms against ~100) in the
    simulated fleet's own process. The controller had written every response of that change
    87 ms after its first, as for the next ones (90-119 ms; measured in its stream loop)."""
    latencies: list[float] = []
    first: list[float] = []
    gc.disable()
    try:
        await _changes(directory, fleet, 1, rng, routes, variant, first)
        stray0 = sum(len(c.acks) for c in others)
        cpu0, own0 = cpu_seconds(pid), time.process_time()
        await _changes(directory, fleet, count, rng, routes, variant + 1, latencies)
    finally:
        gc.enable()
    cpu, own = (cpu_seconds(pid) - cpu0) / count, (time.process_time() - own0) / count
    return {"latencies_ms": latencies, "timeouts": count - len(latencies),
            "stray": sum(len(c.acks) for c in others) - stray0, "controller_cpu_ms": 1000 * cpu,
            "fleet_cpu_ms": 1000 * own, "first_ms": first[0] if first else float("nan")}


async def _changes(directory: Path, fleet: list[DeltaClient], count: int, rng: random.Random, routes: int,
                   variant: int, latencies: list[float]) -> None:
    for n in range(count):
        r = rng.randrange(routes)
        seen = [len(c.acks) for c in fleet]
        text = route_yaml(route_name(r, "fl"), "fleet", f"fsvc-{r}", variant=variant + n + 1)
        t0 = time.monotonic()
        with _route_file(directory, r).open("w") as f:  # in place, as an editor or kubectl does
            f.write(text)
        last = await _all_acked(fleet, seen, t0)
        if last is not None:
            latencies.append(1000 * (last - t0))
        await asyncio.sleep(0.02)  # let a stray push to the other Gateway show up


async def _all_acked(clients: list[DeltaClient], seen: list[int], t0: float) -> float | None:
    """When the last of `clients` ACKed a RouteConfiguration received after its `seen`-th ACK
    (monotonic time, t0 at the earliest); None if one had not 10 s after t0."""
    deadline = t0 + 10
    waiting = list(range(len(clients)))
    last = t0
    while waiting and time.monotonic() < deadline:
        still = []
        for i in waiting:
            acked = next((t for t, type_url in clients[i].acks[seen[i]:] if type_url == types.ROUTE), None)
            if acked is None:
                still.append(i)
            else:
                last = max(last, acked)
        waiting = still
        if waiting:
            await asyncio.sleep(0.005)
    return None if waiting else last


def _start_controller(directory: Path, port: int, src: str | None) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src, str(REPO)])
    return subprocess.Popen([sys.executable, "-m", "tests.bench.xds_controller", str(directory), str(port)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=(directory.parent / "fleet-controller.log").open("ab"))


async def _ready(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 300)
    if line.strip() != b"ready":
        raise RuntimeError(f"the controller did not start: {line!r}")
    await asyncio.sleep(1.0)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _rss(pid: int) -> float:
    return read_status_kb(pid, "VmRSS") / MiB


async def run_fleet(directory: Path, routes: int, proxies: tuple[int, ...], changes: int,
                    src: str | None = None) -> dict[str, Any]:
    """The whole part; `proxies` are the counts where fan-out is measured (the largest is the fleet's size)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))  # a socket per proxy
    port = free_port()
    top = max(proxies)
    out: dict[str, Any] = {"routes": routes, "proxies": top, "curve": [], "fan_out": {}}
    procs = [_start_controller(directory, port, src)]
    proc = procs[0]
    fleet = Fleet(port)
    try:
        await _ready(proc)
        out["rss_base"] = _rss(proc.pid)
        log(f"fleet: controller RSS {out['rss_base']:.0f} MiB with no proxy")
        out["curve"].append((0, out["rss_base"]))
        others = fleet.add(OTHER, OTHER_PROXIES)
        if not await _synced(others, 60):
            raise RuntimeError("the small Gateway's proxies did not sync")
        rng = random.Random(32)
        big: list[DeltaClient] = []
        while len(big) < top:
            batch = fleet.add(FLEET, min(STEP, top - len(big)))
            big += batch
            t0 = time.monotonic()
            if not await _synced(batch, 180):
                raise RuntimeError(f"{len(big)} proxies: not all synced in 180 s")
            synced_s = time.monotonic() - t0
            await quiet(fleet.clients, 1.0, 60)
            out["curve"].append((len(big), _rss(proc.pid)))
            log(f"fleet: {len(big)} proxies synced ({synced_s:.1f} s for the last {len(batch)}), controller RSS "
                f"{out['curve'][-1][1]:.0f} MiB")
            if len(big) in proxies:
                big[0].route_bytes = []  # the size of lychgate's answers (for the floor)
                fan = await _fan_out(directory, big, others, changes, rng, routes, 1000 * len(big), proc.pid)
                out["answer_bytes"] = out.get("answer_bytes", []) + big[0].route_bytes
                big[0].route_bytes = None
                out["fan_out"][len(big)] = fan
                lat = fan["latencies_ms"]
                log(f"fleet: {len(big)} proxies, a change to all: p50 {percentile(lat, 50):.1f} ms, p99 "
                    f"{percentile(lat, 99):.1f} ms, max {max(lat, default=float('nan')):.1f} ms; {fan['timeouts']} "
                    f"timeouts, {fan['stray']} responses to the other Gateway's proxies; CPU per change: controller "
                    f"{fan['controller_cpu_ms']:.1f} ms, the simulated proxies {fan['fleet_cpu_ms']:.1f} ms; the "
                    f"first change after the fleet joined (not counted) {fan['first_ms']:.1f} ms")
        out["storm"] = await _storm(directory, port, src, fleet, procs)
        proc = procs[-1]
        await fleet.drop()
        await asyncio.sleep(3.0)
        out["rss_disconnected"] = _rss(proc.pid)
        log(f"fleet: all disconnected, controller RSS {out['rss_disconnected']:.0f} MiB "
            f"(restarted controller before the storm: {out['storm']['rss_base']:.0f} MiB)")
    finally:
        await fleet.drop()
        for p in procs:
            _stop(p)
    sizes = sorted(out.get("answer_bytes", []))
    out["floor"] = await _floor(proxies, changes, (0, sizes[len(sizes) // 2] if sizes else 0))
    return out


async def _floor(proxies: tuple[int, ...], pushes: int, sizes: tuple[int, int]) -> dict[str, dict[str, Any]]:
    """The same simulated proxies against a bare gRPC server (tests/bench/grpc_floor.py), joining
    100 at a time; at each count of `proxies`, `pushes` pushes one after the other of each answer
    size of `sizes` (the smallest; the median of lychgate's answers): the time from the push until
    every proxy ACKed it, and the CPU per push of the server and of the simulated proxies (their
    collector off meanwhile, as in _fan_out). Keyed "PROXIES/SIZE"."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.bench.grpc_floor", str(port)], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None
    fleet = Fleet(port)
    out: dict[str, dict[str, Any]] = {}
    try:
        await _ready(proc)
        clients: list[DeltaClient] = []
        while len(clients) < max(proxies):
            batch = fleet.add(grpc_floor.GATEWAY, min(STEP, max(proxies) - len(clients)))
            clients += batch
            if not await _synced(batch, 60):
                raise RuntimeError("the bare gRPC server's proxies did not sync")
            if len(clients) in proxies:
                await quiet(clients, 1.0, 60)
                for size in sizes:
                    out[f"{len(clients)}/{size}"] = await _pushes(proc, clients, pushes, size)
    finally:
        await fleet.drop()
        proc.stdin.close()
        _stop(proc)
    return out


async def _pushes(proc: subprocess.Popen[bytes], clients: list[DeltaClient], count: int, size: int) -> dict[str, Any]:
    assert proc.stdin is not None
    latencies: list[float] = []
    gc.disable()
    try:
        cpu0, own0 = cpu_seconds(proc.pid), time.process_time()
        for _ in range(count):
            seen = [len(c.acks) for c in clients]
            t0 = time.monotonic()
            proc.stdin.write(b"%d\n" % size)
            proc.stdin.flush()
            last = await _all_acked(clients, seen, t0)
            if last is None:
                raise RuntimeError("a push did not reach every proxy of the bare gRPC server in 10 s")
            latencies.append(1000 * (last - t0))
            await asyncio.sleep(0.02)
        cpu, own = (cpu_seconds(proc.pid) - cpu0) / count, (time.process_time() - own0) / count
    finally:
        gc.enable()
    log(f"fleet, bare gRPC server: {len(clients)} proxies, a push of {size} bytes to all: p50 "
        f"{percentile(latencies, 50):.1f} ms, "
        f"p99 {percentile(latencies, 99):.1f} ms; CPU per push: server {1000 * cpu:.1f} ms, the simulated proxies "
        f"{1000 * own:.1f} ms")
    return {"latencies_ms": latencies, "server_cpu_ms": 1000 * cpu, "fleet_cpu_ms": 1000 * own,
            "answer_bytes": len(grpc_floor.answer(1, size))}


async def _storm(directory: Path, port: int, src: str | None, fleet: Fleet,
                 procs: list[subprocess.Popen[bytes]]) -> dict[str, Any]:
    """Restart the controller (appended to `procs`); once it is ready every proxy reconnects at once."""
    before = _rss(procs[-1].pid)
    _stop(procs[-1])
    await fleet.drop()
    new = _start_controller(directory, port, src)
    procs.append(new)
    await _ready(new)
    base = _rss(new.pid)
    sampler = Sampler({"controller": new.pid}, interval=0.1, max_seconds=120).start()
    t0, cpu0, own0 = time.monotonic(), cpu_seconds(new.pid), time.process_time()
    fleet.start(fleet.clients)
    ok = await _synced(fleet.clients, 60)
    served = time.monotonic() - t0
    cpu, own = cpu_seconds(new.pid) - cpu0, time.process_time() - own0
    await quiet(fleet.clients, 1.0, 60)
    sampler.stop()
    peak = max((s.rss / MiB for s in sampler.samples["controller"]), default=float("nan"))
    after = _rss(new.pid)
    log(f"fleet: reconnect storm of {len(fleet.clients)} proxies served in {served:.2f} s"
        f"{'' if ok else ' (NOT all synced)'}; controller RSS {before:.0f} MiB before the restart, "
        f"{base:.0f} restarted, peak {peak:.0f}, {after:.0f} after; CPU meanwhile: controller {cpu:.1f} s, "
        f"the simulated proxies {own:.1f} s")
    return {"served_s": served if ok else float("nan"), "cpu_s": cpu, "clients_cpu_s": own, "rss_before_restart": before,
            "rss_base": base, "rss_peak": peak, "rss_after": after}


def report(r: dict[str, Any]) -> dict[str, Any]:
    """Tables, checks and the plot for the proxies benchmark."""
    base = r["rss_base"]
    per_100 = {n: 100 * (rss - base) / n for n, rss in r["curve"] if n in r["fan_out"]}
    storm = r["storm"]
    floor = r.get("floor", {})
    checks = []
    for n, limit in zip(MEASURE_AT, (30, 60), strict=True):
        if n in r["fan_out"]:
            lat = r["fan_out"][n]["latencies_ms"]
            bare = "".join(
                f"; a bare gRPC server, the same proxies, answers of {f['answer_bytes'] / 1024:.1f} KiB: p50 "
                f"{percentile(f['latencies_ms'], 50):.1f}, p99 {percentile(f['latencies_ms'], 99):.1f} ms"
                for key, f in floor.items() if key.split("/")[0] == str(n))
            checks += [
                check(f"controller RSS per 100 proxies connected, {n} proxies on one Gateway of {r['routes']:,} routes",
                      per_100[n], 10, "MiB"),
                check(f"a change reaches all {n} proxies of its Gateway (ACKed), {r['routes']:,} routes: p99",
                      percentile(lat, 99), limit, "ms",
                      note=f"p50 {percentile(lat, 50):.1f} ms, max {max(lat):.1f} ms{bare}"),
            ]
    checks += [
        check("fleet: responses to the proxies of another Gateway", sum(f["stray"] for f in r["fan_out"].values()), 0,
              "", "=="),
        check(f"reconnect storm, {r['proxies'] + OTHER_PROXIES} proxies at once: all synced after", storm["served_s"],
              5, "s"),
        check("reconnect storm: controller RSS peak over its RSS with the proxies connected before the restart",
              storm["rss_peak"] / storm["rss_before_restart"], 2, "times",
              note=f"{storm['rss_before_restart']:.0f} → peak {storm['rss_peak']:.0f} MiB"),
        check("controller RSS once every proxy disconnected, over its RSS before any connected",
              r["rss_disconnected"] - storm["rss_base"], 10, "MiB",
              note=f"{storm['rss_base']:.0f} → {r['rss_disconnected']:.0f} MiB (the restarted controller)"),
    ]
    fan_rows = [[n, len(f["latencies_ms"]) + f["timeouts"], f["timeouts"], f"{percentile(f['latencies_ms'], 50):.1f}",
                 f"{percentile(f['latencies_ms'], 99):.1f}", f"{max(f['latencies_ms'], default=float('nan')):.1f}",
                 f["stray"], f"{f['controller_cpu_ms']:.1f}", f"{f['fleet_cpu_ms']:.1f}", f"{f['first_ms']:.1f}"]
                for n, f in r["fan_out"].items()]
    return {
        "tables": [
            {"title": f"A fleet on one Gateway of {r['routes']:,} routes: controller RSS against proxies connected",
             "columns": ["proxies connected", "controller RSS (MiB)", "over none (MiB per 100 proxies)"],
             "rows": [[n, f"{rss:.0f}", f"{100 * (rss - base) / n:.1f}" if n else ""] for n, rss in r["curve"]]},
            {"title": "A change to every proxy of the Gateway",
             "columns": ["proxies", "changes", "timeouts", "p50 (ms)", "p99 (ms)", "max (ms)",
                         "responses to the other Gateway's 10 proxies", "controller CPU per change (ms)",
                         "simulated proxies' CPU per change (ms)",
                         "the first change after the fleet joined, not counted (ms)"], "rows": fan_rows},
            {"title": "The floor: the same simulated proxies against a bare gRPC server (tests/bench/grpc_floor.py: "
                      "grpc.aio, no control plane, one RouteConfiguration pushed to every stream: the smallest, and "
                      "one the size of lychgate's answers to the changes above, their median)",
             "columns": ["proxies", "answer (KiB)", "pushes", "p50 (ms)", "p99 (ms)", "max (ms)",
                         "server CPU per push (ms)", "simulated proxies' CPU per push (ms)"],
             "rows": [[key.split("/")[0], f"{f['answer_bytes'] / 1024:.1f}", len(f["latencies_ms"]),
                       f"{percentile(f['latencies_ms'], 50):.1f}", f"{percentile(f['latencies_ms'], 99):.1f}",
                       f"{max(f['latencies_ms'], default=float('nan')):.1f}", f"{f['server_cpu_ms']:.1f}",
                       f"{f['fleet_cpu_ms']:.1f}"] for key, f in floor.items()]},
            {"title": "Reconnect storm (controller restarted, every proxy reconnects at once)",
             "columns": ["proxies", "all synced after (s)", "RSS before the restart (MiB)",
                         "restarted controller (MiB)", "peak (MiB)", "after (MiB)", "all disconnected (MiB)"],
             "rows": [[r["proxies"] + OTHER_PROXIES, f"{storm['served_s']:.2f}", f"{storm['rss_before_restart']:.0f}",
                       f"{storm['rss_base']:.0f}", f"{storm['rss_peak']:.0f}", f"{storm['rss_after']:.0f}",
                       f"{r['rss_disconnected']:.0f}"]]},
        ],
        "checks": checks,
        "plots": safe_plots(_plot, r),
    }


def _plot(r: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot([n for n, _ in r["curve"]], [v for _, v in r["curve"]], marker="o", label="controller RSS")
    top = max(n for n, _ in r["curve"])
    ax.plot([0, top], [r["rss_base"], r["rss_base"] + top / 10], color="red", lw=0.8, ls=":",
            label="target: +10 MiB per 100 proxies")
    ax.set_xlabel("proxies connected (one Gateway)")
    ax.set_ylabel("RSS (MiB)")
    ax.set_title(f"Controller RSS against proxies connected, {r['routes']:,} routes")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = artifact("proxies-fleet.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return [doc_link(path)]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.fleet", description=__doc__)
    parser.add_argument("--proxies", default=",".join(map(str, MEASURE_AT)))
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--routes", type=int, default=ROUTES)
    parser.add_argument("--src", default=None, help="run the controller from this source tree")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lychgate-bench-fleet-") as tmp:
        directory = Path(tmp) / "manifests"
        directory.mkdir()
        write_setup(directory, opts.routes)
        r = asyncio.run(run_fleet(directory, opts.routes, tuple(int(n) for n in opts.proxies.split(",")),
                                  opts.changes, opts.src))
    print(json.dumps({k: v for k, v in r.items()}, default=str))


if __name__ == "__main__":
    main()
