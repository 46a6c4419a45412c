"""A real Kubernetes object is never refused for a field its API server allows.

For each core kind lychgate reads, an object holding every field of Kubernetes' OpenAPI
schema (kubernetes-validate's copy), and for each Gateway API kind one holding every
field of its CRD (shared/gateway-api, the bundle the conformance suite runs), is parsed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lychgate.api.core import ConfigMap, Service
from lychgate.api.gateway import BackendTLSPolicy
from lychgate.api.registry import KINDS, parse

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO.parent / "shared" / "gateway-api" / "config" / "crd" / "standard"
CORE_FILES = {"Namespace": "namespace-v1", "Service": "service-v1", "EndpointSlice": "endpointslice-discovery-v1",
              "Secret": "secret-v1", "ConfigMap": "configmap-v1", "Pod": "pod-v1"}
# Values the API server checks in code rather than in the schema (so the schema has no enum).
CHECKED_IN_CODE = {"addressType": "IPv4", "protocol": "TCP", "operator": "In"}


def _example(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> Any:
    """A value holding every field `schema` allows (the first of each enum, the least number)."""
    if "$ref" in schema:
        return _example(defs[schema["$ref"].rsplit("/", 1)[1]], defs, depth)
    for key in ("allOf", "oneOf", "anyOf"):
        if key in schema and "properties" not in schema and "type" not in schema:
            return _example(schema[key][0], defs, depth)
    if "enum" in schema:
        return next(v for v in schema["enum"] if v is not None)
    if schema.get("x-kubernetes-int-or-string") or schema.get("format") == "int-or-string":
        return 8080
    types = schema.get("type", "object")
    kind = next(t for t in types if t != "null") if isinstance(types, list) else types
    if kind == "object":
        if depth > 12:
            return {}
        if "properties" in schema:
            return {k: CHECKED_IN_CODE.get(k) or _example(v, defs, depth + 1) for k, v in schema["properties"].items()}
        extra = schema.get("additionalProperties")
        return {"key": _example(extra, defs, depth + 1)} if isinstance(extra, dict) else {}
    if kind == "array":
        return [_example(schema.get("items", {}), defs, depth + 1)]
    if kind in ("integer", "number"):
        return max(schema.get("minimum", 1), 1)
    if kind == "boolean":
        return True
    fmt = schema.get("format")
    if fmt == "date-time":
        return "2024-01-01T00:00:00Z"
    if fmt == "byte":
        return "eA=="
    return "x" * max(schema.get("minLength", 1), 1)


def _core_schema(kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    kv = pytest.importorskip("kubernetes_validate")
    root = Path(kv.__file__).parent / "kubernetes-json-schema" / "v1.37.0-local-strict"
    defs = json.loads((root / "_definitions.json").read_text())["$defs"]
    return json.loads((root / f"{CORE_FILES[kind]}.json").read_text()), defs


@pytest.mark.parametrize("kind", sorted(CORE_FILES))
def test_every_field_kubernetes_allows_on_a_core_kind_is_accepted(kind: str) -> None:
    schema, defs = _core_schema(kind)
    doc = _example(schema, defs)
    doc["metadata"].update(name="full", namespace="default")
    obj = parse(doc)
    assert obj.kind == kind


def test_a_core_object_keeps_the_fields_lychgate_does_not_read() -> None:
    svc = parse({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"},
                 "spec": {"clusterIP": "10.0.0.1", "sessionAffinity": "ClientIP",
                          "ports": [{"port": 80, "targetPort": 8080}]}})
    assert isinstance(svc, Service)
    assert (svc.spec.model_extra or {})["clusterIP"] == "10.0.0.1"
    assert svc.spec.ports[0].port == 80


def test_the_fields_lychgate_reads_are_still_validated() -> None:
    with pytest.raises(ValueError, match=r"spec.ports\[0\].port"):
        parse({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"},
               "spec": {"ports": [{"port": 70000}]}})


def test_an_immutable_configmap_is_read() -> None:
    cm = parse({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"},
                "immutable": True, "data": {"ca.crt": "PEM"}})
    assert isinstance(cm, ConfigMap) and cm.immutable and cm.data == {"ca.crt": "PEM"}


def test_backendtlspolicy_well_known_ca_certificates_is_read_under_its_api_name() -> None:
    policy = parse({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
                    "metadata": {"name": "p", "namespace": "d"},
                    "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "s"}],
                             "validation": {"wellKnownCACertificates": "System", "hostname": "example.com"}}})
    assert isinstance(policy, BackendTLSPolicy)
    assert policy.spec.validation.well_known_ca_certificates == "System"


def _crd_versions() -> list[tuple[str, str, dict[str, Any]]]:
    read = {k.KIND for k in KINDS if k.GROUP == "gateway.networking.k8s.io"}
    out = []
    for path in sorted(CRDS.glob("gateway.networking.k8s.io_*.yaml")) if CRDS.is_dir() else []:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition" or doc["spec"]["names"]["kind"] not in read:
                continue
            for version in doc["spec"]["versions"]:
                if version.get("served"):
                    out.append((doc["spec"]["names"]["kind"], version["name"], version["schema"]["openAPIV3Schema"]))
    return out


@pytest.mark.skipif(not CRDS.is_dir(), reason="shared/gateway-api is not beside the work tree")
@pytest.mark.parametrize(("kind", "version", "schema"), _crd_versions(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_field_of_a_gateway_api_crd_is_accepted(kind: str, version: str, schema: dict[str, Any]) -> None:
    doc = _example({**schema, "properties": {k: v for k, v in schema["properties"].items() if k != "status"}}, {})
    doc.update(apiVersion=f"gateway.networking.k8s.io/{version}", kind=kind,
               metadata={"name": "full", "namespace": "default"})
    assert parse(doc).kind == kind
