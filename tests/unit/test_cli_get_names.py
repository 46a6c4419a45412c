"""`lychgate get` knows every kind under kubectl's names: the plural, singular and short
names of the CRDs that define them (Gateway API v1.6.1, the Inference Extension and
lychgate's own chart), and kubectl's built-in ones for core kinds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lychgate import cli_get
from lychgate.api.registry import BY_KIND

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
CRD_DIRS = (SHARED / "gateway-api" / "config" / "crd" / "standard",
            SHARED / "inference-extension" / "config" / "crd", REPO / "charts" / "lychgate" / "crds")
# kubectl's own names for the core kinds (`kubectl api-resources`).
CORE = {
    "Namespace": ("namespaces", "namespace", ("ns",)), "Service": ("services", "service", ("svc",)),
    "EndpointSlice": ("endpointslices", "endpointslice", ()), "Secret": ("secrets", "secret", ()),
    "ConfigMap": ("configmaps", "configmap", ("cm",)), "Pod": ("pods", "pod", ("po",)),
}


def _crd_names() -> dict[str, dict[str, Any]]:
    out = {}
    for directory in CRD_DIRS:
        for path in sorted(directory.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    out[doc["spec"]["names"]["kind"]] = doc["spec"]["names"]
    return out


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared/ is not beside the work tree")
def test_every_kind_has_kubectl_names() -> None:
    crds = _crd_names()
    for kind in BY_KIND:  # every kind the admin API serves
        entry = cli_get.TABLE[kind]
        if kind in CORE:
            plural, singular, short = CORE[kind]
        else:
            assert kind in crds, f"no CRD defines {kind}"
            names = crds[kind]
            plural, singular, short = names["plural"], names["singular"], tuple(names.get("shortNames") or ())
        assert (entry.plural, entry.singular, entry.short) == (plural, singular, short), kind
        for name in (plural, singular, *short, kind):
            assert cli_get.resolve(name) is entry, f"{name} does not name {kind}"


def test_names_are_unambiguous_and_kind_dot_group_works() -> None:
    assert len(cli_get.ALIASES) == len(set(cli_get.ALIASES))
    assert cli_get.resolve("httproutes.gateway.networking.k8s.io") is cli_get.TABLE["HTTPRoute"]
    assert cli_get.resolve("httproutes.example.com") is None
    assert cli_get.resolve("widgets") is None


def test_columns_follow_the_kind_shape() -> None:
    headers = {kind: [c.header for c in entry.columns] for kind, entry in cli_get.TABLE.items()}
    for route in ("HTTPRoute", "GRPCRoute", "TLSRoute"):
        assert headers[route] == ["HOSTNAMES", "PARENTS"]
    for route in ("TCPRoute", "UDPRoute"):
        assert headers[route] == ["PARENTS"]
    assert headers["TrafficPolicy"] == ["ACCEPTED", "APPLIED", "TARGETS"]
    assert headers["BackendTLSPolicy"] == ["ACCEPTED", "RESOLVED", "TARGETS"]


def test_policy_conditions_summarise_the_ancestors() -> None:
    cell = cli_get.policy_condition("Accepted")
    ok = {"conditions": [{"type": "Accepted", "status": "True"}]}
    bad = {"conditions": [{"type": "Accepted", "status": "False", "reason": "TargetNotFound"}]}
    assert cell({"status": {"ancestors": [ok, ok]}}, {}) == "True"
    assert cell({"status": {"ancestors": [ok, bad]}}, {}) == "False (TargetNotFound)"
    assert cell({"status": {}}, {}) == "Unknown"


def test_parents_name_section_port_and_foreign_namespace() -> None:
    route = {"metadata": {"namespace": "app"}, "status": {"parents": [
        {"parentRef": {"name": "gw", "namespace": "infra", "sectionName": "https"},
         "conditions": [{"type": "Accepted", "status": "False", "reason": "NotAllowedByListeners"}]},
        {"parentRef": {"name": "local", "port": 8080}, "conditions": [{"type": "Accepted", "status": "True"}]},
    ]}}
    assert cli_get.parents(route, {}) == "infra/gw/https=False (NotAllowedByListeners) local:8080=True"
