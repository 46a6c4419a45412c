"""Translation: full snapshot and one-route incremental pass, in process.

Each case runs in a child process of its own (`python -m tests.bench.bench_translation
--case routes:10000`) so its peak RSS is its own. The child loads the manifests
the way local mode does (files → FileSource → Store) and drives a real
`ControlPlane` whose deployer is a stub (no Envoy): `sync_once()` is exactly
the pass the control loop runs — translate + build + snapshot + status.

Figures per case:
- full pass: the first `sync_once()` (nothing translated before);
- the same work split into the library stages `translate`, `build`, `make_snapshot`
  (median of 3, each from scratch);
- one route changed: the route's file rewritten and reloaded (what the file
  watcher does), then `sync_once()`; median / p95 / max over several routes;
- the policy shape (`policies:N`, issue 17; `policy_shape.py`): N/10 hostnames x
  10 path routes, a Gateway-wide TrafficPolicy and one on every 10th route; its
  one-route passes are, in turn, a new path route on an existing hostname, a new
  TrafficPolicy on a route that had none, and an edit of a route's TrafficPolicy;
- snapshot size (packed bytes, all Gateways) and resource counts;
- RSS after loading, after the full pass, and the peak (VmHWM) of the process.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import pstats
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench import policy_shape as ps
from tests.bench.common import (
    ADDR_TRANSLATION,
    REPO,
    SERVICE_POOL,
    MiB,
    artifact,
    check,
    doc_link,
    gateway_yaml,
    log,
    path_route_yaml,
    read_status_kb,
    route_name,
    route_yaml,
    safe_plots,
    service_yaml,
    summary,
)
from tests.no_proxies import NoProxies

FULL_CASES = ["routes:100", "routes:1000", "routes:5000", "routes:10000", "gateways:100x100", "policies:10000"]
POLICY_CHANGES = ("new path route", "new policy", "policy edit")


# --- the child ------------------------------------------------------------------------


def _layout(case: str) -> list[tuple[str, int]]:
    """[(gateway name, routes on it)] for a case name."""
    kind, _, size = case.partition(":")
    if kind in ("routes", "policies"):
        return [("gw", int(size))]
    if kind == "gateways":
        g, _, r = size.partition("x")
        return [(f"gw-{k:03d}", int(r)) for k in range(int(g))]
    raise SystemExit(f"unknown case {case!r}")


def _write_manifests(directory: Path, layout: list[tuple[str, int]], policies: bool) -> dict[str, Path]:
    """One file per route (the policy shape: per hostname), as a user of local mode
    would keep them. Returns route name -> file (plain shape only)."""
    (directory / "backends.yaml").write_text(
        "---\n".join(service_yaml(f"svc-{j}", 9) for j in range(SERVICE_POOL)))
    if policies:
        (gw, count), = layout
        (directory / "gateways.yaml").write_text(gateway_yaml(gw, ADDR_TRANSLATION.format(1), 8080))
        for name, text in ps.files(gw, count // ps.PATHS, policies=True):
            (directory / name).write_text(text)
        return {}
    gateways = []
    files: dict[str, Path] = {}
    for k, (gw, count) in enumerate(layout):
        gateways.append(gateway_yaml(gw, ADDR_TRANSLATION.format(k + 1), 8080))
        prefix = "r" if len(layout) == 1 else f"g{k:03d}"
        for i in range(count):
            name = route_name(i, prefix)
            path = directory / f"route-{name}.yaml"
            path.write_text(route_yaml(name, gw, f"svc-{i % SERVICE_POOL}"))
            files[name] = path
    (directory / "gateways.yaml").write_text("---\n".join(gateways))
    return files


class GcClock:
    """Time spent in the garbage collector, by generation (gc.callbacks)."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self._t0 = 0.0
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            g = info.get("generation", 0)
            self.seconds[g] += time.perf_counter() - self._t0
            self.count[g] += 1

    def snapshot(self) -> tuple[float, int]:
        """(seconds in gen-2 collections, gen-2 collections) so far; gen 0/1 are cheap."""
        return self.seconds[2], self.count[2]

    def total(self) -> float:
        return sum(self.seconds)


