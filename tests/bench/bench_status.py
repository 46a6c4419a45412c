"""Status: after the last of 1,000 routes is written, how long until status is right.

A real `lychgate run` with 5 Gateways (each its own Envoy). 1,000 route files
are written one by one as fast as the disk takes them (route i → Gateway i % 5).
From the moment the last file is in place, the admin API (`/api/v1/objects`,
what `lychgate get` reads) is polled: Gateways every 10 ms until every listener
says attachedRoutes = 200, then HTTPRoutes every 50 ms until every route has
Accepted=True for its parent (with the current observedGeneration).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from tests.bench.common import (
    ADDR_STATUS,
    SERVICE_POOL,
    EchoProcs,
    LychgateProc,
    check,
    free_port_on,
    gateway_yaml,
    log,
    lychgate_process,
    route_name,
    route_yaml,
    service_yaml,
    write_atomic,
)

GATEWAYS = 5
ROUTES = 1000
TIMEOUT = 120.0


def _gateways_right(lg: LychgateProc, expected: int) -> bool:
    items = lg.objects("Gateway", "default")
    ours = [g for g in items if g["metadata"]["name"].startswith("status-")]
    if len(ours) != GATEWAYS:
        return False
    for g in ours:
        listeners = (g.get("status") or {}).get("listeners") or []
        if not listeners or any(l.get("attachedRoutes") != expected for l in listeners):
            return False
    return True


def _routes_right(lg: LychgateProc) -> tuple[bool, int]:
    items = [r for r in lg.objects("HTTPRoute", "default") if r["metadata"]["name"].startswith("s-")]
    good = 0
    for r in items:
        parents = (r.get("status") or {}).get("parents") or []
        gen = r["metadata"].get("generation")
        if parents and all(
            any(c["type"] == "Accepted" and c["status"] == "True" and c.get("observedGeneration") == gen
                for c in p.get("conditions", []))
            for p in parents
        ):
            good += 1
    return good == ROUTES, good


def run(opts: argparse.Namespace) -> dict[str, Any]:
    echo = EchoProcs()
    try:
        backend = echo.start("status")
        with lychgate_process("status") as lg:
            gws = []
            for k in range(GATEWAYS):
                address = ADDR_STATUS.format(k + 1)
                gws.append(gateway_yaml(f"status-{k}", address, free_port_on(address)))
            lg.write("gateways.yaml", "---\n".join(gws))
            lg.write("backends.yaml", "---\n".join(service_yaml(f"svc-{j}", backend) for j in range(SERVICE_POOL)))
            lg.start(timeout=120)
            for k in range(GATEWAYS):
                lg.wait_programmed(f"status-{k}", timeout=60)
            time.sleep(1.0)  # let the proxies' first ACKs settle
            texts = [(f"route-{route_name(i, 's')}.yaml",
                      route_yaml(route_name(i, "s"), f"status-{i % GATEWAYS}", f"svc-{i % SERVICE_POOL}"))
                     for i in range(ROUTES)]
            t_first = time.monotonic()
            for name, text in texts:
                write_atomic(lg.manifests / name, text)
            t_last = time.monotonic()
            gw_seconds = routes_seconds = None
            polls_gw = polls_routes = 0
            last_good = 0
            deadline = t_last + TIMEOUT
            while time.monotonic() < deadline:
                polls_gw += 1
                if _gateways_right(lg, ROUTES // GATEWAYS):
                    gw_seconds = time.monotonic() - t_last
                    break
                time.sleep(0.01)
            while gw_seconds is not None and time.monotonic() < deadline:
                polls_routes += 1
                ok, last_good = _routes_right(lg)
                if ok:
                    routes_seconds = time.monotonic() - t_last
                    break
                time.sleep(0.05)
            log(f"status: wrote {ROUTES} files in {t_last - t_first:.2f}s; attachedRoutes right after "
                f"{gw_seconds if gw_seconds is None else f'{gw_seconds:.3f}s'}, every route Accepted after "
                f"{routes_seconds if routes_seconds is None else f'{routes_seconds:.3f}s'}")
    finally:
        echo.close()
    results = {"write_seconds": t_last - t_first, "attached_seconds": gw_seconds, "accepted_seconds": routes_seconds,
               "polls_gateways": polls_gw, "polls_routes": polls_routes, "routes_accepted_at_end": last_good}
    checks = [
        check("attachedRoutes of every Gateway right after the 1,000th route",
              gw_seconds * 1000 if gw_seconds is not None else None, 1000, "ms"),
        check("attachedRoutes and every route's Accepted right after the 1,000th route",
              routes_seconds * 1000 if routes_seconds is not None else None, 1000, "ms",
              note="routes polled every 50 ms once the Gateways are right; one poll reads all 1,000 routes"),
    ]
    return {
        "name": "status",
        "title": "Status (real `lychgate run`)",
        "description": __doc__.split("\n\n", 1)[1].replace("\n", " ").strip(),
        "tables": [{
            "columns": ["routes", "Gateways", "writing the files (s)", "attachedRoutes right (ms)",
                        "every route Accepted (ms)"],
            "rows": [[ROUTES, GATEWAYS, f"{t_last - t_first:.2f}",
                      "timeout" if gw_seconds is None else f"{gw_seconds * 1000:.0f}",
                      "timeout" if routes_seconds is None else f"{routes_seconds * 1000:.0f}"]],
        }],
        "checks": checks,
        "plots": [],
        "raw": results,
    }
