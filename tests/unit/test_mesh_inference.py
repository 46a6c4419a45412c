"""Waypoints and InferencePools as translation decides them: switches, opt-in and refusals."""

from __future__ import annotations

from typing import Any

import yaml

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.core import Pod
from lychgate.api.registry import parse
from lychgate.controlplane import builtin_class
from lychgate.store import Store
from lychgate.translate.gateway import Translation, translate
from lychgate.translate.mesh import WAYPOINT_CLASS

WAYPOINT = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: waypoint, namespace: mesh}
spec:
  gatewayClassName: lychgate-waypoint
  listeners: [{name: mesh, protocol: HBONE, port: 15008}]
---
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {istio.io/use-waypoint: waypoint, istio.io/use-waypoint-namespace: mesh}}
---
apiVersion: v1
kind: Service
metadata: {name: cart, namespace: shop}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: admin, namespace: shop, labels: {istio.io/use-waypoint: none}}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: other}
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: admin, namespace: shop}
spec:
  parentRefs: [{group: "", kind: Service, name: admin}]
  rules: [{backendRefs: [{name: cart, port: 80}]}]
"""

POOL = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: lychgate
  listeners: [{name: http, protocol: HTTP, port: 80}]
---
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: llama, namespace: default}
spec:
  selector: {matchLabels: {app: vllm}}
  targetPorts: [{number: 8000}]
  endpointPickerRef: {name: epp, port: {number: 9002}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: llm, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{group: inference.networking.k8s.io, kind: InferencePool, name: llama}]}]
"""


def _translate(text: str, **switches: bool) -> Translation:
    store = Store()
    store.upsert(builtin_class())
    store.upsert(builtin_class(WAYPOINT_CLASS))
    for doc in yaml.safe_load_all(text):
        store.upsert(parse(doc))
    return translate(store, lambda gw: "127.0.0.1", **switches)


def _condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)


def test_the_waypoint_class_is_not_served_while_waypoints_are_off() -> None:
    out = _translate(WAYPOINT)
    accepted = _condition(out.status[ObjectKey("GatewayClass", "", WAYPOINT_CLASS)], "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "Unsupported")
    assert "waypoint.enabled=true" in accepted["message"]
    assert "mesh/waypoint" not in out.gateways and "mesh/waypoint" not in out.proxies
    assert ObjectKey("Gateway", "mesh", "waypoint") not in out.status


def test_a_namespace_label_captures_its_services_and_none_opts_out() -> None:
    out = _translate(WAYPOINT, waypoint_enabled=True)
    wp = out.gateways["mesh/waypoint"].waypoint
    assert wp is not None and (wp.name, wp.port) == ("hbone-15008", 15008)
    assert [s.authorities for s in wp.services] == [("cart.shop.svc.cluster.local:80",)]
    assert out.proxies["mesh/waypoint"].ports == (15008,)
    # A route on a Service that left the mesh is not the waypoint's to report on.
    assert ObjectKey("HTTPRoute", "shop", "admin") not in out.status


def test_a_waypoint_listener_must_be_hbone() -> None:
    out = _translate(WAYPOINT.replace("protocol: HBONE", "protocol: HTTP"), waypoint_enabled=True)
    status = out.status[ObjectKey("Gateway", "mesh", "waypoint")]
    assert _condition(status, "Accepted")["reason"] == "ListenersNotValid"
    listener = _condition(status["listeners"][0], "Accepted")
    assert listener["reason"] == "UnsupportedProtocol" and "HBONE" in listener["message"]
    assert "mesh/waypoint" not in out.gateways


def test_inference_pool_backends_say_how_to_turn_them_on() -> None:
    out = _translate(POOL)
    (parent,) = out.status[ObjectKey("HTTPRoute", "default", "llm")]["parents"]
    resolved = _condition(parent, "ResolvedRefs")
    assert (resolved["status"], resolved["reason"]) == ("False", "InvalidKind")
    assert "inferenceExtension.enabled=true" in resolved["message"]
    (route,) = out.gateways["default/gw"].listeners[0].virtual_hosts[0].routes
    assert route.action == ir.DirectResponse(500, route.action.body)  # type: ignore[union-attr]
    assert ObjectKey("InferencePool", "default", "llama") not in out.status


def test_a_pool_without_its_picker_is_unresolved_in_both_statuses() -> None:
    out = _translate(POOL, inference_enabled=True)
    (parent,) = out.status[ObjectKey("HTTPRoute", "default", "llm")]["parents"]
    assert "spec.endpointPickerRef: Service default/epp not found" in _condition(parent, "ResolvedRefs")["message"]
    (pool_parent,) = out.status[ObjectKey("InferencePool", "default", "llama")]["parents"]
    assert pool_parent["parentRef"]["name"] == "gw"
    assert _condition(pool_parent, "ResolvedRefs")["reason"] == "InvalidExtensionRef"


def test_pod_readiness_and_address() -> None:
    def pod(status: dict[str, Any]) -> Pod:
        obj = parse({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": status})
        assert isinstance(obj, Pod)
        return obj

    assert pod({"podIP": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]}).ready
    assert not pod({"podIP": "10.0.0.1", "conditions": [{"type": "Ready", "status": "False"}]}).ready
    assert not pod({"phase": "Pending"}).ready
    assert pod({"podIPs": [{"ip": "fd00::1"}]}).ip == "fd00::1"
    assert pod({}).ip is None
