"""Run the benchmarks: `python -m tests.bench [--quick] [--only NAME[,NAME...]] [--no-write] [--scale F]`.

Prints the figures and the verdict per target, then writes docs/benchmarks.md,
the plots under docs/benchmarks/ and docs/benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from tests.bench import report
from tests.bench.common import REPO, MachineLoad, log, machine_facts, set_artifact_dir

BENCHMARKS = report.ORDER


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short run: fewer samples, shorter load and churn")
    parser.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="route counts of translation, shapes, shapes_10k and proxies times this (e.g. 0.1 to "
                        "check a benchmark itself quickly; implies --no-write: targets name the sizes measured)")
    opts = parser.parse_args(argv)
    names = [n.strip() for n in opts.only.split(",") if n.strip()] or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")

    if opts.scale != 1.0:
        opts.no_write = True  # a scaled run checks the benchmark, not lychgate: docs/ keep the real figures
    command = "python -m tests.bench" + ("" if argv is None and len(sys.argv) <= 1 else " " + shlex.join(
        argv if argv is not None else sys.argv[1:]))
    if opts.no_write:
        scratch = Path(tempfile.mkdtemp(prefix="lychgate-bench-artifacts-"))
        set_artifact_dir(scratch)
        log(f"--no-write: plots and profiles go to {scratch}")
    machine = machine_facts()
    log(f"machine: {machine['cpu_model']}, nproc {machine['nproc']}, Envoy {machine['envoy']}, "
        f"lychgate {machine['lychgate']} ({machine['commit']})")
    results: dict[str, Any] = {}
    for name in names:
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        t0 = time.monotonic()
        log(f"==== {name} ====")
        load = MachineLoad()
        try:
            module = importlib.import_module(f"tests.bench.bench_{name}")
            result = module.run(opts)
        except Exception:
            result = {"name": name, "error": traceback.format_exc()}
            log(f"{name} failed:\n{result['error']}")
        result.update(command=command, quick=opts.quick, started=started,
                      duration_s=time.monotonic() - t0, commit=machine["commit"], machine_load=load.result())
        ml = result["machine_load"]
        log(f"{name}: {ml['wall_s']:.0f}s; CPU cores busy: benchmark {ml['benchmark_cores']:.2f}, "
            f"other processes {ml['other_cores']:.2f} (of {machine['nproc']})")
        results[name] = result
        _print(result)

    all_checks = [c for r in results.values() for c in r.get("checks", [])]
    failed = [r["name"] for r in results.values() if "error" in r]
    print()
    print(f"{sum(c['pass'] for c in all_checks)} of {len(all_checks)} targets met"
          + (f"; did not complete: {', '.join(failed)}" if failed else ""))
    if not opts.no_write:
        data = report.merge(report.load(), {
            "benchmarks": results, "machine": machine, "last_command": command,
            "last_run": time.strftime("%Y-%m-%d %H:%M:%S"),
        })
        report.write(data)
        print(f"wrote {report.MARKDOWN.relative_to(REPO)} and {report.RESULTS.relative_to(REPO)}")
    return 0


def _print(result: dict[str, Any]) -> None:
    if "error" in result:
        return
    for table in result.get("tables", []):
        cols = table["columns"]
        widths = [max(len(str(c)), *(len(str(r[i])) for r in table["rows"])) for i, c in enumerate(cols)]
        print("  " + "  ".join(str(c).rjust(w) for c, w in zip(cols, widths, strict=True)))
        for row in table["rows"]:
            print("  " + "  ".join(str(x).rjust(w) for x, w in zip(row, widths, strict=True)))
    for c in result.get("checks", []):
        mark = "PASS" if c["pass"] else "MISS"
        op = {"<=": "<=", ">=": ">=", "==": "=="}[c["op"]]
        print(f"  [{mark}] {c['target']}: {report.fmt(c['measured'], c['unit'])} "
              f"(target {op} {report.fmt(c['limit'], c['unit'])}) {c.get('note', '')}")


if __name__ == "__main__":
    sys.exit(main())
