"""Running cases against a Suite: skip by feature, apply, check, clean up."""

from __future__ import annotations

import time
from dataclasses import dataclass

from tests.conformance import manifests as mf
from tests.conformance.cases import Case
from tests.conformance.suite import Suite

MESH_SKIP = "mesh profile not claimed"
# Features lychgate implements only where the test cannot see them, and why.
NOT_CLAIMED = {
    "GatewayInfrastructurePropagation": "Kubernetes mode only: local mode deploys no Services or Pods to label "
                                        "(tests/kube checks the labels and annotations on the proxy's objects)",
}
PENDING_SKIP = "expectations not yet written as a lychgate case"


@dataclass(frozen=True)
class Result:
    case: Case
    outcome: str  # pass | fail | skip
    reason: str = ""
    seconds: float = 0.0


def skip_reason(suite_features: frozenset[str], case: Case) -> str | None:
    """Why a case does not run here (None: it runs), as upstream decides."""
    if case.mesh:
        return MESH_SKIP
    missing = [f for f in case.features if f not in suite_features]
    if missing:
        return "; ".join(NOT_CLAIMED.get(f, f"needs {f}") for f in missing)
    if case.run is None:
        return PENDING_SKIP
    return None


def run_case(suite: Suite, case: Case) -> None:
    """Apply the case's manifests, run its checks, then delete them and wait until gone.

    Raises the case's failure (CaseFailure/AssertionError) after cleaning up.
    """
    assert case.run is not None
    docs = [d for path in case.manifests for d in mf.load(path)]
    if case.setup is not None:
        docs += case.setup(suite)
    suite.apply(case.file, docs)
    try:
        case.run(suite)
    finally:
        for name in suite.case_files():
            suite.delete(name)


def execute(suite: Suite, case: Case) -> Result:
    reason = skip_reason(suite.supported, case)
    if reason is not None:
        return Result(case, "skip", reason)
    start = time.monotonic()
    try:
        run_case(suite, case)
    except AssertionError as err:
        return Result(case, "fail", str(err).splitlines()[0][:300], time.monotonic() - start)
    except Exception as err:  # a client error the case did not expect fails that case, not the run
        return Result(case, "fail", f"{type(err).__name__}: {err}".splitlines()[0][:300], time.monotonic() - start)
    return Result(case, "pass", "", time.monotonic() - start)
