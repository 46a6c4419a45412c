"""Every chart value of spec §2.6.1 exists with its default and reaches the manifest it should.

One case per key: set the value, render with the real Helm engine, look where a user would
look (`kubectl get -o yaml`). Each check would fail on the default render, so a value the
templates ignore cannot pass.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from _helm_support import (
    CHART_DIR,
    NAMESPACE,
    NO_DEFAULT,
    SPEC,
    Rendered,
    lookup,
    spec_values,
)

Check = Callable[[Rendered], None]


@dataclass(frozen=True)
class Case:
    key: str
    values: dict[str, Any]
    check: Check


def _service(r: Rendered) -> dict[str, Any]:
    return r.one("Service")["spec"]


def _service_field(field: str, value: Any) -> Check:
    def check(r: Rendered) -> None:
        assert _service(r)[field] == value

    return check


def _pod_field(field: str, value: Any) -> Check:
    def check(r: Rendered) -> None:
        assert r.pod[field] == value

    return check


def _env(name: str, value: str) -> Check:
    def check(r: Rendered) -> None:
        assert r.env()[name] == value

    return check


def _image(expected: str) -> Check:
    def check(r: Rendered) -> None:
        assert r.container["image"] == expected

    return check


def _pull_policy(expected: str) -> Check:
    def check(r: Rendered) -> None:
        assert r.container["imagePullPolicy"] == expected

    return check


def _all(*checks: Check) -> Check:
    def check(r: Rendered) -> None:
        for c in checks:
            c(r)

    return check


def _eq(get: Callable[[Rendered], Any], expected: Any) -> Check:
    def check(r: Rendered) -> None:
        assert get(r) == expected

    return check


def _common_labels(r: Rendered) -> None:
    for obj in r.objects:
        assert obj["metadata"]["labels"]["team"] == "edge", obj["kind"]
    assert r.deployment["spec"]["template"]["metadata"]["labels"]["team"] == "edge"


def _hpa(r: Rendered) -> None:
    hpa = r.one("HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": r.deployment["metadata"]["name"],
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 5)
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    # The autoscaler owns the replica count; a fixed one would fight it on every upgrade.
    assert "replicas" not in r.deployment["spec"]


def _vpa(r: Rendered) -> None:
    vpa = r.one("VerticalPodAutoscaler")
    assert vpa["apiVersion"] == "autoscaling.k8s.io/v1"
    assert vpa["spec"]["targetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": r.deployment["metadata"]["name"],
    }
    assert vpa["spec"]["updatePolicy"] == {"updateMode": "Recreate"}
    assert vpa["spec"]["resourcePolicy"]["containerPolicies"][0]["containerName"] == "controller"


def _pdb(r: Rendered) -> None:
    pdb = r.one("PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    pod_labels = r.deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def _xds_tls(r: Rendered) -> None:
    volumes = {v["name"]: v for v in r.pod["volumes"]}
    mounts = {m["name"]: m for m in r.container["volumeMounts"]}
    (name,) = [n for n, v in volumes.items() if v.get("secret")]
    assert volumes[name]["secret"]["secretName"] == "lychgate-xds-cert"
    assert mounts[name]["readOnly"] is True
    env = r.env()
    assert env["LYCHGATE_XDS_TLS_ENABLED"] == "true"
    # The controller must look for the certificate where the Secret is mounted.
    assert env["LYCHGATE_XDS_TLS_DIR"] == mounts[name]["mountPath"]
    assert "lychgate-xds-cert" in r.notes


def _service_ports(r: Rendered) -> None:
    ports = {p["name"]: p for p in _service(r)["ports"]}
    assert {n: p["port"] for n, p in ports.items()} == {
        "grpc": 19977,
        "health": 19093,
        "metrics": 19092,
        "agentgateway": 9978,
    }
    container_ports = {p["name"]: p["containerPort"] for p in r.container["ports"]}
    # Service ports change; the pod keeps listening where LYCHGATE_*_ADDRESS says.
    for name, port in ports.items():
        assert container_ports[port["targetPort"]] in (9977, 9978, 9093, 9092), name


def _no_service(r: Rendered) -> None:
    assert r.maybe("Service") is None


def _names(name: str) -> Check:
    def check(r: Rendered) -> None:
        assert r.deployment["metadata"]["name"] == name
        assert r.one("Service")["metadata"]["name"] == name
        assert r.one("ServiceAccount")["metadata"]["name"] == name
        assert r.pod["serviceAccountName"] == name
        for binding in r.all("ClusterRoleBinding") + r.all("RoleBinding"):
            assert binding["subjects"][0]["name"] == name
        assert f"deploy/{name}" in r.notes  # the port-forward hint follows the name

    return check


def _name_override(r: Rendered) -> None:
    _names("lychgate-blue")(r)
    assert r.deployment["metadata"]["labels"]["app.kubernetes.io/name"] == "lychgate-blue"


def _parameters_ref(r: Rendered) -> None:
    gc = r.one("GatewayClass", "lychgate")
    assert gc["spec"]["controllerName"] == "gateway.lychgate.dev/lychgate"
    assert gc["spec"]["parametersRef"] == {
        "group": "gateway.lychgate.dev",
        "kind": "GatewayParameters",
        "name": "edge-params",
        "namespace": "infra",
    }
    assert json.loads(r.env()["LYCHGATE_GATEWAY_CLASS_PARAMETERS_REFS"]) == {
        "lychgate": {"name": "edge-params", "namespace": "infra"}
    }


def _inference_rbac(r: Rendered) -> bool:
    rules = r.one("ClusterRole")["rules"]
    return any("inferencepools" in rule["resources"] for rule in rules)


def _inference_with_agentgateway(r: Rendered) -> None:
    assert r.env()["LYCHGATE_INFERENCE_EXTENSION_ENABLED"] == "true"
    assert r.env()["LYCHGATE_AGENTGATEWAY_ENABLED"] == "true"
    assert _inference_rbac(r)
    assert "deprecated" not in r.notes


def _inference_alone(r: Rendered) -> None:
    assert r.env()["LYCHGATE_INFERENCE_EXTENSION_ENABLED"] == "true"
    assert _inference_rbac(r)
    # Deprecated, not refused: the install goes through with a warning.
    assert "WARNING" in r.notes and "agentgateway.enabled" in r.notes


def _pod_annotations(r: Rendered) -> None:
    annotations = r.deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["example.com/team"] == "edge"
    # Helm merges maps: the default scrape annotation stays unless set to null.
    assert annotations["prometheus.io/scrape"] == "true"


def _no_service_account(expected_name: str) -> Check:
    def check(r: Rendered) -> None:
        assert r.maybe("ServiceAccount") is None
        assert r.pod["serviceAccountName"] == expected_name
        for binding in r.all("ClusterRoleBinding") + r.all("RoleBinding"):
            assert binding["subjects"][0]["name"] == expected_name

    return check


def _service_account_named(name: str) -> Check:
    def check(r: Rendered) -> None:
        assert r.one("ServiceAccount")["metadata"]["name"] == name
        assert r.pod["serviceAccountName"] == name
        # The Deployment keeps the full name: only the account is renamed.
        assert r.deployment["metadata"]["name"] == "lychgate"

    return check


def _waypoint(r: Rendered) -> None:
    assert r.env()["LYCHGATE_WAYPOINT_ENABLED"] == "true"
    gc = r.one("GatewayClass", "lychgate-waypoint")
    assert gc["spec"]["controllerName"] == "gateway.lychgate.dev/lychgate"


SELECTOR = [
    {"matchLabels": {"lychgate.dev/discover": "true"}},
    {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "staging"]}]},
]
AFFINITY = {
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "lychgate"}},
                },
            }
        ]
    }
}
TOLERATIONS = [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]
RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
POD_SECURITY = {"runAsNonRoot": True, "runAsUser": 10001, "fsGroup": 10001}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
HPA = {
    "minReplicas": 2,
    "maxReplicas": 5,
    "metrics": [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80},
            },
        }
    ],
}
VPA = {
    "updatePolicy": {"updateMode": "Recreate"},
    "resourcePolicy": {
        "containerPolicies": [{"containerName": "controller", "maxAllowed": {"memory": "1Gi"}}]
    },
}
MERGE = {"trafficPolicy": {"extAuth": "DeepMerge", "extProc": "DeepMerge"}}
REFS = {"lychgate": {"name": "edge-params", "namespace": "infra"}}
LB = {"type": "LoadBalancer"}


def svc(extra: dict[str, Any]) -> dict[str, Any]:
    return {"controller": {"service": extra}}


CASES: list[Case] = [
    Case("affinity", {"affinity": AFFINITY}, _pod_field("affinity", AFFINITY)),
    Case("commonLabels", {"commonLabels": {"team": "edge"}}, _common_labels),
    Case(
        "controller",
        {"controller": {"replicaCount": 2, "logLevel": "warn"}},
        _all(
            _eq(lambda r: r.deployment["spec"]["replicas"], 2),
            _env("LYCHGATE_LOG_LEVEL", "warn"),
            _image("ghcr.io/lychgate/lychgate:0.1.0"),  # the other controller keys keep defaults
        ),
    ),
    Case(
        "controller.extraEnv",
        {
            "controller": {
                "extraEnv": {"HTTPS_PROXY": "http://proxy:3128", "LYCHGATE_LOG_LEVEL": "trace"}
            }
        },
        _all(_env("HTTPS_PROXY", "http://proxy:3128"), _env("LYCHGATE_LOG_LEVEL", "trace")),
    ),
    Case(
        "controller.horizontalPodAutoscaler", {"controller": {"horizontalPodAutoscaler": HPA}}, _hpa
    ),
    Case(
        "controller.image",
        {
            "controller": {
                "image": {
                    "registry": "mirror.example.com/infra",
                    "tag": "v9",
                    "pullPolicy": "Always",
                }
            }
        },
        _all(_image("mirror.example.com/infra/lychgate:v9"), _pull_policy("Always")),
    ),
    Case(
        "controller.image.pullPolicy",
        {"image": {"pullPolicy": "Never"}, "controller": {"image": {"pullPolicy": "Always"}}},
        _pull_policy("Always"),
    ),
    Case(
        "controller.image.registry",
        {
            "image": {"registry": "ignored.example.com"},
            "controller": {"image": {"registry": "quay.io/edge"}},
        },
        _image("quay.io/edge/lychgate:0.1.0"),
    ),
    Case(
        "controller.image.repository",
        {"controller": {"image": {"repository": "lychgate-debug"}}},
        _image("ghcr.io/lychgate/lychgate-debug:0.1.0"),
    ),
    Case(
        "controller.image.tag",
        {"image": {"tag": "ignored"}, "controller": {"image": {"tag": "0.2.0-rc1"}}},
        _image("ghcr.io/lychgate/lychgate:0.2.0-rc1"),
    ),
    Case(
        "controller.logLevel",
        {"controller": {"logLevel": "debug"}},
        _env("LYCHGATE_LOG_LEVEL", "debug"),
    ),
    Case(
        "controller.podDisruptionBudget",
        {"controller": {"podDisruptionBudget": {"minAvailable": 1}}},
        _pdb,
    ),
    Case(
        "controller.priorityClassName",
        {"controller": {"priorityClassName": "system-cluster-critical"}},
        _pod_field("priorityClassName", "system-cluster-critical"),
    ),
    Case(
        "controller.replicaCount",
        {"controller": {"replicaCount": 3}},
        _eq(lambda r: r.deployment["spec"]["replicas"], 3),
    ),
    Case(
        "controller.strategy",
        {
            "controller": {
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
                }
            }
        },
        _eq(
            lambda r: r.deployment["spec"]["strategy"],
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
        ),
    ),
    Case("controller.verticalPodAutoscaler", {"controller": {"verticalPodAutoscaler": VPA}}, _vpa),
    Case("controller.xds", {"controller": {"xds": {"tls": {"enabled": True}}}}, _xds_tls),
    Case(
        "controller.xds.tls.enabled", {"controller": {"xds": {"tls": {"enabled": True}}}}, _xds_tls
    ),
    Case(
        "controller.service",
        {"controller": {"service": {"type": "NodePort", "annotations": {"a": "b"}}}},
        _all(
            _service_field("type", "NodePort"),
            _eq(lambda r: r.one("Service")["metadata"]["annotations"], {"a": "b"}),
        ),
    ),
    Case("controller.service.enabled", svc({"enabled": False}), _no_service),
    Case("controller.service.type", svc(LB), _service_field("type", "LoadBalancer")),
    Case(
        "controller.service.ports",
        svc({"ports": {"grpc": 19977, "health": 19093, "metrics": 19092}}),
        _service_ports,
    ),
    Case(
        "controller.service.annotations",
        svc({"annotations": {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}}),
        _eq(
            lambda r: r.one("Service")["metadata"]["annotations"],
            {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
        ),
    ),
    Case(
        "controller.service.extraLabels",
        svc({"extraLabels": {"exposed-by": "lychgate"}}),
        _eq(lambda r: r.one("Service")["metadata"]["labels"].get("exposed-by"), "lychgate"),
    ),
    Case(
        "controller.service.allocateLoadBalancerNodePorts",
        svc({**LB, "allocateLoadBalancerNodePorts": False}),
        # false is a setting, not "unset": it must reach the Service as a boolean.
        _service_field("allocateLoadBalancerNodePorts", False),
    ),
    Case(
        "controller.service.clusterIP",
        svc({"clusterIP": "None"}),
        _service_field("clusterIP", "None"),
    ),
    Case(
        "controller.service.clusterIPs",
        svc({"clusterIPs": ["10.96.0.50", "fd00::50"], "ipFamilyPolicy": "RequireDualStack"}),
        _service_field("clusterIPs", ["10.96.0.50", "fd00::50"]),
    ),
    Case(
        "controller.service.externalIPs",
        svc({"externalIPs": ["192.0.2.10"]}),
        _service_field("externalIPs", ["192.0.2.10"]),
    ),
    Case(
        "controller.service.externalName",
        svc({"type": "ExternalName", "externalName": "xds.example.com"}),
        _service_field("externalName", "xds.example.com"),
    ),
    Case(
        "controller.service.externalTrafficPolicy",
        svc({**LB, "externalTrafficPolicy": "Local"}),
        _service_field("externalTrafficPolicy", "Local"),
    ),
    Case(
        "controller.service.healthCheckNodePort",
        svc({**LB, "externalTrafficPolicy": "Local", "healthCheckNodePort": "30555"}),
        _service_field("healthCheckNodePort", 30555),
    ),
    Case(
        "controller.service.internalTrafficPolicy",
        svc({"internalTrafficPolicy": "Local"}),
        _service_field("internalTrafficPolicy", "Local"),
    ),
    Case(
        "controller.service.ipFamilies",
        svc({"ipFamilies": ["IPv6", "IPv4"], "ipFamilyPolicy": "PreferDualStack"}),
        _service_field("ipFamilies", ["IPv6", "IPv4"]),
    ),
    Case(
        "controller.service.ipFamilyPolicy",
        svc({"ipFamilyPolicy": "PreferDualStack"}),
        _service_field("ipFamilyPolicy", "PreferDualStack"),
    ),
    Case(
        "controller.service.loadBalancerClass",
        svc({**LB, "loadBalancerClass": "service.k8s.aws/nlb"}),
        _service_field("loadBalancerClass", "service.k8s.aws/nlb"),
    ),
    Case(
        "controller.service.loadBalancerIP",
        svc({**LB, "loadBalancerIP": "198.51.100.7"}),
        _service_field("loadBalancerIP", "198.51.100.7"),
    ),
    Case(
        "controller.service.loadBalancerSourceRanges",
        svc({**LB, "loadBalancerSourceRanges": ["203.0.113.0/24"]}),
        _service_field("loadBalancerSourceRanges", ["203.0.113.0/24"]),
    ),
    Case(
        "controller.service.publishNotReadyAddresses",
        svc({"publishNotReadyAddresses": True}),
        _service_field("publishNotReadyAddresses", True),
    ),
    Case(
        "controller.service.sessionAffinity",
        svc({"sessionAffinity": "ClientIP"}),
        _service_field("sessionAffinity", "ClientIP"),
    ),
    Case(
        "controller.service.sessionAffinityConfig",
        svc(
            {
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
            }
        ),
        _service_field("sessionAffinityConfig", {"clientIP": {"timeoutSeconds": 600}}),
    ),
    Case(
        "controller.service.trafficDistribution",
        svc({"trafficDistribution": "PreferClose"}),
        _service_field("trafficDistribution", "PreferClose"),
    ),
    Case(
        "deploymentAnnotations",
        {"deploymentAnnotations": {"reloader.stakater.com/auto": "true"}},
        _eq(
            lambda r: r.deployment["metadata"].get("annotations"),
            {"reloader.stakater.com/auto": "true"},
        ),
    ),
    Case(
        "discoveryNamespaceSelectors",
        {"discoveryNamespaceSelectors": SELECTOR},
        _eq(lambda r: json.loads(r.env()["LYCHGATE_DISCOVERY_NAMESPACE_SELECTORS"]), SELECTOR),
    ),
    Case("fullnameOverride", {"fullnameOverride": "edge-controller"}, _names("edge-controller")),
    Case("nameOverride", {"nameOverride": "blue"}, _name_override),
    Case("gatewayClassParametersRefs", {"gatewayClassParametersRefs": REFS}, _parameters_ref),
    Case(
        "image",
        {"image": {"registry": "registry.internal:5000", "tag": "v2", "pullPolicy": "Always"}},
        _all(_image("registry.internal:5000/lychgate:v2"), _pull_policy("Always")),
    ),
    Case("image.pullPolicy", {"image": {"pullPolicy": "Never"}}, _pull_policy("Never")),
    Case(
        "image.registry",
        {"image": {"registry": "docker.io/acme"}},
        _image("docker.io/acme/lychgate:0.1.0"),
    ),
    Case("image.tag", {"image": {"tag": "nightly"}}, _image("ghcr.io/lychgate/lychgate:nightly")),
    Case(
        "imagePullSecrets",
        {"imagePullSecrets": ["regcred", {"name": "mirror-cred"}]},
        _pod_field("imagePullSecrets", [{"name": "regcred"}, {"name": "mirror-cred"}]),
    ),
    Case(
        "inferenceExtension",
        {"inferenceExtension": {"enabled": True}, "agentgateway": {"enabled": True}},
        _inference_with_agentgateway,
    ),
    Case("inferenceExtension.enabled", {"inferenceExtension": {"enabled": True}}, _inference_alone),
    Case(
        "nodeSelector",
        {"nodeSelector": {"kubernetes.io/os": "linux"}},
        _pod_field("nodeSelector", {"kubernetes.io/os": "linux"}),
    ),
    Case("podAnnotations", {"podAnnotations": {"example.com/team": "edge"}}, _pod_annotations),
    Case(
        "podSecurityContext",
        {"podSecurityContext": POD_SECURITY},
        _pod_field("securityContext", POD_SECURITY),
    ),
    Case(
        "policyMerge",
        {"policyMerge": MERGE},
        _eq(lambda r: json.loads(r.env()["LYCHGATE_POLICY_MERGE"]), MERGE),
    ),
    Case(
        "resources",
        {"resources": RESOURCES},
        _eq(lambda r: r.container["resources"], RESOURCES),
    ),
    Case(
        "securityContext",
        {"securityContext": CONTAINER_SECURITY},
        _eq(lambda r: r.container["securityContext"], CONTAINER_SECURITY),
    ),
    Case(
        "serviceAccount",
        {"serviceAccount": {"create": False, "name": "platform-controller"}},
        _no_service_account("platform-controller"),
    ),
    Case(
        "serviceAccount.annotations",
        {
            "serviceAccount": {
                "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"}
            }
        },
        _eq(
            lambda r: r.one("ServiceAccount")["metadata"]["annotations"],
            {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"},
        ),
    ),
    Case(
        "serviceAccount.create",
        {"serviceAccount": {"create": False}},
        _no_service_account("default"),
    ),
    Case(
        "serviceAccount.name",
        {"serviceAccount": {"name": "lychgate-ctl"}},
        _service_account_named("lychgate-ctl"),
    ),
    Case("tolerations", {"tolerations": TOLERATIONS}, _pod_field("tolerations", TOLERATIONS)),
    Case(
        "validation",
        {"validation": {"level": "strict"}},
        _env("LYCHGATE_VALIDATION_LEVEL", "strict"),
    ),
    Case(
        "validation.level",
        {"validation": {"level": "Strict"}},
        _env("LYCHGATE_VALIDATION_LEVEL", "strict"),
    ),
    Case("waypoint", {"waypoint": {"enabled": True}}, _waypoint),
    Case("waypoint.enabled", {"waypoint": {"enabled": True}}, _waypoint),
    # Not in the §2.6.1 table, but referenced by it (inferenceExtension).
    Case(
        "agentgateway.enabled",
        {"agentgateway": {"enabled": True}},
        _env("LYCHGATE_AGENTGATEWAY_ENABLED", "true"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_value_reaches_its_manifest(
    case: Case, render: Callable[..., Rendered], defaults: Rendered
) -> None:
    case.check(render(case.values))
    # The same check on the default render must fail, or the case proves nothing.
    with pytest.raises((AssertionError, KeyError)):
        case.check(defaults)


def test_every_spec_value_has_a_case() -> None:
    if not SPEC.exists():
        pytest.skip(f"spec not found at {SPEC}")
    assert {v.key for v in spec_values()} <= {c.key for c in CASES}


def test_values_yaml_has_every_spec_key_with_its_default_and_type() -> None:
    if not SPEC.exists():
        pytest.skip(f"spec not found at {SPEC}")
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    python_types = {"object": dict, "string": str, "int": int, "bool": bool, "list": list}
    for spec in spec_values():
        value = lookup(values, spec.key)
        if spec.default is not NO_DEFAULT:
            assert value == spec.default, spec.key
        if value is not None:  # "string, default nil": only the doc can show the type
            assert isinstance(value, python_types[spec.type]), spec.key
    assert lookup(values, "agentgateway.enabled") is False


def test_release_namespace_is_used(defaults: Rendered) -> None:
    namespaced = [
        o
        for o in defaults.objects
        if o["kind"] not in ("ClusterRole", "ClusterRoleBinding", "GatewayClass")
    ]
    assert namespaced
    for obj in namespaced:
        assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]
