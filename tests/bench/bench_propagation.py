"""Propagation: from writing a route file until Envoy routes to the new backend.

A real `lychgate run` process in local mode, its real Envoy and `lychgate echo`
backends. Existing routes (the benchmark route: 1 hostname, 2 matches, 1 backend;
100 shared Services on an "old" echo backend) sit in bulk files. At each level
(1,000 / 3,000 / 10,000 existing routes) new routes are added one by one, each in
its own file and pointing at its own Service (pre-written, on a "new" echo
backend), so each one adds a route and a cluster. For each: t0 just before the
file is renamed into place, then a GET with the new hostname every 5 ms until the
answer is 200 from the "new" backend. Before writing the next route the
benchmark waits until the control plane is idle again (CPU below 10% for 0.3 s),
so each figure is one route on an idle control plane.

A background prober sends a request every 10 ms to 4 existing routes the whole
time (growth phases included): every non-200 answer or failed connection counts.
"""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

from tests.bench.common import (
    ADDR_PROPAGATION,
    SERVICE_POOL,
    BackgroundProber,
    EchoProcs,
    LychgateProc,
    MiB,
    Probe,
    Sampler,
    artifact,
    check,
    cpu_seconds,
    doc_link,
    free_port_on,
    gateway_yaml,
    log,
    lychgate_process,
    pod_of,
    route_host,
    route_name,
    route_yaml,
    safe_plots,
    service_yaml,
    summary,
    wait_for,
)

BULK = 500  # existing routes per bulk file
PROBE_INTERVAL = 0.005
ROUTE_TIMEOUT = 30.0


def _bulk_files(lg: LychgateProc, start: int, stop: int) -> None:
    for lo in range(start, stop, BULK):
        hi = min(stop, lo + BULK)
        docs = [route_yaml(route_name(i), "prop", f"svc-{i % SERVICE_POOL}") for i in range(lo, hi)]
        lg.write(f"routes-{lo:05d}-{hi:05d}.yaml", "---\n".join(docs))


