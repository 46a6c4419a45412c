"""Golden translator tests: manifests in, Envoy configuration and status out.

Each `in/NAME.yaml` is a set of manifests; `out/NAME.yaml` is what lychgate
makes of them: per Gateway the xDS resources (as Envoy's JSON), the MCP relay's
config where routes use MCP Backends, and per object the status conditions. A reviewer reads behaviour as data; regenerate with
`pytest tests/golden --update-golden` and read the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import json_format

from lychgate.api.gateway import Gateway
from lychgate.controlplane import builtin_class
from lychgate.sources.files import FileSource
from lychgate.store import Store
from lychgate.translate.gateway import translate
from lychgate.xds import types
from lychgate.xds.translator import build, route_matcher

HERE = Path(__file__).parent
CASES = sorted(p.stem for p in (HERE / "in").glob("*.yaml"))
# Cases that lower the route count from which a virtual host gets a matcher tree,
# so a few routes show it.
MATCHER_MIN_ROUTES = {"route-matcher": 4}
# Cases translated with a policyMerge setting (the Helm value / --policy-merge).
POLICY_MERGE = {"policy-ext-proc-merge": {"trafficPolicy": {"extProc": "DeepMerge"}}}


def _address(gw: Gateway) -> str:
    requested = [a.value for a in gw.spec.addresses if a.value]
    return requested[0] if requested else "127.0.1.1"


def render(case: str) -> dict[str, Any]:
    store = Store()
    store.upsert(builtin_class())
    source = FileSource(HERE / "in" / f"{case}.yaml", store)
    source.load_all()
    # The optional integrations are on: cases without their kinds are unaffected.
    result = translate(store, _address, policy_merge=POLICY_MERGE.get(case), waypoint_enabled=True,
                       inference_enabled=True)
    out: dict[str, Any] = {}
    if source.all_problems():
        out["problems"] = [str(p) for p in source.all_problems()]
    out["xds"] = {}
    for ref, gw in sorted(result.gateways.items()):
        resources = build(gw)
        out["xds"][ref] = {
            # Through JSON: MessageToDict leaves OrderedDicts that YAML cannot write.
            types.SHORT[t]: [_sorted_maps(json.loads(json_format.MessageToJson(resources.message(t, n))))
                             for n in sorted(byname)]
            for t, byname in resources.by_type.items()
        }
    if result.mcp.backends:  # what the MCP relay is handed: the targets of the MCP Backends routes use
        out["mcp_relay"] = json.loads(result.mcp.to_json())
    out["status"] = {
        f"{key.kind} {key.ref}": status
        for key, status in sorted(result.status.items(), key=lambda kv: str(kv[0]))
        if key.kind != "GatewayClass"
    }
    return out


def _sorted_maps(value: Any) -> Any:
    """Protobuf maps (no stable JSON order: it follows insertion and hashing) with their keys sorted."""
    if isinstance(value, dict):
        out = {k: _sorted_maps(v) for k, v in value.items()}
        for struct in ("jsonFormat", "filterContext"):  # Structs: their keys have no order
            if isinstance(out.get(struct), dict):
                out[struct] = _sorted_keys(out[struct])
        for kind in ("prefixMatchMap", "exactMatchMap"):
            if isinstance(out.get(kind), dict) and isinstance(out[kind].get("map"), dict):
                out[kind]["map"] = dict(sorted(out[kind]["map"].items()))
        # jwt_authn's maps, and the per-filter and per-extension maps of routes and clusters
        for kind in ("providers", "requirementMap", "typedPerFilterConfig", "typedExtensionProtocolOptions",
                     "filterMetadata", "typedFilterMetadata", "bucketIdBuilder"):
            if isinstance(out.get(kind), dict):
                out[kind] = dict(sorted(out[kind].items()))
        return out
    if isinstance(value, list):
        return [_sorted_maps(v) for v in value]
    return value


def _sorted_keys(value: Any) -> Any:
    return {k: _sorted_keys(v) for k, v in sorted(value.items())} if isinstance(value, dict) else value


class _PlainDumper(yaml.SafeDumper):
    """Every value written out where it sits: equal route statuses are one shared object
    (translate/status_pool.py), which safe_dump would write as YAML anchors and aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str, update_golden: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if case in MATCHER_MIN_ROUTES:
        monkeypatch.setattr(route_matcher, "MATCHER_MIN_ROUTES", MATCHER_MIN_ROUTES[case])
    got = yaml.dump(render(case), Dumper=_PlainDumper, sort_keys=False, width=120)
    path = HERE / "out" / f"{case}.yaml"
    if update_golden or not path.exists():
        path.write_text(got)
        if not update_golden:
            pytest.fail(f"{path} did not exist; written now, check it in")
    assert got == path.read_text(), f"translation of {case} changed; run with --update-golden and review"
