"""Gateway API conformance (v1.6.1) against one real `lychgate run` with real Envoy.

One pytest test per upstream conformance test; `python -m tests.conformance`
runs the same cases and writes docs/conformance.md and the report.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.cases import Case, all_cases
from tests.conformance.known_failures import KNOWN_FAILURES
from tests.conformance.manifests import UPSTREAM
from tests.conformance.runner import run_case, skip_reason
from tests.conformance.suite import Suite

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.conformance,
    pytest.mark.skipif(not UPSTREAM.is_dir(), reason=f"upstream conformance data not found at {UPSTREAM}"),
]

CASES = all_cases()


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    s = Suite(Path(tmp_path_factory.mktemp("conformance")))
    try:
        yield s.start()
    finally:
        s.close()


def _param(case: Case) -> object:
    marks = []
    if case.short_name in KNOWN_FAILURES:
        marks.append(pytest.mark.xfail(reason=KNOWN_FAILURES[case.short_name], strict=True))
    return pytest.param(case, id=case.short_name, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_conformance(suite: Suite, case: Case) -> None:
    reason = skip_reason(suite.supported, case)
    if reason is not None:
        pytest.skip(reason)
    run_case(suite, case)
