"""The README's Gateway API CRD bundle serves every Gateway API kind lychgate reads,
at the version it reads (checked against the bundle the conformance suite runs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from lychgate.api.registry import KINDS

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO.parent / "shared" / "gateway-api" / "config" / "crd"
GROUP = "gateway.networking.k8s.io"


def _readme_bundle() -> tuple[str, str]:
    match = re.search(r"gateway-api/releases/download/(v[\d.]+)/(\w+)-install\.yaml", (REPO / "README.md").read_text())
    assert match, "the README names no Gateway API CRD bundle"
    return match.group(1), match.group(2)


def _served(channel: str) -> dict[str, tuple[str, set[str]]]:
    """kind -> (bundle version, versions served) in one channel of the shared bundle."""
    out = {}
    for path in sorted((CRDS / channel).glob(f"{GROUP}_*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                bundle = doc["metadata"]["annotations"]["gateway.networking.k8s.io/bundle-version"]
                served = {v["name"] for v in doc["spec"]["versions"] if v.get("served")}
                out[doc["spec"]["names"]["kind"]] = (bundle, served)
    return out


@pytest.mark.skipif(not CRDS.is_dir(), reason="shared/gateway-api is not beside the work tree")
def test_readme_bundle_serves_every_gateway_api_kind_lychgate_reads() -> None:
    version, channel = _readme_bundle()
    served = _served(channel)
    read = [k for k in KINDS if k.GROUP == GROUP]
    assert read, "no Gateway API kinds registered"
    for kind in read:
        assert kind.KIND in served, f"{kind.KIND} is not in the {channel} channel"
        bundle, versions = served[kind.KIND]
        assert bundle == version, f"README installs {version}, the suite runs {bundle}"
        # The controller lists and watches each kind at its first version.
        assert kind.VERSIONS[0] in versions, f"{kind.KIND} {kind.VERSIONS[0]} is not served by {channel}"
