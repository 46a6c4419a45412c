"""The proxy of each Gateway: created, shaped by GatewayParameters, updated and removed."""

from __future__ import annotations

import json
from typing import Any

from tests.kube.helpers import (
    Controller,
    eventually,
    gateway,
    gateway_class,
    gateway_condition,
    gateway_parameters,
    route,
    service,
    settle,
)
from tests.kubefake import KubeFake

PROXY_KINDS = ("deployments", "services", "serviceaccounts", "configmaps")


def proxy(kube: KubeFake, name: str = "gw", ns: str = "default") -> dict[str, Any]:
    return {kind: kube.get(kind, name, namespace=ns) for kind in PROXY_KINDS}


def envoy(dep: dict[str, Any]) -> dict[str, Any]:
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    return container


async def test_a_gateway_gets_its_proxy(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    gw = kube.create(gateway(port=80))
    async with controller():
        objs = await eventually(lambda: all(proxy(kube).values()) and proxy(kube), what="proxy objects")
        for obj in objs.values():
            meta = obj["metadata"]
            assert meta["labels"]["app.kubernetes.io/name"] == "gw"
            assert meta["ownerReferences"] == [{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                                                "name": "gw", "uid": gw["metadata"]["uid"], "controller": True}]
        svc, dep = objs["services"], objs["deployments"]
        assert svc["spec"]["type"] == "LoadBalancer"
        assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(80, 80)]
        assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
        assert dep["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "gw"
        pod = dep["spec"]["template"]["spec"]
        assert {"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"} in pod["securityContext"]["sysctls"]
        assert envoy(dep)["securityContext"]["runAsNonRoot"] is True
        assert envoy(dep)["image"] == "ghcr.io/lychgate/envoy:1.40.0"
        assert pod["serviceAccountName"] == "gw"
        boot = json.loads(objs["configmaps"]["data"]["envoy.json"])
        xds = boot["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
        assert xds["endpoint"]["address"]["socket_address"] == {"address": "lychgate.lychgate-system.svc",
                                                                 "port_value": 9977}
        assert boot["node"]["id"] == "default/gw"


async def test_gateway_parameters_shape_the_proxy_and_changes_roll_out(
    kube: KubeFake, controller: Controller
) -> None:
    kube.create(gateway_class())
    kube.apply(gateway_parameters(  # applied, so that a later apply can drop fields
        deployment={"replicas": 3},
        envoyContainer={
            "bootstrap": {"logLevel": "debug", "componentLogLevels": {"upstream": "trace"}},
            "image": {"registry": "registry.example.com/mirror", "tag": "1.40.1", "pullPolicy": "Always"},
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "securityContext": {"runAsUser": 4242},
        },
        podTemplate={
            "extraLabels": {"team": "edge"}, "extraAnnotations": {"example.com/scrape": "true"},
            "securityContext": {"fsGroup": 2000},
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gateway", "effect": "NoSchedule"}],
        },
        service={"type": "NodePort", "extraAnnotations": {"lb.example.com/internal": "true"}},
    ))
    kube.create(gateway(params="params", infra={"labels": {"cost-center": "42"},
                                                "annotations": {"example.com/owner": "edge"}}))
    async with controller():
        objs = await eventually(lambda: all(proxy(kube).values()) and proxy(kube), what="proxy objects")
        dep, svc = objs["deployments"], objs["services"]
        c = envoy(dep)
        assert dep["spec"]["replicas"] == 3
        assert c["image"] == "registry.example.com/mirror/envoy:1.40.1" and c["imagePullPolicy"] == "Always"
        assert c["args"][c["args"].index("--log-level") + 1] == "debug"
        assert c["args"][c["args"].index("--component-log-level") + 1] == "upstream:trace"
        assert c["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}
        assert c["securityContext"]["runAsUser"] == 4242 and c["securityContext"]["runAsNonRoot"] is True
        tpl = dep["spec"]["template"]
        assert tpl["metadata"]["labels"]["team"] == "edge"
        assert tpl["metadata"]["annotations"]["example.com/scrape"] == "true"
        pod = tpl["spec"]
        assert pod["securityContext"]["fsGroup"] == 2000 and pod["securityContext"]["sysctls"]
        assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert pod["affinity"]["nodeAffinity"] and pod["tolerations"][0]["key"] == "dedicated"
        assert svc["spec"]["type"] == "NodePort"
        assert svc["metadata"]["annotations"]["lb.example.com/internal"] == "true"
        for obj in objs.values():  # spec.infrastructure reaches every object
            assert obj["metadata"]["labels"]["cost-center"] == "42"
            assert obj["metadata"]["annotations"]["example.com/owner"] == "edge"
        assert tpl["metadata"]["labels"]["cost-center"] == "42"

        # An edit of the GatewayParameters reaches the Deployment (a rollout) ...
        generation = dep["metadata"]["generation"]
        kube.apply(gateway_parameters(deployment={"replicas": 1},
                                      envoyContainer={"bootstrap": {"logLevel": "warn"}}))

        def updated() -> bool:
            d = kube.get("deployments", "gw")
            assert d is not None
            args = envoy(d)["args"]
            return d["spec"]["replicas"] == 1 and args[args.index("--log-level") + 1] == "warn"

        await eventually(updated, what="the updated Deployment")
        d = kube.get("deployments", "gw")
        assert d is not None and d["metadata"]["generation"] > generation
        # ... and what the parameters no longer say is gone (server-side apply drops it).
        resources = envoy(d).get("resources") or {}
        assert not resources.get("limits") and not resources.get("requests")
        assert not d["spec"]["template"]["spec"].get("nodeSelector")
        assert "--component-log-level" not in envoy(d)["args"]
        await eventually(lambda: kube.get("services", "gw")["spec"]["type"] == "LoadBalancer",  # type: ignore[index]
                         what="the Service back to LoadBalancer")

        # Nothing changes: nothing is written.
        await settle()
        writes = sum(kube.writes(k, "gw") for k in PROXY_KINDS)
        kube.create(service("unrelated"))
        await settle()
        assert sum(kube.writes(k, "gw") for k in PROXY_KINDS) == writes


async def test_class_parameters_from_settings(kube: KubeFake, controller: Controller) -> None:
    """gatewayClassParametersRefs: a Gateway naming no GatewayParameters gets its class's."""
    kube.create(gateway_class())
    kube.namespace("infra")
    kube.create(gateway_parameters("defaults", "infra", deployment={"replicas": 2}))
    kube.create(gateway())
    refs = {"lychgate": {"name": "defaults", "namespace": "infra"}}
    async with controller(gateway_class_parameters_refs=refs):
        dep = await eventually(lambda: kube.get("deployments", "gw"), what="the Deployment")
        assert dep["spec"]["replicas"] == 2
        kube.apply(gateway_parameters("defaults", "infra", deployment={"replicas": 4}))
        await eventually(lambda: kube.get("deployments", "gw")["spec"]["replicas"] == 4,  # type: ignore[index]
                         what="the class parameters' change")


async def test_load_balancer_address_and_readiness_reach_gateway_status(
    kube: KubeFake, controller: Controller
) -> None:
    kube.create(gateway_class())
    kube.create(gateway())
    kube.create(route())
    kube.create(service())
    async with controller():
        await eventually(lambda: kube.get("services", "gw"), what="the proxy Service")
        programmed = await eventually(
            lambda: (c := gateway_condition(kube, "Programmed")) and "replicas ready" in c["message"] and c,
            what="Programmed waiting for the Deployment")
        assert programmed["status"] == "False" and "0 of 1 replicas ready" in programmed["message"]
        assert "addresses" not in kube.get("gateways", "gw")["status"]  # type: ignore[index]

        # The cloud's load balancer controller assigns an address; the kubelet reports the pod ready.
        kube.update_status("services", "gw", {"loadBalancer": {"ingress": [{"hostname": "gw.lb.example.com"}]}})
        kube.update_status("deployments", "gw", {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1})
        await eventually(lambda: kube.get("gateways", "gw")["status"].get("addresses")  # type: ignore[index]
                         == [{"type": "Hostname", "value": "gw.lb.example.com"}], what="the LB address")
        await eventually(lambda: gateway_condition(kube, "Programmed")["status"] == "True",  # type: ignore[index]
                         what="Programmed True")
        kube.update_status("services", "gw", {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}})
        await eventually(lambda: kube.get("gateways", "gw")["status"].get("addresses")  # type: ignore[index]
                         == [{"type": "IPAddress", "value": "203.0.113.7"}], what="the LB IP")


async def test_proxy_goes_with_its_gateway_or_its_class(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    kube.create(gateway_class("other", controller="example.com/other"))
    kube.create(gateway("a"))
    kube.create(gateway("b"))
    async with controller():
        await eventually(lambda: all(proxy(kube, "a").values()) and all(proxy(kube, "b").values()),
                         what="both proxies")
        kube.delete("gateways", "a")  # the garbage collector follows the owner references
        await eventually(lambda: not any(proxy(kube, "a").values()), what="a's proxy gone")
        b = kube.get("gateways", "b")
        assert b is not None
        b["spec"]["gatewayClassName"] = "other"
        kube.apply({"apiVersion": b["apiVersion"], "kind": "Gateway", "metadata": {"name": "b", "namespace": "default"},
                    "spec": b["spec"]})
        await eventually(lambda: not any(proxy(kube, "b").values()), what="b's proxy gone")
        assert kube.get("gateways", "b") is not None


async def test_a_deleted_deployment_is_put_back(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    kube.create(gateway())
    async with controller():
        first = await eventually(lambda: kube.get("deployments", "gw"), what="the Deployment")
        kube.delete("deployments", "gw")
        again = await eventually(lambda: kube.get("deployments", "gw"), what="the Deployment again")
        assert again["metadata"]["uid"] != first["metadata"]["uid"]


async def test_an_object_lychgate_does_not_own_is_not_taken_over(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    kube.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "gw", "namespace": "default"},
                 "spec": {"selector": {"app": "legacy"}, "ports": [{"port": 80}]}})
    kube.create(gateway())
    async with controller():
        programmed = await eventually(
            lambda: (c := gateway_condition(kube, "Programmed")) and "not managed by lychgate" in c["message"] and c,
            what="the conflict in status")
        assert programmed["status"] == "False"
        assert "Service default/gw already exists" in programmed["message"]
        svc = kube.get("services", "gw")
        assert svc is not None and svc["spec"]["selector"] == {"app": "legacy"}
        assert kube.get("deployments", "gw") is None


async def test_invalid_parameters_rejected_by_the_api_server_show_in_status(
    kube: KubeFake, controller: Controller
) -> None:
    """A value only the API server can judge (here: a toleration it refuses) is
    reported on the Gateway; the controller keeps running."""
    kube.create(gateway_class())
    kube.create(gateway_parameters(podTemplate={"tolerations": [{"operator": "Sometimes"}]}))
    kube.create(gateway(params="params"))
    kube.create(gateway("fine", port=8081))

    def reject(obj: dict[str, Any]) -> list[tuple[str, str]]:
        tolerations = obj.get("spec", {}).get("template", {}).get("spec", {}).get("tolerations") or []
        return [("spec.template.spec.tolerations[0].operator", 'Unsupported value: "Sometimes"')
                for t in tolerations if t.get("operator") not in ("Equal", "Exists")]

    kube.add_validator("deployments", reject)
    async with controller():
        cond = await eventually(
            lambda: (c := gateway_condition(kube, "Programmed")) and "rejected" in c["message"] and c,
            what="the rejection in status")
        assert "Unsupported value" in cond["message"]
        await eventually(lambda: kube.get("deployments", "fine"), what="the other Gateway's proxy")
