"""docs/benchmarks.md and docs/benchmarks/results.json from benchmark results."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tests.bench.common import DOCS, OUT_DIR

RESULTS = OUT_DIR / "results.json"
MARKDOWN = DOCS / "benchmarks.md"
HISTORY = DOCS / "benchmarks" / "history.md"
ORDER = ["translation", "propagation", "status", "churn", "dataplane", "inference", "ai", "shapes", "shapes_10k", "proxies",
         "check", "edge", "mcp"]


def load(path: Path = RESULTS) -> dict[str, Any]:
    if path.exists():
        try:
            return dict(json.loads(path.read_text()))
        except ValueError:
            pass
    return {"benchmarks": {}}


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Benchmarks run now replace their earlier results; the others stay, with their own run facts."""
    out = dict(old)
    out.setdefault("benchmarks", {})
    for name, result in new["benchmarks"].items():
        out["benchmarks"][name] = result
    out["machine"] = new["machine"]
    out["last_command"] = new["last_command"]
    out["last_run"] = new["last_run"]
    return out


def fmt(value: Any, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "not measured"
    if isinstance(value, float):
        text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}" if abs(value) < 10 else f"{value:,.1f}"
    else:
        text = f"{value:,}" if isinstance(value, int) else str(value)
    return f"{text} {unit}".strip()


def verdict(c: dict[str, Any]) -> str:
    return "**pass**" if c["pass"] else "**MISS**"


def margin(c: dict[str, Any]) -> str:
    m, limit = c.get("measured"), c["limit"]
    if m is None or (isinstance(m, float) and math.isnan(m)) or m < 0:
        return ""
    if c["op"] == "==":
        return "" if c["pass"] else f"off by {fmt(m - limit, c['unit'])}"
    if limit:
        ratio = m / limit
        return f"{ratio:.2f} x the {'limit' if c['op'] == '<=' else 'floor'}"
    return ""


# Issue 17's targets: (figure, target, benchmark(s) (comma-separated), the start of its checks' names).
ISSUE17 = [
    ("propagation at 3,000 routes, every shape (new route, new policy, policy edit)", "mean ≤ 15 ms, max ≤ 50 ms",
     "shapes", "propagation at 3,000 routes"),
    ("propagation at 10,000 routes with policies, p99", "≤ 100 ms", "shapes_10k",
     "propagation at 10,000 routes with policies"),
    ("one-route pass at 10,000 routes with policies, p50", "≤ 10 ms", "translation",
     "one-route pass at 10,000 routes with policies"),
    ("full translation, 10,000 routes with policies", "≤ 1.5 s", "translation",
     "full translation, 10,000 routes with policies"),
    ("big (split) table vs whole table, req/s", "≥ 0.95", "dataplane",
     "data plane: split table (2,000 hosts) / whole table (1,999 hosts), req/s"),
    ("a change reaches all 200 simulated proxies (ACKed)", "p99 ≤ 100 ms", "proxies",
     "a change reaches all its Gateway's simulated proxies (ACKed), 200 proxies"),
    ("controller RSS, 5,000 routes with policies, 200 proxies connected, churn", "≤ 150 MiB (issue 32), flat", "proxies",
     "controller RSS, 5,000 routes with policies, 200 proxies connected, churn"),
    ("proxies of unaffected Gateways receive nothing", "0 responses", "proxies",
     "responses to proxies of unaffected Gateways"),
    ("non-200 answers on stable routes during all of the above", "0", "shapes,shapes_10k",
     "non-200 answers on stable routes during the run"),
]


def issue17(benches: dict[str, Any]) -> list[str]:
    """Issue 17's targets table, each with the checks of this page that measure it."""
    lines = ["## Issue 17 targets", "",
             "Shapes real users have, many proxies, no per-request Lua (2-core machine; the figures are the "
             "checks of the benchmarks below, where one measures them).", "",
             "| figure | target | measured | verdict |", "|---|---|---|---|"]
    for figure, target, bench_names, prefix in ISSUE17:
        measured, met, total = [], 0, 0
        for bench in bench_names.split(","):
            checks = [c for c in benches.get(bench, {}).get("checks", []) if prefix and c["target"].startswith(prefix)]
            if not checks:
                continue
            # Checks of one case ("...: mean", "...: max") read as one "mean / max".
            cases: dict[str, list[str]] = {}
            for c in checks:
                case, _, stat = c["target"].removeprefix(prefix).strip(" :,").rpartition(": ")
                cases.setdefault(case, []).append(f"{stat} {fmt(c['measured'], c['unit'])}")
            measured.append("; ".join(f"{case}: {' / '.join(v)}" if case else " / ".join(v).strip()
                                      for case, v in cases.items()) + f" ({bench})")
            met += sum(c["pass"] for c in checks)
            total += len(checks)
        if not total:
            lines.append(f"| {figure} | {target} | not measured by these benchmarks yet | |")
            continue
        lines.append(f"| {figure} | {target} | {'; '.join(measured)} | "
                     f"{'**pass**' if met == total else f'**MISS** ({met} of {total} met)'} |")
    return lines


