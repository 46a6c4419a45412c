"""The CRDs of gateway.lychgate.dev: generated from the models, structural, current, and enforcing."""

from __future__ import annotations

import copy
import functools
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from lychgate.api.registry import KINDS
from tests.kube.helpers import gateway_parameters
from tests.kubefake import KubeFake

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "gen_crds.py"
CRD_DIR = ROOT / "charts" / "lychgate" / "crds"


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_crds", TOOL)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_crds"] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def crds() -> dict[str, dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        doc = yaml.load(path.read_text(), Loader=loader)
        out[doc["spec"]["names"]["kind"]] = doc
    return out


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_checked_in_crds_are_current(gen: ModuleType) -> None:
    """Fails when a model changed without `python tools/gen_crds.py`."""
    assert gen.main(["--check"]) == 0, "CRDs are stale: run `python tools/gen_crds.py`"


def test_check_notices_a_stale_file(gen: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gen, "OUT", tmp_path)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 1  # nothing written yet
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    victim = next(tmp_path.glob("*gatewayparameters.yaml"))
    victim.write_text(victim.read_text().replace("minimum: 0", "minimum: 1"))
    assert gen.main(["--check"]) == 1
    (tmp_path / "gateway.lychgate.dev_gone.yaml").write_text("{}")
    assert gen.main([]) == 0 and not (tmp_path / "gateway.lychgate.dev_gone.yaml").exists()


def test_every_lychgate_kind_has_a_crd() -> None:
    ours = {k.KIND for k in KINDS if k.GROUP == "gateway.lychgate.dev"}
    have = crds()
    assert ours <= set(have) and {"GatewayParameters", "Backend"} <= set(have)
    for crd in have.values():
        (version,) = crd["spec"]["versions"]
        assert version["subresources"] == {"status": {}}
        assert version["additionalPrinterColumns"][-1]["name"] == "Age"
        assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.gateway.lychgate.dev"


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}[*]")


