"""GatewayParameters in Kubernetes mode: the class's and the Gateway's merged, the
kube fields kgateway has (probes, graceful shutdown, extra volumes, mounts and
args, log format, Service ports and IP families), overlays, and the optional
PodDisruptionBudget, HorizontalPodAutoscaler and VerticalPodAutoscaler — all
written to the (fake) API server and read back from it."""

from __future__ import annotations

from typing import Any

from tests.kube.helpers import (
    Controller,
    eventually,
    gateway,
    gateway_class,
    gateway_condition,
    gateway_parameters,
)
from tests.kubefake import KubeFake


def envoy(dep: dict[str, Any]) -> dict[str, Any]:
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    return container


def replace(kube: KubeFake, obj: dict[str, Any]) -> None:
    """A full update (kubectl replace). Not an apply: the fake's server-side apply
    keeps the emptied parents of dropped fields (`horizontalPodAutoscaler: {spec: {}}`),
    which would still ask for the object."""
    rt = kube.resource("gatewayparameters")
    live = kube.get("gatewayparameters", obj["metadata"]["name"])
    assert live is not None
    kube.store.update(rt, "default", obj["metadata"]["name"], {**live, "spec": obj["spec"]}, sub="",
                      version="v1alpha1", manager="kubefake-test")


def arg(container: dict[str, Any], flag: str) -> str:
    args = container["args"]
    return str(args[args.index(flag) + 1])


