"""Kubernetes mode with inferenceExtension.enabled, against the upstream InferencePool CRD
(v1.6.0, from ../shared/inference-extension): Pods and pools read from the API, the
pool's endpoints and picker in the proxy's configuration, status written on the
InferencePool and cleared when no route uses it, every request the controller made
allowed by the chart's RBAC for that setting; switched off, neither kind is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from tests.kube.helpers import (
    CONTROLLER,
    Controller,
    condition,
    endpoint_slice,
    eventually,
    gateway,
    gateway_class,
    service,
    settle,
)
from tests.kubefake import KubeFake

REPO = Path(__file__).resolve().parents[2]
CRD = (REPO.parent / "shared" / "inference-extension" / "config" / "crd"
       / "inference.networking.k8s.io_inferencepools.yaml")
NAMESPACE = "lychgate-system"
INFERENCE = "inference.networking.k8s.io/v1"

pytestmark = pytest.mark.skipif(not CRD.exists(), reason=f"upstream InferencePool CRD not found at {CRD}")


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default",
                                                           "labels": {"app": "vllm"}},
            "spec": {"containers": [{"name": "vllm", "image": "vllm"}]}}


def pod_status(ip: str, ready: bool = True) -> dict[str, Any]:
    return {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": str(ready)}]}


def pool() -> dict[str, Any]:
    return {"apiVersion": INFERENCE, "kind": "InferencePool", "metadata": {"name": "llama", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "vllm"}}, "targetPorts": [{"number": 8000}, {"number": 8002}],
                     "appProtocol": "kubernetes.io/h2c",
                     "endpointPickerRef": {"name": "epp", "port": {"number": 9002}, "failureMode": "FailOpen"}}}


def pool_route() -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "llm", "namespace": "default"},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["llm.example.com"],
                     "rules": [{"backendRefs": [{"group": "inference.networking.k8s.io", "kind": "InferencePool",
                                                 "name": "llama"}]}]}}


def setup(kube: KubeFake) -> None:
    kube.install_crd(yaml.safe_load(CRD.read_text()))
    kube.create(gateway_class())
    kube.create(gateway())
    kube.create(service("epp", port=9002, target=9002))
    kube.create(endpoint_slice("epp", address="10.0.0.20", port=9002))
    for name, ip, ready in (("vllm-1", "10.1.0.1", True), ("vllm-2", "10.1.0.2", True),
                            ("vllm-starting", "10.1.0.3", False)):
        kube.create(pod(name))
        kube.update_status("pods", name, pod_status(ip, ready), namespace="default")
    kube.create(pool())
    kube.create(pool_route())


def chart_rules(values: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rules of the chart's ClusterRole and of its Role (in its namespace), rendered by Helm."""
    chart = helm.Chart.load(REPO / "charts" / "lychgate")
    try:
        manifests = chart.render(values=values, name="lychgate", namespace=NAMESPACE)
    finally:
        chart.close()
    objects = [d for path, text in manifests.items() if not path.endswith("NOTES.txt")
               for d in yaml.safe_load_all(text) if d]
    rules = {kind: [r for o in objects if o["kind"] == kind for r in o.get("rules") or []]
             for kind in ("ClusterRole", "Role")}
    return rules["ClusterRole"], rules["Role"]


def allowed(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


def pool_parents(kube: KubeFake) -> list[dict[str, Any]]:
    return ((kube.get("inferencepools", "llama", "default") or {}).get("status") or {}).get("parents") or []


def route_resolved(kube: KubeFake) -> dict[str, Any] | None:
    parents = ((kube.get("httproutes", "llm", "default") or {}).get("status") or {}).get("parents") or []
    return condition(parents[0], "ResolvedRefs") if parents else None


async def test_pools_and_pods_from_the_api_with_status_on_the_pool(kube: KubeFake, controller: Controller) -> None:
    setup(kube)
    async with controller(inference_extension_enabled=True, agentgateway_enabled=True) as wiring:
        (parent,) = await eventually(lambda: pool_parents(kube), what="InferencePool status")
        assert parent["parentRef"] == {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                       "namespace": "default", "name": "gw"}
        assert parent["controllerName"] == CONTROLLER
        accepted, resolved = condition(parent, "Accepted"), condition(parent, "ResolvedRefs")
        assert accepted and accepted["status"] == "True" and accepted["observedGeneration"] == 1
        assert resolved and resolved["status"] == "True"
        assert (route_resolved(kube) or {}).get("status") == "True"

        # The proxy's clusters: ready Pods by IP on both target ports, h2c; the picker's Service.
        clusters = {c.name: c for gw in wiring.cp.translation.gateways.values() for c in gw.clusters}
        pool_cluster = clusters["inferencepool/default/llama"]
        assert {(e.address, e.port) for e in pool_cluster.endpoints} == {
            ("10.1.0.1", 8000), ("10.1.0.1", 8002), ("10.1.0.2", 8000), ("10.1.0.2", 8002)}
        assert pool_cluster.protocol == "h2c" and pool_cluster.endpoint_override
        assert [(e.address, e.port) for e in clusters["epp/default/llama"].endpoints] == [("10.0.0.20", 9002)]

        # A Pod turning ready joins the pool.
        kube.update_status("pods", "vllm-starting", pod_status("10.1.0.3"), namespace="default")
        await eventually(lambda: ("10.1.0.3", 8000) in {
            (e.address, e.port) for gw in wiring.cp.translation.gateways.values() for c in gw.clusters
            if c.name == "inferencepool/default/llama" for e in c.endpoints}, what="the ready Pod in the pool")

        # No route uses the pool any more: its parent entry goes.
        kube.delete("httproutes", "llm", "default")
        await eventually(lambda: not pool_parents(kube), what="InferencePool parents cleared")

    # The chart, with the same switches, grants every request the controller made.
    cluster, role = chart_rules({"inferenceExtension": {"enabled": True}, "agentgateway": {"enabled": True}})
    made = {(r.verb, r.resource, r.subresource, r.namespace) for r in kube.requests if r.verb}
    assert {("watch", "pods"), ("patch", "inferencepools")} <= {(v, res.split(".")[0]) for v, res, _, _ in made}
    for verb, resource, sub, namespace in made:
        plural, _, group = resource.partition(".")
        name = f"{plural}/{sub}" if sub else plural
        rules = cluster + (role if namespace == NAMESPACE else [])
        assert allowed(rules, group, name, verb), f"the chart does not let the controller {verb} {name} ({group})"


async def test_switched_off_neither_pools_nor_pods_are_read(kube: KubeFake, controller: Controller) -> None:
    setup(kube)
    async with controller(inference_extension_enabled=False):
        resolved = await eventually(lambda: route_resolved(kube), what="HTTPRoute status")
        assert resolved["status"] == "False" and resolved["reason"] == "InvalidKind"
        assert "inferenceExtension.enabled" in resolved["message"]
        await settle()
        assert not pool_parents(kube)
        read = {r.resource.split(".")[0] for r in kube.requests}
        assert "httproutes" in read and "pods" not in read and "inferencepools" not in read