def markdown(data: dict[str, Any]) -> str:
    m = data.get("machine", {})
    lines = [
        "# Benchmarks",
        "",
        "Measured by the benchmark suite in `tests/bench/` (issue 9); regenerate this page with",
        "",
        "```sh",
        ".venv/bin/pip install -e '.[bench]'          # matplotlib for the plots",
        "apt-get install -y wrk nginx-light             # load generator and fast backend (data plane)",
        ".venv/bin/python -m tests.bench                # everything (~15 min); --quick for a short run",
        ".venv/bin/python -m tests.bench --only churn   # one benchmark; the others keep their last results",
        "```",
        "",
        "Raw figures: [`benchmarks/results.json`](benchmarks/results.json) (compare two runs with",
        "`python -m tests.bench.compare OLD.json NEW.json`). Profiles of the translation at 10,000 routes:",
        "[`benchmarks/profile-translation-10000.txt`](benchmarks/profile-translation-10000.txt).",
        "Everything runs on loopback (127.0.0.0/8) with bounded loops; the benchmarks are not part of `pytest`.",
        "",
        f"Last command: `{data.get('last_command', '?')}` at {data.get('last_run', '?')}.",
        "",
        "## Machine",
        "",
        "| fact | value |",
        "|---|---|",
        f"| CPU | {m.get('cpu_model', '?')} ({m.get('cpu_mhz', '?')} MHz) |",
        f"| nproc | {m.get('nproc', '?')} |",
        f"| kernel | {m.get('kernel', '?')} |",
        f"| Python | {m.get('python', '?')} |",
        f"| Envoy | {m.get('envoy', '?')} |",
        f"| lychgate | {m.get('lychgate', '?')} (commit {m.get('commit', '?')}) |",
        f"| wrk | {m.get('wrk', '?')} |",
        f"| nginx | {m.get('nginx', '?')} |",
        "",
        "`free -m`:",
        "",
        "```",
        m.get("free", "?"),
        "```",
        "",
        "## Targets",
        "",
        "| benchmark | target | limit | measured | verdict | |",
        "|---|---|---|---|---|---|",
    ]
    benches = data.get("benchmarks", {})
    names = [n for n in ORDER if n in benches] + [n for n in benches if n not in ORDER]
    for name in names:
        b = benches[name]
        if "error" in b:
            lines.append(f"| {name} | (did not complete) | | | **MISS** | see below |")
            continue
        for c in b.get("checks", []):
            op = {"<=": "≤", ">=": "≥", "==": "="}[c["op"]]
            lines.append(f"| {name} | {c['target']} | {op} {fmt(c['limit'], c['unit'])} | "
                         f"{fmt(c['measured'], c['unit'])} | {verdict(c)} | {margin(c)} |")
    lines += ["", *issue17(benches)]
    if HISTORY.exists():  # written by hand: which change moved which figure
        lines += ["", HISTORY.read_text().strip()]
    for name in names:
        b = benches[name]
        lines += ["", f"## {b.get('title', name)}", ""]
        run_facts = f"Run: `{b.get('command', '?')}` at {b.get('started', '?')}, {b.get('duration_s', 0):.0f} s"
        run_facts += " (quick)." if b.get("quick") else "."
        if b.get("commit"):
            run_facts += f" lychgate commit {b['commit']}."
        ml = b.get("machine_load")
        if ml:
            run_facts += (f" CPU while it ran (cores, of {m.get('nproc', '?')}): this benchmark and its processes "
                          f"{ml['benchmark_cores']:.2f}, other processes on the machine {ml['other_cores']:.2f}.")
            if ml["other_cores"] > 0.2:
                run_facts += " **Other load was present: figures are pessimistic/noisy.**"
        lines += [run_facts, ""]
        if "error" in b:
            lines += ["It did not complete:", "", "```", b["error"][-3000:], "```"]
            continue
        if b.get("description"):
            lines += [b["description"], ""]
        for table in b.get("tables", []):
            if table.get("title"):
                lines += [f"**{table['title']}**", ""]
            lines.append("| " + " | ".join(table["columns"]) + " |")
            lines.append("|" + "---|" * len(table["columns"]))
            for row in table["rows"]:
                lines.append("| " + " | ".join(str(x) for x in row) + " |")
            lines.append("")
        if b.get("checks"):
            lines += ["| target | limit | measured | verdict | note |", "|---|---|---|---|---|"]
            for c in b["checks"]:
                op = {"<=": "≤", ">=": "≥", "==": "="}[c["op"]]
                lines.append(f"| {c['target']} | {op} {fmt(c['limit'], c['unit'])} | {fmt(c['measured'], c['unit'])} | "
                             f"{verdict(c)} | {c.get('note', '')} |")
            lines.append("")
        for note in b.get("notes", []):
            lines += [note, ""]
        for plot in b.get("plots", []):
            lines += [f"![{name}]({plot})", ""]
    return "\n".join(lines).rstrip() + "\n"


def write(data: dict[str, Any]) -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1, default=str) + "\n")
    MARKDOWN.write_text(markdown(data))
