"""Propagation at 10,000 routes with policies, the way users work (issue 17).

The shapes benchmark's *policies* shape at 10,000 routes: a real `lychgate run`
with its Envoy and `lychgate echo` backends, one Gateway of 1,000 hostnames x 10
path routes, a Gateway-wide TrafficPolicy (request timeout) and a TrafficPolicy
on every 10th route (the `/` route of each hostname: a request header). Files are
written in place, back to back (the next change as soon as the last one is
served), three kinds of change in turn: a new path route on an existing
hostname (until its new backend answers), a new TrafficPolicy on a route that
had none (until its header reaches the backend), an edit of a route's
TrafficPolicy (until the new value does). A GET every 5 ms; the p99 is over all
changes of the three kinds. A background prober hits 4 stable hostnames every
10 ms (every non-200 counts).
"""

from __future__ import annotations

import argparse
from typing import Any

from tests.bench.bench_shapes import Shape, non_200, run_shape, scaled
from tests.bench.common import EchoProcs, check, percentile, summary

ROUTES = 10_000


def run(opts: argparse.Namespace) -> dict[str, Any]:
    n = 8 if opts.quick else 34  # rounds of three changes: ~100 changes for a p99
    shape = Shape("policies", scaled(ROUTES, opts), modes=("back to back",))
    results: dict[str, dict[str, list[float | None]]] = {}
    echo = EchoProcs()
    try:
        old_port, new_port = echo.start("old"), echo.start("new")
        background = run_shape(shape, n, old_port, new_port, results)
    finally:
        echo.close()
    return _report(results, background, n, shape.routes)


def _report(results: dict[str, dict[str, list[float | None]]], background: dict[str, Any], n: int,
            routes: int) -> dict[str, Any]:
    rows = []
    every: list[float | None] = []
    for what, modes in results.items():
        values = modes["back to back"]
        every += values
        lat = [v for v in values if v is not None]
        s = summary(lat)
        rows.append([what.removeprefix("policies: "), len(values), len(values) - len(lat)]
                    + [f"{s.get(k, float('nan')):.0f}" for k in ("p50", "mean", "p99", "max")])
    lat = [v for v in every if v is not None]
    timeouts = len(every) - len(lat)
    checks = [
        check(f"propagation at {routes:,} routes with policies, back to back (new path route, new policy, "
              "policy edit): p99", percentile(lat, 99) if lat and not timeouts else None, 100, "ms",
              note=f"{len(every)} changes, {timeouts} not served within 30 s; mean "
              f"{summary(lat).get('mean', float('nan')):.0f} ms, max {summary(lat).get('max', float('nan')):.0f} ms"),
        non_200(background),
    ]
    return {
        "name": "shapes_10k",
        "title": "Propagation at 10,000 routes with policies (real `lychgate run` + Envoy)",
        "description": __doc__.split("\n\n", 1)[1].replace("\n", " ").strip(),
        "tables": [{"columns": [f"change ({routes:,} routes with policies, back to back)", "n", "timeouts",
                                "p50 (ms)", "mean (ms)", "p99 (ms)", "max (ms)"], "rows": rows}],
        "checks": checks,
        "notes": [f"{n} changes of each kind. Background prober: {background['requests']} requests, "
                  f"{background['failures']} failures."],
        "raw": {"results": results, "background": background},
    }
