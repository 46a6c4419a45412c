"""Running the cases against an InferenceSuite: apply, check, clean up."""

from __future__ import annotations

import time
from dataclasses import dataclass

from tests.inference_conformance import manifests as mf
from tests.inference_conformance.cases import Case
from tests.inference_conformance.suite import InferenceSuite


@dataclass(frozen=True)
class Result:
    case: Case
    outcome: str  # pass | fail
    reason: str = ""
    seconds: float = 0.0


def run_case(suite: InferenceSuite, case: Case) -> None:
    """Apply the case's manifests, run its checks, then delete them and wait until gone.
    Raises the case's failure (CaseFailure/AssertionError) after cleaning up."""
    suite.apply(case.file, [d for path in case.manifests for d in mf.load(path)])
    try:
        case.run(suite)
    finally:
        for name in suite.case_files():
            suite.delete(name)


def execute(suite: InferenceSuite, case: Case) -> Result:
    start = time.monotonic()
    try:
        run_case(suite, case)
    except AssertionError as err:
        return Result(case, "fail", str(err).splitlines()[0][:300], time.monotonic() - start)
    return Result(case, "pass", "", time.monotonic() - start)
