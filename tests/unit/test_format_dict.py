"""Envoy format dictionaries (access log `jsonFormat`, `bodyFormat.json`): free-form in the
CRDs, checked by the model as the real Envoy checks them (`envoy --mode validate`, the
proxies' own binary): what the model takes Envoy takes, what it refuses Envoy refuses."""

from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.registry import ManifestError, parse
from lychgate.controlplane import builtin_class
from lychgate.deploy.local import envoy_binary
from lychgate.store import Store
from lychgate.translate.gateway import translate
from lychgate.xds.translator import build
from lychgate.xds.validate import Preflight
from tests.kube.helpers import gateway_parameters

# Every kind of JSON value, at every depth: Envoy 1.40 writes each out as given.
EVERYTHING = {"path": "%REQ(:PATH)%", "n": 1, "f": 1.5, "b": True, "none": None, "empty": {},
              "list": ["x", "%PROTOCOL%", 2, [None], {"code": "%RESPONSE_CODE%"}],
              "nested": {"deeper": {"code": "%RESPONSE_CODE%", "percent": "100%%"}}, "%key%": "as is",
              # An operator's argument may hold '%' (an odd count in all): Envoy takes it.
              "start": "%START_TIME(%s)%", "short": "%REQ(USER-AGENT):10%"}

_GATEWAY = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "default"},
            "spec": {"gatewayClassName": "lychgate", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}
_ROUTE = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
          "metadata": {"name": "r", "namespace": "default"},
          "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"filters": [{"type": "ExtensionRef", "extensionRef": {
              "group": "gateway.lychgate.dev", "kind": "DirectResponse", "name": "answer"}}]}]}}


def direct_response(fmt: Any) -> dict[str, Any]:
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "DirectResponse",
            "metadata": {"name": "answer", "namespace": "default"},
            "spec": {"status": 200, "bodyFormat": {"json": fmt}}}


def access_log(fmt: Any) -> dict[str, Any]:
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "ListenerPolicy",
            "metadata": {"name": "logs", "namespace": "default"},
            "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}],
                     "default": {"httpSettings": {"accessLog": [{"fileSink": {"path": "/dev/null", "jsonFormat": fmt}}]}}}}


def traffic_policy(fmt: Any) -> dict[str, Any]:
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
            "metadata": {"name": "tp", "namespace": "default"},
            "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "r"}],
                     "directResponse": {"status": 503, "bodyFormat": {"json": fmt}}}}


@pytest.mark.parametrize("fmt", [EVERYTHING, {}], ids=["every-kind-of-value", "empty"])
def test_what_the_model_takes_envoy_takes(fmt: dict[str, Any], tmp_path: Path) -> None:
    store = Store()
    store.upsert(builtin_class())
    for doc in (_GATEWAY, _ROUTE, direct_response(fmt), access_log(fmt)):
        store.upsert(parse(doc))
    t = translate(store, lambda gw: "127.0.1.1")
    accepted = t.status[ObjectKey("ListenerPolicy", "default", "logs")]["conditions"][0]
    assert accepted["status"] == "True", accepted
    resources = build(t.gateways["default/gw"])
    assert fmt == {} or json.dumps(EVERYTHING["list"]) in json.dumps(fmt)  # the config carries it all
    assert asyncio.run(Preflight(envoy_binary(), tmp_path).check(resources)) == []


# A string whose command operators do not parse, wherever it sits: Envoy's "Couldn't find
# valid command"; the key path the model names.
UNPAIRED = [
    ({"path": "%REQ(:PATH)"}, "path"),
    ({"a": {"b": {"c": "%REQ(:PATH)"}}}, "a.b.c"),
    ({"a": ["ok", "%REQ(:PATH)"]}, "a[1]"),
    ({"a": [{"b": ["x", "100% sure"]}]}, "a[0].b[1]"),
    ({"even": "%REQ(:PATH)% 100% %s"}, "even"),  # an even count, one of them stray all the same
]


@pytest.mark.parametrize("fmt, where", UNPAIRED, ids=[w for _, w in UNPAIRED])
@pytest.mark.parametrize("kind", [direct_response, access_log, traffic_policy], ids=lambda k: k.__name__)
def test_the_model_refuses_an_unpaired_percent_naming_the_key(kind: Any, fmt: dict[str, Any], where: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse(kind(fmt))
    assert f"{where}: " in str(err.value) and "unpaired '%'" in str(err.value), err.value


@pytest.mark.parametrize("fmt, where", UNPAIRED, ids=[w for _, w in UNPAIRED])
def test_envoy_refuses_what_the_model_refuses(fmt: dict[str, Any], where: str, tmp_path: Path) -> None:
    route = ir.Route(ir.RouteSource("HTTPRoute", "default", "r", 0, 0), ir.Match(),
                     ir.DirectResponse(200, json_format=json.dumps(fmt)))
    listener = ir.HTTPListener("http-80", "127.0.0.1", 80, (ir.VirtualHost("80/*", ("*",), (route,)),))
    [blocked] = asyncio.run(Preflight(envoy_binary(), tmp_path).check(build(ir.GatewayIR("default", "gw", (listener,), ()))))
    assert "Couldn't find valid command" in blocked.error


def test_a_value_that_is_not_json_is_refused_naming_the_key() -> None:
    """A YAML timestamp or a set reaches no Envoy: it has no JSON form."""
    with pytest.raises(ManifestError, match=r"spec\.bodyFormat\.json: Value error, when\.at: date is not a JSON value"):
        parse(direct_response({"when": {"at": datetime.date(2025, 1, 1)}}))
    with pytest.raises(ManifestError, match=r"spec\.kube\.envoyContainer\.bootstrap\.logFormat\.json: Value error, "
                                            r"a\[1\]: set is not a JSON value"):
        parse(gateway_parameters(envoyContainer={"bootstrap": {"logFormat": {"json": {"a": ["x", {1}]}}}}))


def test_bootstrap_log_format_takes_any_json() -> None:
    """`--log-format` is a spdlog pattern to Envoy: no command operators, nothing it refuses."""
    from lychgate.api.lychgate import LogFormat

    fmt = {"level": "%l", "n": 1, "list": [None, True], "percent": "%"}
    assert LogFormat.model_validate({"json": fmt}).json_ == fmt
