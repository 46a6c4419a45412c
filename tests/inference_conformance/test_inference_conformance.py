"""Gateway API Inference Extension conformance (v1.6.0) against one real `lychgate run`
with real Envoy, local model servers and conformance endpoint pickers.

One pytest test per upstream conformance test; `python -m tests.inference_conformance`
runs the same cases and writes docs/inference-conformance-report.yaml.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.inference_conformance.cases import CASES, Case
from tests.inference_conformance.manifests import UPSTREAM
from tests.inference_conformance.runner import run_case
from tests.inference_conformance.suite import InferenceSuite

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.conformance,
    pytest.mark.skipif(not UPSTREAM.is_dir(), reason=f"upstream conformance data not found at {UPSTREAM}"),
]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InferenceSuite]:
    s = InferenceSuite(Path(tmp_path_factory.mktemp("inference-conformance")))
    try:
        yield s.start()
    finally:
        s.close()


@pytest.mark.parametrize("case", [pytest.param(c, id=c.short_name) for c in CASES])
def test_inference_conformance(suite: InferenceSuite, case: Case) -> None:
    run_case(suite, case)
