"""docs/conformance.md and docs/conformance-report.yaml from a run's results."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import yaml

from tests.conformance import differences
from tests.conformance.features import PROFILES, Profile
from tests.conformance.known_failures import KNOWN_FAILURES
from tests.conformance.runner import Result

API_VERSION = "v1.6.1"


def _profile_entry(profile: Profile, results: list[Result], supported: frozenset[str]) -> dict[str, Any]:
    mine = [r for r in results if not r.case.mesh and profile.covers(r.case.features)]
    entry: dict[str, Any] = {"name": profile.name}
    for part, chosen in (("core", [r for r in mine if profile.is_core(r.case.features)]),
                         ("extended", [r for r in mine if not profile.is_core(r.case.features)])):
        counts = {k: sum(r.outcome == k for r in chosen) for k in ("pass", "fail", "skip")}
        if counts["fail"]:
            outcome = "failure"
        elif counts["skip"] or not chosen:
            outcome = "partial"
        else:
            outcome = "success"
        section: dict[str, Any] = {
            "result": outcome,
            "statistics": {"Passed": counts["pass"], "Failed": counts["fail"], "Skipped": counts["skip"]},
        }
        skipped = sorted(r.case.short_name for r in chosen if r.outcome == "skip")
        if skipped:
            section["skippedTests"] = skipped
        failed = sorted(r.case.short_name for r in chosen if r.outcome == "fail")
        if failed:
            section["failedTests"] = failed
        if part == "extended":
            section["supportedFeatures"] = sorted(f for f in profile.extended if f in supported)
            section["unsupportedFeatures"] = sorted(f for f in profile.extended if f not in supported)
        entry[part] = section
    return entry


def conformance_report(results: list[Result], supported: frozenset[str], version: str) -> dict[str, Any]:
    """The upstream ConformanceReport shape (apis/v1 ConformanceReport)."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "ConformanceReport",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gatewayAPIVersion": API_VERSION,
        "gatewayAPIChannel": "experimental",
        "implementation": {
            "organization": "lychgate", "project": "lychgate", "url": "https://github.com/lychgate/lychgate",
            "version": version, "contact": ["@lychgate/maintainers"],
        },
        "mode": "default",
        "profiles": [_profile_entry(p, results, supported) for p in PROFILES],
        "succeededProvisionalTests": sorted(r.case.short_name for r in results
                                            if r.case.provisional and r.outcome == "pass"),
    }


def markdown(results: list[Result], supported: frozenset[str]) -> str:
    lines = [
        "# Gateway API conformance",
        "",
        f"Upstream suite: kubernetes-sigs/gateway-api {API_VERSION}, re-expressed as Python cases in",
        "`tests/conformance/` and run against one real `lychgate run` with real Envoy and local echo",
        "backends (`make conformance`, or `python -m tests.conformance [--only NAME]`). This file and",
        "`docs/conformance-report.yaml` are written by that command.",
        "",
        "A test is skipped when it needs a feature missing from the GatewayClass `supportedFeatures`",
        "(as upstream decides); mesh tests are skipped because lychgate does not claim the mesh profile.",
        "Known failures are listed with their cause in `tests/conformance/known_failures.py`.",
        "",
        "## Summary",
        "",
        "| profile | part | pass | fail | skip | result |",
        "|---|---|---|---|---|---|",
    ]
    for profile in PROFILES:
        entry = _profile_entry(profile, results, supported)
        for part in ("core", "extended"):
            st = entry[part]["statistics"]
            lines.append(f"| {profile.short} | {part} | {st['Passed']} | {st['Failed']} | {st['Skipped']} "
                         f"| {entry[part]['result']} |")
    totals = {k: sum(r.outcome == k for r in results) for k in ("pass", "fail", "skip")}
    lines += ["", f"All {len(results)} tests: {totals['pass']} pass, {totals['fail']} fail, {totals['skip']} skip.",
              "", "## Tests", "", "| test | features | result | reason |", "|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r.case.mesh, r.case.short_name)):
        reason = r.reason.replace("|", "\\|")
        outcome = "fail (known)" if r.outcome == "fail" and r.case.short_name in KNOWN_FAILURES else r.outcome
        lines.append(f"| {r.case.short_name} | {', '.join(r.case.features)} | {outcome} | {reason} |")
    lines += ["", "Supported features claimed by the GatewayClass: " + ", ".join(sorted(supported)) + ".", ""]
    lines += differences.markdown()
    return "\n".join(lines)


def write(results: list[Result], supported: frozenset[str], version: str, docs: Path) -> None:
    (docs / "conformance.md").write_text(markdown(results, supported))
    (docs / "conformance-report.yaml").write_text(
        yaml.safe_dump(conformance_report(results, supported, version), sort_keys=False))