def _median_time(fn: Any, repeat: int = 3) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], result


async def _child(case: str, updates: int, profile: Path | None) -> dict[str, Any]:
    from lychgate.controlplane import ControlPlane, builtin_class
    from lychgate.settings import Settings
    from lychgate.sources.files import FileSource
    from lychgate.translate.gateway import translate
    from lychgate.xds import types
    from lychgate.xds.cache import make_snapshot
    from lychgate.xds.translator import build

    layout = _layout(case)
    policies = case.startswith("policies:")
    total_routes = sum(n for _, n in layout)
    out: dict[str, Any] = {"case": case, "gateways": len(layout), "routes": total_routes}
    with tempfile.TemporaryDirectory(prefix="lychgate-bench-translation-") as tmp:
        directory = Path(tmp) / "manifests"
        directory.mkdir()
        files = _write_manifests(directory, layout, policies)
        out["rss_start_mib"] = read_status_kb(_self_pid(), "VmRSS") / MiB

        cp = ControlPlane(Settings(state_dir=Path(tmp) / "state"), NoProxies())  # type: ignore[arg-type]
        source = FileSource(directory, cp.store)
        cp.store.upsert(builtin_class())
        t0 = time.perf_counter()
        source.load_all()
        out["load_s"] = time.perf_counter() - t0
        out["rss_loaded_mib"] = read_status_kb(_self_pid(), "VmRSS") / MiB

        # The full pass, exactly as the control loop runs it.
        gc_clock = GcClock()
        g0 = gc_clock.total()
        report = await cp.sync_once()
        out["full_pass_s"] = report.seconds
        out["full_pass_gc_s"] = gc_clock.total() - g0
        if report.gateways != len(layout):
            raise RuntimeError(f"expected {len(layout)} translated gateways, got {report.gateways}; "
                               f"log: is the translator failing?")
        out["rss_after_full_mib"] = read_status_kb(_self_pid(), "VmRSS") / MiB
        refs = cp.cache.nodes()
        snaps = {ref: cp.cache.get(ref) for ref in refs}
        out["snapshot_bytes"] = sum(s.size_bytes() for s in snaps.values() if s)
        out["resources"] = {
            types.SHORT.get(t, t): sum(len(s.resources.get(t, {})) for s in snaps.values() if s)
            for t in (types.LISTENER, types.ROUTE, types.CLUSTER, types.ENDPOINT)
        }
        out["envoy_routes"] = sum(
            len(vh.routes) for gw in cp.translation.gateways.values()
            for listener in gw.listeners for vh in listener.virtual_hosts
        )

        # A pass with nothing changed (the loop also runs on proxy feedback).
        report = await cp.sync_once()
        out["noop_pass_s"] = report.seconds

        # The same full work as library stages, each from scratch.
        address_for = cp.deployer.address_for
        try:
            out["translate_s"], translation = _median_time(lambda: translate(cp.store, address_for))
            out["build_s"], built = _median_time(
                lambda: {ref: build(gw) for ref, gw in translation.gateways.items()})
            out["snapshot_s"], _ = _median_time(lambda: [make_snapshot(r) for r in built.values()])
        except Exception as err:  # the library API moved: the pass figures still stand
            out["stages_error"] = repr(err)
            translation = built = None

        # One route changed, N times (different routes spread over the store).
        changes = (_policy_changes(directory, layout[0][0], total_routes // ps.PATHS, updates) if policies
                   else _plain_changes(files, layout, updates))
        by_kind: dict[str, list[tuple[float, float, float, float]]] = {}
        unchanged = 0
        for kind, path, gateway, text in changes:
            timing, changed = await _one_change(cp, source, gc_clock, path, f"default/{gateway}", text)
            by_kind.setdefault(kind, []).append(timing)
            unchanged += not changed
        every = [t for timings in by_kind.values() for t in timings]
        reload_s, pass_s, total_s, gc_s = ([t[i] for t in every] for i in range(4))
        if policies:
            out["update_by_kind"] = {kind: {"pass": summary([t[1] for t in timings]),
                                            "reload": summary([t[0] for t in timings])}
                                     for kind, timings in by_kind.items()}
        out["update_reload"] = summary(reload_s)
        out["update_pass"] = summary(pass_s)
        out["update_total"] = summary(total_s)
        out["update_gc"] = summary(gc_s)
        out["update_unchanged_versions"] = unchanged  # must be 0: each update changes the routes
        out["rss_end_mib"] = read_status_kb(_self_pid(), "VmRSS") / MiB
        out["peak_rss_mib"] = read_status_kb(_self_pid(), "VmHWM") / MiB

        if profile is not None and not policies:
            profile.parent.mkdir(parents=True, exist_ok=True)
            profile.write_text(f"cProfile, case {case}; lychgate commit as in results.json\n\n")
            if translation is not None:
                _profile_full(cp, profile)
            await _profile_pass(cp, source, files, layout, profile)
            out["profile"] = str(profile)
    return out


Change = tuple[str, Path, str, str]  # (kind of change, file, Gateway, the file's new text)


def _plain_changes(files: dict[str, Path], layout: list[tuple[str, int]], updates: int) -> list[Change]:
    """`updates` route files rewritten (the second match), routes spread over the store."""
    names = sorted(files)
    out = []
    for k in range(1, updates + 1):
        name = names[((k - 1) * 7919) % len(names)]
        gateway = _gateway_of(name, layout)
        text = route_yaml(name, gateway, f"svc-{int(name.rsplit('-', 1)[1]) % SERVICE_POOL}", variant=k)
        out.append(("route edit", files[name], gateway, text))
    return out


def _policy_changes(directory: Path, gateway: str, hosts: int, updates: int) -> list[Change]:
    """`updates` rounds of the policy shape's three changes, on hostnames spread over the store."""
    out = []
    for k in range(updates):
        h, p = (k * 37 + 11) % hosts, 1 + k % (ps.PATHS - 1)
        file, name = ps.route_policy(h)
        out += [
            ("new path route", directory / f"shaped-new-{k}.yaml",
             gateway, path_route_yaml(f"s-new-{k}", gateway, ps.host(h), f"/n{k}", f"svc-{k % SERVICE_POOL}")),
            ("new policy", directory / f"policy-new-{k}.yaml",
             gateway, ps.header_policy_yaml(f"p-new-{k}", ps.route(h, p), f"new-{k}")),
            ("policy edit", directory / file, gateway, ps.header_policy_yaml(name, ps.route(h, 0), f"edit-{k}")),
        ]
    return out


async def _one_change(cp: Any, source: Any, gc_clock: GcClock, path: Path, ref: str,
                      text: str) -> tuple[tuple[float, float, float, float], bool]:
    """Write one file, reload it (the file watcher's work) and run a pass:
    ((reload, pass, both, GC in the pass) seconds, whether the Gateway's routes changed)."""
    from lychgate.xds import types

    before = cp.cache.get(ref).version(types.ROUTE) if cp.cache.get(ref) else ""
    path.write_text(text)
    t0 = time.perf_counter()
    source.reload(path)
    t1 = time.perf_counter()
    g0 = gc_clock.total()
    report = await cp.sync_once()
    t2 = time.perf_counter()
    after = cp.cache.get(ref).version(types.ROUTE) if cp.cache.get(ref) else ""
    return (t1 - t0, report.seconds, t2 - t0, gc_clock.total() - g0), after != before


def _self_pid() -> int:
    import os

    return os.getpid()


def _gateway_of(name: str, layout: list[tuple[str, int]]) -> str:
    if len(layout) == 1:
        return layout[0][0]
    return f"gw-{int(name.split('-')[0][1:]):03d}"


def _profile_full(cp: Any, path: Path) -> None:
    """cProfile of one full translate + build + make_snapshot (library stages)."""
    from lychgate.translate.gateway import translate
    from lychgate.xds.cache import make_snapshot
    from lychgate.xds.translator import build

    prof = cProfile.Profile()
    prof.enable()
    translation = translate(cp.store, cp.deployer.address_for)
    for gw in translation.gateways.values():
        make_snapshot(build(gw))
    prof.disable()
    buf = io.StringIO()
    _dump(prof, buf, "full translate + build + make_snapshot (library stages, from scratch)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(buf.getvalue())


def _dump(prof: cProfile.Profile, buf: io.StringIO, title: str, limit: int = 30) -> None:
    inner = io.StringIO()
    inner.write(f"==== {title} ====\n")
    stats = pstats.Stats(prof, stream=inner)
    inner.write("-- by own time (tottime) --\n")
    stats.sort_stats("tottime").print_stats(limit)
    inner.write("-- by cumulative time --\n")
    stats.sort_stats("cumulative").print_stats(limit)
    text = inner.getvalue().replace(str(REPO / "src") + "/", "")
    text = re.sub(r"/\S*/site-packages/", "", text)
    buf.write(text)


async def _profile_pass(cp: Any, source: Any, files: dict[str, Path], layout: list[tuple[str, int]],
                        path: Path) -> None:
    name = sorted(files)[len(files) // 3]
    gateway = _gateway_of(name, layout)
    files[name].write_text(route_yaml(name, gateway, "svc-2", variant=888_888))
    prof = cProfile.Profile()
    prof.enable()
    source.reload(files[name])
    prof.disable()
    buf = io.StringIO()
    _dump(prof, buf, "one route changed: FileSource.reload (the file watcher parsing the file)", limit=15)
    prof = cProfile.Profile()
    prof.enable()
    await cp.sync_once()
    prof.disable()
    _dump(prof, buf, "one route changed: ControlPlane.sync_once (the control loop's pass)")
    with path.open("a") as f:
        f.write(buf.getvalue())


def child_main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", required=True)
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--profile", type=Path)
    args = parser.parse_args()
    result = asyncio.run(_child_with_profile(args.case, args.updates, args.profile))
    print("RESULT " + json.dumps(result), flush=True)


async def _child_with_profile(case: str, updates: int, profile: Path | None) -> dict[str, Any]:
    return await _child(case, updates, profile)


# --- the parent -------------------------------------------------------------------------


def run_case(case: str, updates: int, profile: Path | None = None, timeout: float = 900) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "tests.bench.bench_translation", "--case", case, "--updates", str(updates)]
    if profile is not None:
        cmd += ["--profile", str(profile)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    line = next((l for l in reversed(proc.stdout.splitlines()) if l.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"translation case {case} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return dict(json.loads(line.removeprefix("RESULT ")))


def scaled_case(case: str, scale: float) -> str:
    """A case at --scale: fewer routes (gateways:GxR: fewer Gateways of R routes)."""
    if scale == 1.0:
        return case
    kind, _, size = case.partition(":")
    if kind == "gateways":
        g, _, r = size.partition("x")
        return f"gateways:{max(2, int(int(g) * scale))}x{r}"
    return f"{kind}:{max(10 * ps.PATHS if kind == 'policies' else 10, int(int(size) * scale))}"


def run(opts: argparse.Namespace) -> dict[str, Any]:
    updates = 5 if opts.quick else 20
    cases: list[dict[str, Any]] = []
    for case in (scaled_case(c, getattr(opts, "scale", 1.0)) for c in FULL_CASES):
        profile = artifact("profile-translation-10000.txt") if case == "routes:10000" else None
        log(f"translation {case} ...")
        r = run_case(case, updates, profile)
        log(f"  load {r['load_s']:.2f}s  full pass {r['full_pass_s'] * 1000:.0f} ms  "
            f"one-route pass p50 {r['update_pass']['p50'] * 1000:.1f} ms  "
            f"snapshot {r['snapshot_bytes'] / MiB:.2f} MiB  peak RSS {r['peak_rss_mib']:.0f} MiB  "
            f"{r['update_unchanged_versions']} updates without effect")
        cases.append(r)
    return report(cases, updates)


def report(cases: list[dict[str, Any]], updates: int) -> dict[str, Any]:
    def ms(v: float | None) -> str:
        return "—" if v is None else f"{v * 1000:.1f}"

    def label(case: str) -> str:
        kind, _, size = case.partition(":")
        return {"routes": f"{size} routes", "gateways": f"{size} gw x routes",
                "policies": f"{size} routes with policies"}[kind]

    rows = []
    for r in cases:
        rows.append([
            label(r["case"]),
            f"{r['load_s']:.2f}",
            ms(r["full_pass_s"]), ms(r.get("full_pass_gc_s")), ms(r.get("translate_s")), ms(r.get("build_s")),
            ms(r.get("snapshot_s")), ms(r["noop_pass_s"]),
            ms(r["update_pass"]["p50"]), ms(r["update_pass"]["p99"]), ms(r.get("update_gc", {}).get("p50")),
            ms(r["update_reload"]["p50"]),
            f"{r['snapshot_bytes'] / MiB:.2f}",
            f"{r['peak_rss_mib']:.0f}",
        ])
    plain = [r for r in cases if r["case"].startswith("routes:")]
    big = max(plain, key=lambda r: r["routes"]) if plain else None
    checks = []
    if big:
        n = f"{big['routes']:,}"
        checks.append(check(f"full translation, {n} routes (first sync_once pass)", big["full_pass_s"], 2.0, "s",
                            note=f"GC {big.get('full_pass_gc_s', float('nan')):.2f} s of it; library stages "
                            f"translate {big.get('translate_s', float('nan')):.2f} s + build {big.get('build_s', float('nan')):.2f} s "
                            f"+ snapshot {big.get('snapshot_s', float('nan')):.3f} s"))
        checks.append(check(f"one route changed at {n} routes: sync_once pass, p50", big["update_pass"]["p50"] * 1000,
                            20.0, "ms", note=f"p99 {big['update_pass']['p99'] * 1000:.1f} ms over {updates} updates; "
                            f"+ {big['update_reload']['p50'] * 1000:.1f} ms to parse the file"))
        checks.append(check("each one-route update changes the route version", big["update_unchanged_versions"], 0,
                            "updates without effect", "=="))
    shaped = next((r for r in cases if r["case"].startswith("policies:")), None)
    tables = []
    if shaped:
        policy_checks, table = _policy_report(shaped, updates)
        checks += policy_checks
        tables.append(table)
    plots = safe_plots(_plots, cases)
    return {
        "name": "translation",
        "title": "Translation (in process)",
        "description": (
            "One Gateway with N HTTPRoutes (each: 1 hostname, 2 matches, 1 backend; "
            f"{SERVICE_POOL} backend Services shared round-robin), and 100 Gateways x 100 routes. "
            "Manifests load through FileSource into the Store as in local mode; a real ControlPlane with a "
            "stub deployer runs `sync_once()`. *full pass*: the first `sync_once()`; *translate / build / "
            "snapshot*: the library stages from scratch (median of 3); *no-op pass*: `sync_once()` with "
            f"nothing changed; *one route*: {updates} times, one route file rewritten, `FileSource.reload` "
            "(parse) then `sync_once()`. *with policies* (issue 17's shape): N/10 hostnames x 10 PathPrefix "
            "routes, a Gateway-wide TrafficPolicy (request timeout) and a TrafficPolicy (a request header) on the "
            f"`/` route of every hostname (every 10th route); its one-route passes are {updates} rounds of: a new "
            "path route on an existing hostname (a new file), a new TrafficPolicy on a route that had none (a new "
            "file), an edit of a route's TrafficPolicy (its file rewritten). *GC*: time in the cyclic garbage collector during the pass (gc.callbacks). "
            "Snapshot size: packed resource bytes of all Gateways. "
            "Peak RSS: VmHWM of the process (store + translation + snapshots)."
        ),
        "tables": [{
            "columns": ["case", "load (s)", "full pass (ms)", "of which GC (ms)", "translate (ms)", "build (ms)",
                        "snapshot (ms)", "no-op pass (ms)", "one route: pass p50 (ms)", "one route: pass p99 (ms)",
                        "one route: GC p50 (ms)", "one route: parse p50 (ms)", "snapshot (MiB)", "peak RSS (MiB)"],
            "rows": rows,
        }, *tables],
        "checks": checks,
        "plots": plots,
        "raw": cases,
    }


def _policy_report(r: dict[str, Any], updates: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The checks and the per-change table of the policy shape's case."""
    n = f"{r['routes']:,}"
    full = check(f"full translation, {n} routes with policies: first sync_once pass", r["full_pass_s"], 1.5, "s",
                 note=f"GC {r.get('full_pass_gc_s', float('nan')):.2f} s of it; library stages "
                 f"translate {r.get('translate_s', float('nan')):.2f} s + build {r.get('build_s', float('nan')):.2f} s "
                 f"+ snapshot {r.get('snapshot_s', float('nan')):.3f} s")
    checks = [full]
    rows = []
    for kind in POLICY_CHANGES:
        s = r["update_by_kind"].get(kind, {})
        p50 = s.get("pass", {}).get("p50")
        checks.append(check(f"one-route pass at {n} routes with policies, {kind}: p50",
                            None if p50 is None else p50 * 1000, 10.0, "ms",
                            note=f"sync_once pass; p99 {s.get('pass', {}).get('p99', float('nan')) * 1000:.1f} ms over "
                            f"{updates} changes; + {s.get('reload', {}).get('p50', float('nan')) * 1000:.1f} ms to "
                            "parse the file"))
        rows.append([kind] + [f"{s.get('pass', {}).get(k, float('nan')) * 1000:.1f}" for k in ("p50", "p99", "max")]
                    + [f"{s.get('reload', {}).get('p50', float('nan')) * 1000:.1f}"])
    checks.append(check(f"each one-route change at {n} routes with policies changes the route version",
                        r["update_unchanged_versions"], 0, "changes without effect", "=="))
    table = {"title": f"One-route passes at {n} routes with policies, by change",
             "columns": ["change", "sync_once pass p50 (ms)", "p99 (ms)", "max (ms)", "parse p50 (ms)"],
             "rows": rows}
    return checks, table


def _plots(cases: list[dict[str, Any]]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    single = [r for r in cases if r["case"].startswith("routes:")]
    if not single:
        return []
    xs = [r["routes"] for r in single]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    a1.plot(xs, [r["full_pass_s"] * 1000 for r in single], "o-", label="full pass (sync_once)")
    if all("translate_s" in r for r in single):
        a1.plot(xs, [r["translate_s"] * 1000 for r in single], "s--", label="translate")
        a1.plot(xs, [r["build_s"] * 1000 for r in single], "^--", label="build")
        a1.plot(xs, [r["snapshot_s"] * 1000 for r in single], "v--", label="make_snapshot")
    a1.plot(xs, [r["update_pass"]["p50"] * 1000 for r in single], "D-", label="one route changed (p50)")
    a1.axhline(2000, color="red", lw=0.8, ls=":", label="target full @10k: 2 s")
    a1.axhline(20, color="orange", lw=0.8, ls=":", label="target one route @10k: 20 ms")
    a1.set_xscale("log")
    a1.set_yscale("log")
    a1.set_xlabel("HTTPRoutes on one Gateway")
    a1.set_ylabel("ms")
    a1.set_title("control-plane time")
    a1.legend(fontsize=7)
    a2.plot(xs, [r["peak_rss_mib"] for r in single], "o-", label="peak RSS (MiB)")
    a2.plot(xs, [r["rss_loaded_mib"] for r in single], "s--", label="RSS after load (MiB)")
    a2.plot(xs, [r["snapshot_bytes"] / MiB for r in single], "^-", label="snapshot (MiB)")
    a2.set_xscale("log")
    a2.set_xlabel("HTTPRoutes on one Gateway")
    a2.set_title("memory and snapshot size")
    a2.legend(fontsize=7)
    fig.tight_layout()
    path = artifact("translation.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return [doc_link(path)]


if __name__ == "__main__":
    child_main()