@pytest.mark.parametrize("kind", sorted(crds()))
def test_schemas_are_structural(kind: str) -> None:
    """What the API server demands of a CRD schema (apiextensions' structural rules)."""
    for path, node in _nodes(schema_of(crds()[kind])):
        assert not {"$ref", "anyOf", "oneOf", "allOf", "nullable", "title"} & node.keys(), path
        if not (node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")):
            assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, path
        if node.get("type") == "array":
            assert isinstance(node.get("items"), dict), path
        assert not ("properties" in node and "additionalProperties" in node), path
    meta = schema_of(crds()[kind])["properties"]["metadata"]
    assert meta == {"type": "object"}  # the API server owns metadata's schema


def validate(kind: str, obj: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft4Validator(schema_of(crds()[kind]))
    return [".".join(map(str, e.absolute_path)) + ": " + e.message for e in validator.iter_errors(obj)]


def test_the_schema_enforces_what_the_model_does() -> None:
    good = gateway_parameters(
        deployment={"replicas": 2},
        envoyContainer={"bootstrap": {"logLevel": "debug"}, "resources": {"limits": {"cpu": "500m", "memory": 1}},
                        "securityContext": {"anything": {"goes": True}}},
        service={"type": "NodePort", "clusterIP": "None"},
    )
    assert validate("GatewayParameters", good) == []
    bad = gateway_parameters(deployment={"replicas": -1}, envoyContainer={"bootstrap": {"logLevel": "loud"}},
                             service={"type": "Magic"},
                             podTemplate={"tolerations": [{"tolerationSeconds": "soon"}],
                                          "securityContext": {"runAsUser": "root"}})
    errors = "\n".join(validate("GatewayParameters", bad))
    assert "spec.kube.deployment.replicas" in errors and "spec.kube.envoyContainer.bootstrap.logLevel" in errors
    assert "spec.kube.service.type" in errors
    # Kubernetes types carry Kubernetes' own schema in the CRD.
    assert "spec.kube.podTemplate.tolerations.0.tolerationSeconds" in errors
    assert "spec.kube.podTemplate.securityContext.runAsUser" in errors
    backend = {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "Backend", "metadata": {"name": "b"},
               "spec": {"type": "Static", "static": {"hosts": []}}}
    assert any("spec.static.hosts" in e for e in validate("Backend", backend))  # at least one host


async def test_crds_install_into_an_api_server() -> None:
    """Installed like `helm install` does, the CRDs serve their kinds with a status subresource."""
    async with KubeFake(types=[]) as kube:
        for crd in crds().values():
            kube.install_crd(copy.deepcopy(crd))
        obj = kube.create(gateway_parameters())
        assert obj["metadata"]["generation"] == 1
        status = kube.update_status("gatewayparameters", "params", {})  # lychgate writes it none
        assert status["metadata"]["generation"] == 1


def _pruned(value: Any, schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """The fields the API server would prune from `value` under a structural `schema`."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                yield from _pruned(item, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                yield from _pruned(item, extra, f"{path}.{key}")
            else:
                yield f"{path}.{key}"
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from _pruned(item, schema["items"], f"{path}[{i}]")


def _duplicate_map_keys(value: Any, schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """Items of an x-kubernetes-list-type: map list that share their keys (the API server refuses them)."""
    if isinstance(value, list):
        keys = schema.get("x-kubernetes-list-map-keys")
        if schema.get("x-kubernetes-list-type") == "map" and keys:
            seen = [tuple(item.get(k) for k in keys) for item in value]
            yield from (f"{path}: {k}" for k in {k for k in seen if seen.count(k) > 1})
        for i, item in enumerate(value):
            yield from _duplicate_map_keys(item, schema.get("items") or {}, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _duplicate_map_keys(item, (schema.get("properties") or {}).get(key) or {}, f"{path}.{key}")


def _written_statuses() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(kind, object, status) as lychgate writes it to the API server, for every object of
    its own kinds in the golden cases: translated, stamped by the status store, merged by the
    status writer over a status another controller wrote first."""
    from lychgate.controlplane import builtin_class
    from lychgate.sources.files import FileSource
    from lychgate.status.store import StatusStore
    from lychgate.status.writer import merge_status
    from lychgate.store import Store
    from lychgate.translate.gateway import translate

    golden = ROOT / "tests" / "golden" / "in"
    ours = {k.KIND for k in KINDS if k.GROUP == "gateway.lychgate.dev"}
    for case in sorted(golden.glob("*.yaml")):
        store = Store()
        store.upsert(builtin_class())
        FileSource(case, store).load_all()
        result = translate(store, lambda _gw: "127.0.1.1", waypoint_enabled=True, inference_enabled=True)
        stamped = StatusStore()
        stamped.update({k: s for k, s in result.status.items() if k.kind in ours})
        for key, status in stamped.items():
            foreign = {"ancestors": [{"ancestorRef": {"name": "gw"}, "controllerName": "example.com/other",
                                      "conditions": []}]} if "ancestors" in status else {}
            written = merge_status(foreign, status)
            assert written is not None
            if foreign:  # another controller's entry is kept, not lychgate's to judge
                written["ancestors"] = [a for a in written["ancestors"] if a["controllerName"] != "example.com/other"]
            yield key.kind, f"{case.stem}: {key}", written


def status_problems(kind: str, status: dict[str, Any]) -> list[str]:
    """What the API server would do to this status of a lychgate kind: prune a field its CRD
    does not name, refuse an invalid value or a condition type twice. [] when it fits."""
    schema = schema_of(crds()[kind])["properties"]["status"]
    return [*(f"pruned: {p}" for p in _pruned(status, schema)),
            *(f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft4Validator(schema).iter_errors(status)),
            *(f"duplicate: {d}" for d in _duplicate_map_keys(status, schema))]


def test_the_status_lychgate_writes_fits_its_crd_whole() -> None:
    """A typed status is pruned to what its schema names: every field lychgate writes must be
    there (else `kubectl get -o yaml` shows less than lychgate computed), and valid."""
    seen: dict[str, int] = {}
    for kind, where, status in _written_statuses():
        assert status_problems(kind, status) == [], where
        seen[kind] = seen.get(kind, 0) + 1
    # Every kind lychgate writes status to was seen (DirectResponse and GatewayParameters get none).
    assert set(seen) == {"Backend", "BackendConfigPolicy", "GatewayExtension", "HTTPListenerPolicy",
                         "ListenerPolicy", "TrafficPolicy"}, seen


def test_a_status_field_the_schema_lacks_is_noticed() -> None:
    """The check above can fail: a field lychgate might add without its schema is pruned."""
    schema = schema_of(crds()["TrafficPolicy"])["properties"]["status"]
    condition = {"type": "Accepted", "status": "True", "reason": "Valid", "message": "ok",
                 "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 1}
    status = {"conditions": [condition], "ancestors": [
        {"ancestorRef": {"name": "gw", "group": "gateway.networking.k8s.io", "kind": "Gateway"},
         "controllerName": "gateway.lychgate.dev/lychgate", "conditions": [{**condition, "severity": "low"}]}],
        "summary": "1 of 1"}
    assert list(_pruned(status, schema)) == [".ancestors[0].conditions[0].severity", ".summary"]
    bad = {"conditions": [{**condition, "status": "Yes"}, {k: v for k, v in condition.items() if k != "reason"}]}
    errors = [e.message for e in jsonschema.Draft4Validator(schema).iter_errors(bad)]
    assert any("'Yes' is not one of" in e for e in errors) and any("'reason' is a required" in e for e in errors)
    assert list(_duplicate_map_keys({"conditions": [condition, condition]}, schema)) == [".conditions: ('Accepted',)"]


# Every node the API server keeps unchecked (x-kubernetes-preserve-unknown-fields), and what
# checks it instead. A new one fails test_no_unchecked_node_slips_in until it is added here
# with its reason: typed in the model, or free-form where a structural schema cannot say it.
FREE_FORM: dict[str, str] = {
    r"(ListenerPolicy|HTTPListenerPolicy) .*accessLog\[\]\.fileSink\.jsonFormat":
        "Envoy format dictionary (a Struct, as kgateway's): api/format_dict.FormatDictionary checks it as Envoy does",
    r"(DirectResponse \.spec|TrafficPolicy \.spec\.directResponse)\.bodyFormat\.json"
    r"|(ListenerPolicy|HTTPListenerPolicy) .*localReplies\.(defaultBodyFormat|mappers\[\]\.bodyFormatOverride)\.json":
        "Envoy format dictionary (a Struct, as kgateway's): api/format_dict.FormatDictionary checks it as Envoy does",
    r"GatewayParameters \.spec\.kube\.envoyContainer\.bootstrap\.logFormat\.json":
        "--log-format text, Envoy takes any (measured): api/format_dict.JsonObject checks it is JSON",
    r"GatewayParameters \.spec\.kube\.(deploymentOverlay|serviceOverlay|serviceAccountOverlay)\.spec":
        ("a patch of any part of the object (as kgateway's): translate/parameters.checked checks "
         "the object it makes, in both modes"),
}


def _free_form_nodes() -> Iterator[str]:
    for kind, crd in sorted(crds().items()):
        for path, node in _nodes(schema_of(crd)):
            if node.get("x-kubernetes-preserve-unknown-fields"):
                yield f"{kind} {path}"


def test_no_unchecked_node_slips_in() -> None:
    import re

    found = list(_free_form_nodes())
    unexplained = [p for p in found if not any(re.fullmatch(pattern, p) for pattern in FREE_FORM)]
    assert unexplained == [], "free-form without a reason in FREE_FORM (type it, or say what checks it)"
    unused = [pattern for pattern in FREE_FORM if not any(re.fullmatch(pattern, p) for p in found)]
    assert unused == [], "FREE_FORM entries that match nothing any more: remove them"


def _nested(levels: int) -> dict[str, Any]:
    """An OTLP value `levels` deep: lists of lists, a string at the bottom."""
    value: dict[str, Any] = {"stringValue": "x"}
    for _ in range(levels - 1):
        value = {"arrayValue": [value]}
    return value


def _prune(value: Any, schema: dict[str, Any]) -> Any:
    """What the API server keeps of `value`: the fields its structural schema names."""
    if isinstance(value, dict) and schema.get("properties") is not None \
            and not schema.get("x-kubernetes-preserve-unknown-fields"):
        return {k: _prune(v, schema["properties"][k]) for k, v in value.items() if k in schema["properties"]}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune(v, schema["items"]) for v in value]
    return value


def test_otel_values_nest_as_deep_in_the_crd_as_in_the_model() -> None:
    """A CRD cannot be recursive: AnyValue is written out MAX_NESTING levels deep (tools/gen_crds.py,
    NESTING_KEY), typed at every level, and the model refuses what would go deeper; the API server
    prunes the list a deeper value holds and refuses the emptied value (minProperties 1)."""
    from lychgate.api.listener_policy import MAX_NESTING
    from lychgate.api.registry import ManifestError, parse
    from tests.unit.test_kgateway_rules import crd_errors, crd_schema, lp, manifest

    def policy(levels: int) -> dict[str, Any]:
        kind, spec = lp(accessLog=[{"openTelemetry": {
            "grpcService": {"backendRef": {"name": "otel", "port": 4317}, "logName": "l"},
            "attributes": {"values": [{"key": "k", "value": _nested(levels)}]}}}])
        return manifest("otel", kind, spec)

    deepest = policy(MAX_NESTING)
    parse(deepest)
    assert crd_errors(_prune(deepest, crd_schema("ListenerPolicy"))) == []
    deeper = policy(MAX_NESTING + 1)
    with pytest.raises(ManifestError, match=rf"attributes\.values\[0\]\.value.*nest at most {MAX_NESTING} levels"):
        parse(deeper)
    errors = crd_errors(_prune(deeper, crd_schema("ListenerPolicy")))
    # The value at the last level lost its list to pruning: left empty, it is refused.
    [error] = errors
    assert error.endswith("{} should be non-empty") and error.count("arrayValue") == MAX_NESTING - 1, error