def wait_idle(pid: int, timeout: float = 60.0, window: float = 0.3, threshold: float = 10.0) -> float:
    """Wait until the process used < threshold % CPU over a window; returns seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        c0 = cpu_seconds(pid)
        time.sleep(window)
        if 100 * (cpu_seconds(pid) - c0) / window < threshold:
            break
    return time.monotonic() - t0


def _metrics(lg: LychgateProc) -> tuple[float, float]:
    """(sum, count) of lychgate_translation_duration_seconds."""
    host, port = lg.metrics.rsplit(":", 1)
    probe = Probe(host, int(port))
    try:
        status, body = probe.get("127.0.0.1", "/metrics")
    finally:
        probe.close()
    if status != 200:
        return float("nan"), float("nan")
    text = body.decode()
    s = re.search(r"^lychgate_translation_duration_seconds_sum (\S+)", text, re.M)
    c = re.search(r"^lychgate_translation_duration_seconds_count (\S+)", text, re.M)
    return (float(s.group(1)) if s else float("nan")), (float(c.group(1)) if c else float("nan"))


def _answers(probe: Probe, host: str) -> bool:
    status, body = probe.get(host)
    return status == 200 and pod_of(body) == "new"


def _measure_one(lg: LychgateProc, probe: Probe, j: int, address: str) -> dict[str, Any]:
    name = f"new-{j:04d}"
    text = route_yaml(name, "prop", f"fresh-{j}")
    m0 = _metrics(lg)
    path = lg.manifests / f"route-{name}.yaml"
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text)
    host = route_host(name)
    probes = 0
    t0 = time.monotonic()
    tmp.replace(path)
    deadline = t0 + ROUTE_TIMEOUT
    ok = False
    while True:
        tick = time.monotonic()
        probes += 1
        if _answers(probe, host):
            ok = True
            break
        if tick > deadline:
            break
        time.sleep(max(0.0, tick + PROBE_INTERVAL - time.monotonic()))
    t1 = time.monotonic()
    idle = wait_idle(lg.pid)
    m1 = _metrics(lg)
    return {"route": name, "seconds": t1 - t0 if ok else None, "probes": probes,
            "passes": m1[1] - m0[1], "pass_seconds": m1[0] - m0[0], "idle_wait": idle}


def run(opts: argparse.Namespace) -> dict[str, Any]:
    levels = [1000, 3000, 10000]
    per_level = 10 if opts.quick else 50
    results: dict[str, Any] = {"levels": {}, "per_level": per_level}
    echo = EchoProcs()
    try:
        old_port = echo.start("old")
        new_port = echo.start("new")
        with lychgate_process("propagation") as lg:
            address = ADDR_PROPAGATION
            port = free_port_on(address)
            lg.write("gateway.yaml", gateway_yaml("prop", address, port))
            lg.write("backends.yaml", "---\n".join(service_yaml(f"svc-{j}", old_port) for j in range(SERVICE_POOL)))
            fresh = len(levels) * per_level
            lg.write("fresh-backends.yaml", "---\n".join(service_yaml(f"fresh-{j}", new_port) for j in range(fresh)))
            _bulk_files(lg, 0, levels[0])
            t0 = time.monotonic()
            lg.start(timeout=300)
            lg.wait_programmed("prop", timeout=120)
            probe = Probe(address, port)
            wait_for(lambda: probe.get(route_host(route_name(levels[0] - 1)))[0] == 200, 120,
                     "the last initial route", interval=0.05)
            results["startup_s"] = time.monotonic() - t0
            log(f"propagation: {levels[0]} routes served {results['startup_s']:.1f}s after start")
            envoy_pid = lg.envoy_pid("prop")
            sampler = Sampler({"lychgate": lg.pid, **({"envoy": envoy_pid} if envoy_pid else {})}).start()
            bg_hosts = [route_host(route_name(i)) for i in (0, 333, 666, 999)]
            prober = BackgroundProber(address, port, bg_hosts, interval=0.01, max_seconds=3000).start()
            try:
                existing = levels[0]
                j = 0
                for level in levels:
                    if level > existing:
                        g0 = time.monotonic()
                        _bulk_files(lg, existing, level)
                        wait_for(lambda lvl=level: probe.get(route_host(route_name(lvl - 1)))[0] == 200, 600,
                                 f"route {level - 1} to be served", interval=0.1)
                        existing = level
                        log(f"propagation: grew to {level} routes in {time.monotonic() - g0:.1f}s")
                    wait_idle(lg.pid)
                    rows = []
                    for _ in range(per_level):
                        rows.append(_measure_one(lg, probe, j, address))
                        j += 1
                    lat = [r["seconds"] * 1000 for r in rows if r["seconds"] is not None]
                    timeouts = sum(1 for r in rows if r["seconds"] is None)
                    s = summary(lat)
                    passes = [r["passes"] for r in rows]
                    pass_ms = [1000 * r["pass_seconds"] / r["passes"] for r in rows if r["passes"]]
                    results["levels"][str(level)] = {
                        "existing": level, "latency_ms": s, "timeouts": timeouts, "samples": rows,
                        "passes_per_route": sum(passes) / len(passes),
                        "pass_ms": summary(pass_ms),
                    }
                    log(f"propagation at {level}: p50 {s.get('p50', 0):.0f} ms  mean {s.get('mean', 0):.0f} ms  "
                        f"p99 {s.get('p99', 0):.0f} ms  max {s.get('max', 0):.0f} ms  timeouts {timeouts}  "
                        f"(passes/route {sum(passes) / len(passes):.1f}, pass {summary(pass_ms).get('p50', 0):.0f} ms)")
            finally:
                prober.stop()
                sampler.stop()
                probe.close()
            results["background"] = {"requests": prober.total, "failures": len(prober.failures),
                                     "examples": prober.failures[:10]}
            lg_samples = sampler.samples.get("lychgate", [])
            results["lychgate_peak_rss_mib"] = max((s.hwm for s in lg_samples), default=0) / MiB
            env_samples = sampler.samples.get("envoy", [])
            results["envoy_peak_rss_mib"] = max((s.rss for s in env_samples), default=0) / MiB
            results["timeline"] = {k: [(s.t, s.rss / MiB, s.cpu) for s in v] for k, v in sampler.samples.items()}
    finally:
        echo.close()
    return report(results)


def report(results: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for level, r in results["levels"].items():
        s = r["latency_ms"]
        rows.append([level, s.get("n", 0), r["timeouts"], f"{s.get('p50', float('nan')):.0f}",
                     f"{s.get('mean', float('nan')):.0f}", f"{s.get('p90', float('nan')):.0f}",
                     f"{s.get('p99', float('nan')):.0f}", f"{s.get('max', float('nan')):.0f}",
                     f"{r['passes_per_route']:.1f}", f"{r['pass_ms'].get('p50', float('nan')):.0f}"])
    lv = results["levels"]
    checks = []
    if "3000" in lv:
        s = lv["3000"]["latency_ms"]
        checks.append(check("propagation at 3,000 routes: mean", s.get("mean"), 30, "ms"))
        checks.append(check("propagation at 3,000 routes: max", s.get("max") if not lv["3000"]["timeouts"] else None,
                            150, "ms"))
    if "10000" in lv:
        s = lv["10000"]["latency_ms"]
        checks.append(check("propagation at 10,000 routes: p99", s.get("p99") if not lv["10000"]["timeouts"] else None,
                            500, "ms"))
    bg = results["background"]
    checks.append(check("non-200 answers for existing routes during the run", bg["failures"], 0, "answers", "==",
                        note=f"of {bg['requests']} background requests"))
    return {
        "name": "propagation",
        "title": "Propagation (real `lychgate run` + Envoy)",
        "description": (
            f"New routes added one by one ({results['per_level']} per level), each in its own file with its own "
            "new Service; time from the file's rename into the watched directory until a GET with the new "
            "hostname (probed every 5 ms) is answered 200 by the new backend. The control plane is idle "
            "before each write. *passes/route*: control-loop passes each new route caused "
            "(lychgate_translation_duration_seconds count), *pass*: their median duration. "
            f"Background prober: {bg['requests']} requests to 4 existing routes, {bg['failures']} failures. "
            f"Peak RSS at the end: lychgate {results['lychgate_peak_rss_mib']:.0f} MiB, "
            f"Envoy {results['envoy_peak_rss_mib']:.0f} MiB. Start with 1,000 routes: "
            f"{results['startup_s']:.1f} s until served."
        ),
        "tables": [{
            "columns": ["existing routes", "n", "timeouts", "p50 (ms)", "mean (ms)", "p90 (ms)", "p99 (ms)",
                        "max (ms)", "passes/route", "pass p50 (ms)"],
            "rows": rows,
        }],
        "checks": checks,
        "plots": safe_plots(_plots, results),
        "raw": results,
    }


def _plots(results: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    data, labels = [], []
    for level, r in results["levels"].items():
        data.append([x["seconds"] * 1000 for x in r["samples"] if x["seconds"] is not None] or [0])
        labels.append(f"{int(level):,} routes")
    ax.boxplot(data, tick_labels=labels, whis=(0, 100))
    for k, d in enumerate(data, start=1):
        ax.plot([k] * len(d), d, ".", alpha=0.4)
    ax.set_yscale("log")
    ax.set_ylabel("write → new backend answers (ms)")
    ax.axhline(30, color="green", lw=0.8, ls=":", label="mean @3k target 30 ms")
    ax.axhline(150, color="orange", lw=0.8, ls=":", label="max @3k target 150 ms")
    ax.axhline(500, color="red", lw=0.8, ls=":", label="p99 @10k target 500 ms")
    ax.legend(fontsize=7)
    ax.set_title("route propagation")
    fig.tight_layout()
    path = artifact("propagation.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return [doc_link(path)]
