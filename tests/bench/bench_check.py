"""`lychgate check` on 3,000 routes with policies (issue 33).

Issue 17's shape (`policy_shape.py`): 300 hostnames x 10 path routes on one Gateway, a
Gateway-wide TrafficPolicy and one on every 10th route, 100 Services with their
EndpointSlices, one file per hostname. `python -m lychgate check DIR` runs as a CI job runs
it, a new process each time (interpreter start, imports, loading, translation, status,
the report), timed from start to exit. Clean: every object fine (exit 0). With problems:
the same plus 30 routes to a Service that does not exist and 3 files with a refused field,
so findings are located in the YAML (exit 1). Runs alternate between the two inputs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench import policy_shape
from tests.bench.common import (
    REPO,
    SERVICE_POOL,
    check,
    gateway_yaml,
    log,
    path_route_yaml,
    service_yaml,
)

ROUTES = 3000
GATEWAY = "check-gw"
LIMIT_S = 3.0
BROKEN_ROUTES = 30
REFUSED_FILES = 3


def _write(directory: Path, routes: int, problems: bool) -> None:
    directory.mkdir(parents=True)
    (directory / "gateway.yaml").write_text(gateway_yaml(GATEWAY, "127.0.50.1", 8080))
    (directory / "backends.yaml").write_text("---\n".join(service_yaml(f"svc-{j}", 3000) for j in range(SERVICE_POOL)))
    for name, text in policy_shape.files(GATEWAY, routes // policy_shape.PATHS, policies=True):
        (directory / name).write_text(text)
    if problems:
        (directory / "broken-routes.yaml").write_text("---\n".join(
            path_route_yaml(f"broken-{i}", GATEWAY, f"broken-{i}.shapes.test", "/", "no-such-service")
            for i in range(BROKEN_ROUTES)))
        for i in range(REFUSED_FILES):
            (directory / f"refused-{i}.yaml").write_text(
                path_route_yaml(f"refused-{i}", GATEWAY, "refused.shapes.test", "/", "svc-0").replace(
                    "port: 80", "port: 99999"))


def _time(directory: Path) -> tuple[float, int, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "lychgate", "check", str(directory)], capture_output=True,
                          text=True, timeout=120, env=env, cwd=directory)
    return time.monotonic() - t0, done.returncode, done.stdout.strip().splitlines()[-1] if done.stdout else done.stderr


def run(opts: argparse.Namespace) -> dict[str, Any]:
    routes = max(policy_shape.PATHS, int(ROUTES * opts.scale) // policy_shape.PATHS * policy_shape.PATHS)
    runs = 3 if opts.quick else 7
    seconds: dict[str, list[float]] = {"clean": [], "problems": []}
    verdicts: dict[str, tuple[int, str]] = {}
    with tempfile.TemporaryDirectory(prefix="lychgate-bench-check-") as tmp:
        dirs = {"clean": Path(tmp) / "clean", "problems": Path(tmp) / "problems"}
        _write(dirs["clean"], routes, problems=False)
        _write(dirs["problems"], routes, problems=True)
        for _ in range(runs):
            for case, directory in dirs.items():
                elapsed, code, last = _time(directory)
                seconds[case].append(elapsed)
                verdicts[case] = (code, last)
    for case, (code, last) in verdicts.items():
        log(f"check {case}: exit {code}, {last!r}; runs {', '.join(f'{s:.2f}' for s in seconds[case])} s")
    p50 = {case: statistics.median(values) for case, values in seconds.items()}
    right = verdicts["clean"][0] == 0 and verdicts["problems"][0] == 1
    expected_errors = BROKEN_ROUTES * 2 + REFUSED_FILES  # ResolvedRefs and the 500 of each broken route
    counted = verdicts["problems"][1].startswith(f"{expected_errors} errors")
    checks = [
        check(f"`lychgate check` on {routes:,} routes with policies, clean, p50 (a new process)", p50["clean"],
              LIMIT_S, "s"),
        check(f"`lychgate check` on {routes:,} routes with policies and {BROKEN_ROUTES + REFUSED_FILES} bad ones, p50",
              p50["problems"], LIMIT_S, "s"),
        check("exit codes 0 (clean) and 1 (problems), every problem reported", float(right and counted), 1, "",
              op="==", note=f"clean: {verdicts['clean'][1]}; with problems: {verdicts['problems'][1]}"),
    ]
    return {
        "name": "check",
        "title": "`lychgate check` (issue 33)",
        "description": __doc__.split("\n\n", 1)[1].replace("\n", " ").strip(),
        "tables": [{
            "columns": ["input", "routes", "runs", "p50 (s)", "min (s)", "max (s)", "exit", "last line"],
            "rows": [[case, routes, len(values), f"{p50[case]:.2f}", f"{min(values):.2f}", f"{max(values):.2f}",
                      verdicts[case][0], verdicts[case][1]] for case, values in seconds.items()],
        }],
        "checks": checks,
        "plots": [],
        "raw": {"seconds": seconds, "verdicts": verdicts},
    }
