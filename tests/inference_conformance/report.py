"""docs/inference-conformance-report.yaml: the upstream ConformanceReport of a run."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import yaml

from tests.conformance.report import API_VERSION
from tests.inference_conformance.runner import Result

INFERENCE_VERSION = "v1.6.0"


def conformance_report(results: list[Result], version: str) -> dict[str, Any]:
    """The shape upstream's suite writes (conformance/utils/suite/reports.go): the Gateway profile."""
    counts = {k: sum(r.outcome == k for r in results) for k in ("pass", "fail")}
    core: dict[str, Any] = {
        "result": "failure" if counts["fail"] else "success",
        "statistics": {"Failed": counts["fail"], "Passed": counts["pass"], "Skipped": 0},
    }
    failed = sorted(r.case.short_name for r in results if r.outcome == "fail")
    if failed:
        core["failedTests"] = failed
    return {
        "GatewayAPIInferenceExtensionVersion": INFERENCE_VERSION,
        "apiVersion": "gateway.networking.k8s.io/v1",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gatewayAPIChannel": "experimental",
        "gatewayAPIVersion": API_VERSION,
        "implementation": {
            "contact": ["@lychgate/maintainers"], "organization": "lychgate", "project": "lychgate",
            "url": "https://github.com/lychgate/lychgate", "version": version,
        },
        "kind": "ConformanceReport",
        "mode": "default",
        "profiles": [{
            "core": core, "name": "Gateway",
            "summary": "Core tests succeeded." if not failed else f"Core tests failed: {', '.join(failed)}.",
        }],
    }


def write(results: list[Result], version: str, path: Path) -> None:
    path.write_text(yaml.safe_dump(conformance_report(results, version), sort_keys=False))
