"""Churn: 5,000 routes, continuous create/delete, controller RSS and CPU over time.

A real `lychgate run` with one Gateway and 5,000 routes (bulk files). Then, for
the duration (120 s; 30 s with --quick), every 100 ms one new route file is
written and the oldest churn file (20 writes back) is deleted: 10 creates and
10 deletes per second, about 5,020 routes throughout. VmRSS (/proc/<pid>/status)
and CPU (utime+stime from /proc/<pid>/stat) of the `lychgate run` process and
of its Envoy are sampled every second. A background prober hits 4 of the
5,000 stable routes every 10 ms (every non-200 counts). After the churn stops:
how long until the last created route is served and the last deleted one is gone.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from tests.bench.common import (
    ADDR_CHURN,
    SERVICE_POOL,
    BackgroundProber,
    EchoProcs,
    LychgateProc,
    MiB,
    Probe,
    Sampler,
    artifact,
    check,
    doc_link,
    flat_limit,
    free_port_on,
    gateway_yaml,
    log,
    lychgate_process,
    route_host,
    route_name,
    route_yaml,
    safe_plots,
    service_yaml,
    thirds,
    wait_for,
    write_atomic,
)

ROUTES = 5000
BULK = 500
WINDOW = 20
STEP = 0.1


def _slope_mib_per_min(samples: list[tuple[float, float]]) -> float:
    if len(samples) < 3:
        return float("nan")
    xs = [t for t, _ in samples]
    ys = [v for _, v in samples]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else float("nan")


def run(opts: argparse.Namespace) -> dict[str, Any]:
    duration = 30.0 if opts.quick else 120.0
    echo = EchoProcs()
    try:
        backend = echo.start("churn")
        with lychgate_process("churn") as lg:
            address = ADDR_CHURN
            port = free_port_on(address)
            lg.write("gateway.yaml", gateway_yaml("churn", address, port))
            lg.write("backends.yaml", "---\n".join(service_yaml(f"svc-{j}", backend) for j in range(SERVICE_POOL)))
            for lo in range(0, ROUTES, BULK):
                lg.write(f"routes-{lo:05d}.yaml", "---\n".join(
                    route_yaml(route_name(i), "churn", f"svc-{i % SERVICE_POOL}") for i in range(lo, lo + BULK)))
            lg.start(timeout=300)
            lg.wait_programmed("churn", timeout=120)
            probe = Probe(address, port)
            wait_for(lambda: probe.get(route_host(route_name(ROUTES - 1)))[0] == 200, 300, "the 5,000th route")
            envoy_pid = lg.envoy_pid("churn")
            pids = {"lychgate": lg.pid, **({"envoy": envoy_pid} if envoy_pid else {})}
            time.sleep(2.0)
            sampler = Sampler(pids, interval=1.0, max_seconds=duration + 600).start()
            prober = BackgroundProber(address, port, [route_host(route_name(i)) for i in (0, 1666, 3333, 4999)],
                                      interval=0.01, max_seconds=duration + 600).start()
            creates = deletes = 0
            t_start = time.monotonic()
            try:
                k = 0
                while time.monotonic() - t_start < duration:
                    tick = time.monotonic()
                    name = route_name(k, "c")
                    write_atomic(lg.manifests / f"churn-{name}.yaml", route_yaml(name, "churn", f"svc-{k % SERVICE_POOL}"))
                    creates += 1
                    if k >= WINDOW:
                        (lg.manifests / f"churn-{route_name(k - WINDOW, 'c')}.yaml").unlink()
                        deletes += 1
                    k += 1
                    time.sleep(max(0.0, tick + STEP - time.monotonic()))
                churn_end = time.monotonic()
                last_created = route_name(k - 1, "c")
                last_deleted = route_name(k - 1 - WINDOW, "c")
                wait_for(lambda: probe.get(route_host(last_created))[0] == 200, 120, "the last created route")
                wait_for(lambda: probe.get(route_host(last_deleted))[0] == 404, 120, "the last deleted route to go")
                catch_up = time.monotonic() - churn_end
                time.sleep(2.0)
            finally:
                prober.stop()
                sampler.stop()
                probe.close()
            log(f"churn: {creates} creates, {deletes} deletes in {duration:.0f}s; caught up {catch_up:.2f}s after")
            results = _analyse(sampler, duration, creates, deletes, catch_up, prober, lg)
    finally:
        echo.close()
    return _report(results)


def _analyse(sampler: Sampler, duration: float, creates: int, deletes: int, catch_up: float,
             prober: BackgroundProber, lg: LychgateProc) -> dict[str, Any]:
    lg_s = [s for s in sampler.samples["lychgate"] if s.t <= duration]
    rss = [(s.t, s.rss / MiB) for s in lg_s]
    first, last = thirds([v for _, v in rss])
    cpu = [s.cpu for s in lg_s]
    out = {
        "duration_s": duration, "creates": creates, "deletes": deletes, "catch_up_s": catch_up,
        "rss_peak_mib": max((v for _, v in rss), default=float("nan")),
        "rss_hwm_mib": max((s.hwm for s in lg_s), default=0) / MiB,
        "rss_first_third_mib": first, "rss_last_third_mib": last, "rss_growth_mib": last - first,
        "rss_slope_mib_per_min": _slope_mib_per_min(rss[len(rss) // 2:]),
        "cpu_mean_pct": statistics.fmean(cpu) if cpu else float("nan"),
        "cpu_max_pct": max(cpu, default=float("nan")),
        "background": {"requests": prober.total, "failures": len(prober.failures), "examples": prober.failures[:10]},
        "timeline": {k: [(s.t, s.rss / MiB, s.cpu) for s in v] for k, v in sampler.samples.items()},
    }
    env = sampler.samples.get("envoy", [])
    out["envoy_rss_first_mib"] = env[0].rss / MiB if env else None
    out["envoy_rss_last_mib"] = env[-1].rss / MiB if env else None
    return out


def _report(r: dict[str, Any]) -> dict[str, Any]:
    checks = [
        check("controller RSS at 5,000 routes under churn: peak", r["rss_peak_mib"], 300, "MiB"),
        check("controller RSS flat: median of the last third minus median of the first third", r["rss_growth_mib"],
              flat_limit(r["rss_first_third_mib"]), "MiB", note=f"slope over the second half {r['rss_slope_mib_per_min']:+.1f} MiB/min"),
        check("non-200 answers for stable routes during churn", r["background"]["failures"], 0, "answers", "==",
              note=f"of {r['background']['requests']} requests"),
    ]
    env = ""
    if r.get("envoy_rss_first_mib") is not None:
        env = f"; Envoy RSS {r['envoy_rss_first_mib']:.0f} → {r['envoy_rss_last_mib']:.0f} MiB"
    return {
        "name": "churn",
        "title": "Churn (real `lychgate run` + Envoy)",
        "description": __doc__.split("\n\n", 1)[1].replace("\n", " ").strip(),
        "tables": [{
            "columns": ["duration (s)", "creates", "deletes", "RSS first third (MiB)", "RSS last third (MiB)",
                        "RSS peak (MiB)", "slope (MiB/min)", "CPU mean (%)", "CPU max (%)", "caught up after (s)"],
            "rows": [[f"{r['duration_s']:.0f}", r["creates"], r["deletes"], f"{r['rss_first_third_mib']:.0f}",
                      f"{r['rss_last_third_mib']:.0f}", f"{r['rss_peak_mib']:.0f}",
                      f"{r['rss_slope_mib_per_min']:+.1f}", f"{r['cpu_mean_pct']:.0f}", f"{r['cpu_max_pct']:.0f}",
                      f"{r['catch_up_s']:.2f}"]],
        }],
        "notes": [f"CPU is percent of one core (100 = one core busy){env}."],
        "checks": checks,
        "plots": safe_plots(_plots, r),
        "raw": r,
    }


def _plots(r: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for name, series in r["timeline"].items():
        ts = [t for t, _, _ in series]
        a1.plot(ts, [v for _, v, _ in series], label=f"{name} RSS")
        a2.plot(ts, [c for _, _, c in series], label=f"{name} CPU")
    a1.axhline(300, color="red", lw=0.8, ls=":", label="controller target 300 MiB")
    a1.axvline(r["duration_s"], color="grey", lw=0.8, ls="--")
    a2.axvline(r["duration_s"], color="grey", lw=0.8, ls="--", label="churn stops")
    a1.set_ylabel("RSS (MiB)")
    a2.set_ylabel("CPU (% of one core)")
    a2.set_xlabel("seconds")
    a1.legend(fontsize=7)
    a2.legend(fontsize=7)
    a1.set_title("5,000 routes, 10 creates + 10 deletes per second")
    fig.tight_layout()
    path = artifact("churn.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return [doc_link(path)]