async def test_class_parameters_are_merged_under_the_gateways(kube: KubeFake, controller: Controller) -> None:
    kube.namespace("infra")
    kube.create(gateway_parameters(
        "class-defaults", "infra", deployment={"replicas": 2},
        envoyContainer={"bootstrap": {"logLevel": "debug"}, "resources": {"limits": {"memory": "256Mi"}}},
        podTemplate={"extraLabels": {"team": "edge"}, "nodeSelector": {"kubernetes.io/os": "linux"}},
        deploymentOverlay={"metadata": {"annotations": {"overlay": "class", "class-only": "yes"}}}))
    kube.create(gateway_class(params=("infra", "class-defaults")))
    kube.create(gateway_parameters(
        deployment={"replicas": 3}, podTemplate={"extraLabels": {"tier": "front"}},
        service={"type": "NodePort"},
        deploymentOverlay={"metadata": {"annotations": {"overlay": "gateway"}}}))
    kube.create(gateway(params="params"))
    kube.create(gateway("plain", port=8081))  # names no parameters: the class's alone
    async with controller():
        dep = await eventually(lambda: kube.get("deployments", "gw"), what="the Deployment")
        assert dep["spec"]["replicas"] == 3  # the Gateway's value wins ...
        assert arg(envoy(dep), "--log-level") == "debug"  # ... and what it leaves unset is the class's
        assert envoy(dep)["resources"] == {"limits": {"memory": "256Mi"}}
        labels = dep["spec"]["template"]["metadata"]["labels"]
        assert labels["team"] == "edge" and labels["tier"] == "front"  # maps merge key by key
        assert dep["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
        # Overlays: the class's first, the Gateway's over it.
        assert dep["metadata"]["annotations"]["overlay"] == "gateway"
        assert dep["metadata"]["annotations"]["class-only"] == "yes"
        svc = kube.get("services", "gw")
        assert svc is not None and svc["spec"]["type"] == "NodePort"
        plain = await eventually(lambda: kube.get("deployments", "plain"), what="the other Deployment")
        assert plain["spec"]["replicas"] == 2 and "tier" not in plain["spec"]["template"]["metadata"]["labels"]


async def test_helm_class_parameters_merge_under_the_gateways(kube: KubeFake, controller: Controller) -> None:
    kube.namespace("infra")
    kube.create(gateway_parameters("defaults", "infra", podTemplate={"priorityClassName": "gateways"},
                                   deployment={"replicas": 2}))
    kube.create(gateway_class())
    kube.create(gateway_parameters(deployment={"replicas": 5}))
    kube.create(gateway(params="params"))
    async with controller(gateway_class_parameters_refs={"lychgate": {"name": "defaults", "namespace": "infra"}}):
        dep = await eventually(lambda: kube.get("deployments", "gw"), what="the Deployment")
        assert dep["spec"]["replicas"] == 5
        assert dep["spec"]["template"]["spec"]["priorityClassName"] == "gateways"


async def test_every_kube_field_reaches_its_object(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    probe = {"httpGet": {"path": "/ready", "port": 19003}, "periodSeconds": 7}
    kube.create(gateway_parameters(
        envoyContainer={
            "bootstrap": {"logFormat": {"json": {"level": "%l", "msg": "%j"}}},
            "extraArgs": ["--concurrency", "2"],
            "extraVolumeMounts": [{"name": "certs", "mountPath": "/etc/extra-certs", "readOnly": True}],
        },
        podTemplate={
            "startupProbe": {**probe, "failureThreshold": 30},
            "readinessProbe": probe,
            "livenessProbe": {"tcpSocket": {"port": 19003}},
            "gracefulShutdown": {"enabled": True, "sleepTimeSeconds": 20},
            "extraVolumes": [{"name": "certs", "secret": {"secretName": "extra-certs"}}],
        },
        service={"type": "NodePort", "ports": [{"port": 8080, "nodePort": 30080}],
                 "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"},
    ))
    kube.create(gateway(params="params", listeners=[
        {"name": "http", "port": 8080, "protocol": "HTTP"}, {"name": "other", "port": 8081, "protocol": "HTTP"}]))
    async with controller():
        dep = await eventually(lambda: kube.get("deployments", "gw"), what="the Deployment")
        c, pod = envoy(dep), dep["spec"]["template"]["spec"]
        assert arg(c, "--log-format") == '{"level":"%l","msg":"%j"}'
        assert c["args"][-2:] == ["--concurrency", "2"]
        assert {"name": "certs", "mountPath": "/etc/extra-certs", "readOnly": True} in c["volumeMounts"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["certs"]["secret"]["secretName"] == "extra-certs" and "bootstrap" in volumes
        assert c["startupProbe"]["failureThreshold"] == 30 and c["readinessProbe"]["periodSeconds"] == 7
        assert c["livenessProbe"]["tcpSocket"] == {"port": 19003}
        assert c["lifecycle"] == {"preStop": {"sleep": {"seconds": 20}}}
        assert pod["terminationGracePeriodSeconds"] >= 25  # the sleep fits in the grace period
        svc = kube.get("services", "gw")
        assert svc is not None
        ports = {p["port"]: p for p in svc["spec"]["ports"]}
        assert ports[8080]["nodePort"] == 30080 and ports[8081].get("nodePort") != 30080
        assert svc["spec"]["ipFamilies"] == ["IPv4"] and svc["spec"]["ipFamilyPolicy"] == "SingleStack"


async def test_default_security_contexts_can_be_left_to_the_platform(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    kube.create(gateway_parameters(omitDefaultSecurityContext=True, podTemplate={"securityContext": {"fsGroup": 7}}))
    kube.create(gateway(params="params"))
    async with controller():
        dep = await eventually(lambda: kube.get("deployments", "gw"), what="the Deployment")
        assert "securityContext" not in envoy(dep)  # not even lychgate's runAsNonRoot
        assert dep["spec"]["template"]["spec"]["securityContext"] == {"fsGroup": 7}  # only what was given


async def test_overlays_patch_the_generated_objects(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    kube.create(gateway_parameters(
        deploymentOverlay={"metadata": {"labels": {"overlaid": "yes"}}, "spec": {"template": {"spec": {
            "containers": [{"name": "envoy", "env": [{"name": "FROM_OVERLAY", "value": "1"}]}],
            "dnsPolicy": "ClusterFirstWithHostNet"}}}},
        serviceOverlay={"metadata": {"annotations": {"lb.example.com/scheme": "internal"}},
                        "spec": {"sessionAffinity": "ClientIP"}},
        serviceAccountOverlay={"metadata": {"annotations": {"iam.example.com/role": "gateway"}}},
    ))
    kube.create(gateway(params="params"))
    async with controller():
        dep = await eventually(lambda: kube.get("deployments", "gw"), what="the Deployment")
        c = envoy(dep)  # merged by name into lychgate's container: its image and args stay
        assert {"name": "FROM_OVERLAY", "value": "1"} in c["env"] and c["args"][0] == "-c"
        assert dep["spec"]["template"]["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
        assert dep["metadata"]["labels"]["overlaid"] == "yes"
        svc = kube.get("services", "gw")
        assert svc is not None and svc["spec"]["sessionAffinity"] == "ClientIP"
        assert svc["metadata"]["annotations"]["lb.example.com/scheme"] == "internal"
        sa = kube.get("serviceaccounts", "gw")
        assert sa is not None and sa["metadata"]["annotations"]["iam.example.com/role"] == "gateway"


async def test_disruption_budget_and_autoscalers_come_and_go(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    kube.create(gateway_parameters(
        podDisruptionBudget={"spec": {"minAvailable": 1}},
        horizontalPodAutoscaler={"metadata": {"labels": {"scaled": "yes"}}, "spec": {
            "minReplicas": 2, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}},
        verticalPodAutoscaler={"spec": {"updatePolicy": {"updateMode": "Off"}}},
    ))
    kube.create(gateway(params="params"))
    async with controller():
        pdb = await eventually(lambda: kube.get("poddisruptionbudgets", "gw"), what="the PodDisruptionBudget")
        dep = await eventually(lambda: kube.get("deployments", "gw"), what="the Deployment")
        assert pdb["spec"]["minAvailable"] == 1
        assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
        hpa = await eventually(lambda: kube.get("horizontalpodautoscalers", "gw"), what="the HPA")
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "gw"}
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 5)
        assert hpa["metadata"]["labels"]["scaled"] == "yes"
        assert hpa["metadata"]["ownerReferences"][0]["kind"] == "Gateway"
        vpa = await eventually(lambda: kube.get("verticalpodautoscalers", "gw"), what="the VPA")
        assert vpa["spec"]["targetRef"]["name"] == "gw" and vpa["spec"]["updatePolicy"]["updateMode"] == "Off"
        # No longer asked for: removed.
        replace(kube, gateway_parameters(podDisruptionBudget={"spec": {"maxUnavailable": 1}}))
        await eventually(lambda: kube.get("horizontalpodautoscalers", "gw") is None
                         and kube.get("verticalpodautoscalers", "gw") is None, what="the autoscalers to go")
        pdb = await eventually(lambda: (p := kube.get("poddisruptionbudgets", "gw")) and "maxUnavailable" in p["spec"]
                               and p, what="the changed PodDisruptionBudget")
        assert "minAvailable" not in pdb["spec"]


async def test_self_managed_gateways_get_status_and_xds_but_no_objects(kube: KubeFake, controller: Controller) -> None:
    """selfManaged: lychgate deploys nothing (the user runs the proxy); the class's kube settings give way."""
    kube.namespace("infra")
    kube.create(gateway_parameters("class-defaults", "infra", deployment={"replicas": 2}))
    kube.create(gateway_class(params=("infra", "class-defaults")))
    kube.create({**gateway_parameters("own"), "spec": {"selfManaged": {}}})
    kube.create(gateway(params="own"))
    kube.create(gateway("deployed", port=8081))  # the class's parameters alone: deployed as usual
    async with controller():
        await eventually(lambda: kube.get("deployments", "deployed"), what="the other Gateway's Deployment")
        programmed = await eventually(lambda: gateway_condition(kube, "Programmed"), what="the Gateway's status")
        assert programmed["status"] == "False"
        assert "self-managed" in programmed["message"] and "node id default/gw" in programmed["message"]
        assert gateway_condition(kube, "Accepted")["status"] == "True"  # type: ignore[index]
        for kind in ("deployments", "services", "configmaps", "serviceaccounts"):
            assert kube.get(kind, "gw") is None, kind


async def test_what_lychgate_cannot_run_is_refused_naming_the_field(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    kube.create(gateway_parameters(agentgateway={"enabled": True}))
    kube.create(gateway_parameters("sds-alone", sdsContainer={"image": {"repository": "sds"}}))
    kube.create(gateway(params="params"))
    kube.create(gateway("sds", port=8081, params="sds-alone"))
    async with controller():
        for name, message in (
            ("gw", "GatewayParameters default/params: spec.kube.agentgateway.enabled: lychgate runs Envoy proxies"),
            ("sds", "GatewayParameters default/sds-alone: spec.kube.sdsContainer: the SDS sidecar serves Istio's"),
        ):
            accepted = await eventually(lambda n=name: gateway_condition(kube, "Accepted", n),  # type: ignore[misc]
                                        what=f"{name}'s status")
            assert accepted["status"] == "False" and message in accepted["message"], accepted
        assert kube.get("deployments", "gw") is None and kube.get("deployments", "sds") is None


async def test_an_overlay_that_makes_an_invalid_object_is_refused_naming_the_field(
        kube: KubeFake, controller: Controller) -> None:
    """Overlays are free-form patches: the object each makes is checked whole against Kubernetes'
    type, or the API server would drop a misspelt field without a word (server-side apply only warns).
    Translation checks them, so the Gateway is not accepted with them (as locally)."""
    kube.create(gateway_class())
    kube.create(gateway_parameters(deploymentOverlay={"spec": {"template": {"spec": {"dnsPolicyy": "None"}}}}))
    kube.create(gateway_parameters("svc", serviceOverlay={"spec": {"sessionAffinity": 1}}))
    kube.create(gateway_parameters("hpa", horizontalPodAutoscaler={"spec": {"minReplicas": 2}}))
    kube.create(gateway(params="params"))
    kube.create(gateway("svc", port=8081, params="svc"))
    kube.create(gateway("hpa", port=8082, params="hpa"))
    async with controller():
        for name, message in (
            ("gw", "GatewayParameters default/params: spec.kube.deploymentOverlay: the Deployment it makes is not a "
                   "valid Kubernetes Deployment: spec.template.spec: Additional properties are not allowed "
                   "('dnsPolicyy' was unexpected)"),
            ("svc", "GatewayParameters default/svc: spec.kube.serviceOverlay: the Service it makes is not a valid "
                    "Kubernetes Service: spec.sessionAffinity: 1 is not of type 'string'"),
            # A layer may leave maxReplicas to another; the object made must have it.
            ("hpa", "GatewayParameters default/hpa: spec.kube.horizontalPodAutoscaler: the HorizontalPodAutoscaler "
                    "it makes is not a valid Kubernetes HorizontalPodAutoscaler: spec: 'maxReplicas' is a required"),
        ):
            accepted = await eventually(lambda n=name: gateway_condition(kube, "Accepted", n),  # type: ignore[misc]
                                        what=f"{name}'s status")
            assert accepted["status"] == "False" and accepted["reason"] == "InvalidParameters", accepted
            assert message in accepted["message"], accepted
        assert kube.get("deployments", "gw") is None and kube.get("horizontalpodautoscalers", "hpa") is None


async def test_an_invalid_overlay_on_a_deployed_gateway_is_said_and_the_proxy_kept(
        kube: KubeFake, controller: Controller) -> None:
    """An edit that breaks a deployed Gateway's overlay: the Gateway is not Accepted, naming the field
    (not only a Programmed condition that its connected proxies would turn True), and its objects stay
    as they were."""
    kube.create(gateway_class())
    kube.create(gateway_parameters(serviceOverlay={"metadata": {"labels": {"tier": "edge"}}}))
    kube.create(gateway(params="params"))
    async with controller():
        svc = await eventually(lambda: kube.get("services", "gw"), what="the Service")
        assert svc["metadata"]["labels"]["tier"] == "edge"
        replace(kube, gateway_parameters(serviceOverlay={"metadata": {"labels": {"tier": "edge"}},
                                                         "spec": {"sessionAffinity": 1}}))
        accepted = await eventually(
            lambda: (c := gateway_condition(kube, "Accepted")) and c["status"] == "False" and c,
            what="Accepted=False")
        assert "spec.kube.serviceOverlay: the Service it makes is not a valid Kubernetes Service: " \
               "spec.sessionAffinity: 1 is not of type 'string'" in accepted["message"], accepted
        kept = kube.get("services", "gw")
        assert kept is not None and kept["spec"]["sessionAffinity"] == "None"  # as the API server defaults it
        assert kube.get("deployments", "gw") is not None


async def test_the_helm_class_layer_completes_what_the_gateways_overlay_leaves(
        kube: KubeFake, controller: Controller) -> None:
    """Helm's class parameters (gatewayClassParametersRefs) are a layer of the merge that translation
    checks: the Gateway's HPA leaves maxReplicas to it and is accepted and deployed whole."""
    kube.namespace("infra")
    kube.create(gateway_parameters("defaults", "infra", horizontalPodAutoscaler={"spec": {"maxReplicas": 6}}))
    kube.create(gateway_class())
    kube.create(gateway_parameters(horizontalPodAutoscaler={"spec": {"minReplicas": 2}}))
    kube.create(gateway(params="params"))
    async with controller(gateway_class_parameters_refs={"lychgate": {"name": "defaults", "namespace": "infra"}}):
        hpa = await eventually(lambda: kube.get("horizontalpodautoscalers", "gw"), what="the HPA")
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 6), hpa["spec"]
        accepted = gateway_condition(kube, "Accepted")
        assert accepted is not None and accepted["status"] == "True", accepted


def test_disruption_budget_and_autoscaler_specs_are_kubernetes_types() -> None:
    """Typed in the CRD and the model (but for the fields lychgate fills in or another layer gives)."""
    from lychgate.api.registry import ManifestError, parse

    parse(gateway_parameters(horizontalPodAutoscaler={"spec": {"minReplicas": 2}},
                             podDisruptionBudget={"spec": {"maxUnavailable": "50%"}},
                             verticalPodAutoscaler={"spec": {
                                 "updatePolicy": {"updateMode": "InPlaceOrRecreate", "minReplicas": 2},
                                 "resourcePolicy": {"containerPolicies": [{
                                     "containerName": "envoy", "minAllowed": {"cpu": "100m", "memory": "64Mi"},
                                     "controlledValues": "RequestsOnly"}]},
                                 "recommenders": [{"name": "default"}]}}))
    for kube_fields, where in (
        # The VerticalPodAutoscaler is a CRD outside Kubernetes' schemas, typed after its own CRD.
        ({"verticalPodAutoscaler": {"spec": {"updatePolicy": {"updateMode": "Sometimes"}}}},
         "verticalPodAutoscaler.spec: Value error, not a valid Kubernetes VerticalPodAutoscalerSpec: "
         "updatePolicy.updateMode: 'Sometimes' is not one of"),
        ({"verticalPodAutoscaler": {"spec": {"updatePolicies": {"updateMode": "Off"}}}},
         "verticalPodAutoscaler.spec: Value error, not a valid Kubernetes VerticalPodAutoscalerSpec: "
         "Additional properties are not allowed ('updatePolicies' was unexpected)"),
        ({"podDisruptionBudget": {"spec": {"minAvailable": [1]}}}, "podDisruptionBudget.spec: Value error, not a "
         "valid Kubernetes PodDisruptionBudgetSpec: minAvailable"),
        ({"horizontalPodAutoscaler": {"spec": {"maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilisation": 80}}}]}}},
         "horizontalPodAutoscaler.spec: Value error, not a valid Kubernetes HorizontalPodAutoscalerSpec: "
         "metrics[0].resource.target: Additional properties are not allowed ('averageUtilisation' was unexpected)"),
    ):
        try:
            parse(gateway_parameters(**kube_fields))
        except ManifestError as err:
            assert f"spec.kube.{where}" in str(err), err
        else:
            raise AssertionError(f"accepted: {kube_fields}")


async def test_helm_class_parameters_can_make_every_gateway_self_managed(kube: KubeFake,
                                                                         controller: Controller) -> None:
    kube.namespace("infra")
    kube.create({**gateway_parameters("defaults", "infra"), "spec": {"selfManaged": {}}})
    kube.create(gateway_class())
    kube.create(gateway_parameters("own-kube", deployment={"replicas": 2}))
    kube.create(gateway())  # the class's selfManaged: nothing deployed
    kube.create(gateway("kube", port=8081, params="own-kube"))  # its own kube parameters win
    async with controller(gateway_class_parameters_refs={"lychgate": {"name": "defaults", "namespace": "infra"}}):
        dep = await eventually(lambda: kube.get("deployments", "kube"), what="the kube Gateway's Deployment")
        assert dep["spec"]["replicas"] == 2
        assert kube.get("deployments", "gw") is None and kube.get("configmaps", "gw") is None
