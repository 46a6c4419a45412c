"""Every rendered object is a valid Kubernetes object of its kind, and the objects fit together.

Two layers: structural checks written here (names, labels, selectors, port and role
references: what makes `kubectl apply` or the pod fail), and, where an offline schema exists,
validation against it: the Kubernetes OpenAPI schemas shipped by kubernetes-validate (strict:
unknown fields fail) and the Gateway API CRD of GatewayClass from shared/gateway-api.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from _helm_support import EVERYTHING, GATEWAY_API_CRDS, NAMESPACE, Rendered

KUBE_VERSION = "1.33.0"

# The kinds the chart may render, and whether they live in a namespace.
KINDS: dict[tuple[str, str], bool] = {
    ("apps/v1", "Deployment"): True,
    ("v1", "Service"): True,
    ("v1", "ServiceAccount"): True,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): False,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): False,
    ("rbac.authorization.k8s.io/v1", "Role"): True,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): True,
    ("autoscaling/v2", "HorizontalPodAutoscaler"): True,
    ("autoscaling.k8s.io/v1", "VerticalPodAutoscaler"): True,
    ("policy/v1", "PodDisruptionBudget"): True,
    ("gateway.networking.k8s.io/v1", "GatewayClass"): False,
}

# Defined by CustomResourceDefinitions, so not in the Kubernetes OpenAPI schemas.
CRD_KINDS = {"VerticalPodAutoscaler", "GatewayClass"}

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
PORT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
VERBS = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "everything": EVERYTHING,
    "renamed-and-shared-account": {
        "fullnameOverride": "edge",
        "serviceAccount": {"create": False, "name": "platform"},
        "controller": {"podDisruptionBudget": {"minAvailable": "50%"}},
    },
    "service-knobs": {
        "controller": {
            "service": {
                "type": "LoadBalancer",
                "externalTrafficPolicy": "Local",
                "healthCheckNodePort": 30555,
                "ipFamilyPolicy": "PreferDualStack",
                "ipFamilies": ["IPv4", "IPv6"],
                "loadBalancerSourceRanges": ["203.0.113.0/24"],
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}},
                "trafficDistribution": "PreferClose",
                "publishNotReadyAddresses": True,
            }
        },
        "podSecurityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "securityContext": {"readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}},
        "resources": {"requests": {"cpu": "100m"}},
        "tolerations": [{"key": "infra", "operator": "Exists"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "imagePullSecrets": ["regcred"],
    },
}


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request: pytest.FixtureRequest, render: Callable[..., Rendered]) -> Rendered:
    return render(VALUE_SETS[request.param])


def _check_labels(labels: dict[str, str], where: str) -> None:
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        assert not prefix or (len(prefix) <= 253 and DNS_SUBDOMAIN.match(prefix)), f"{where}: {key}"
        assert len(name) <= 63 and QUALIFIED_NAME.match(name), f"{where}: label key {key}"
        assert isinstance(value, str) and len(value) <= 63 and LABEL_VALUE.match(value), (
            f"{where}: label {key}={value!r}"
        )


def test_objects_are_known_kinds_with_valid_metadata(rendered: Rendered) -> None:
    for obj in rendered.objects:
        kind = (obj["apiVersion"], obj["kind"])
        assert kind in KINDS, f"unexpected {kind}"
        meta = obj["metadata"]
        where = f"{obj['kind']}/{meta['name']}"
        assert len(meta["name"]) <= 253 and DNS_SUBDOMAIN.match(meta["name"]), where
        if KINDS[kind]:
            assert meta["namespace"] == NAMESPACE, where
        else:
            assert "namespace" not in meta, where
        _check_labels(meta.get("labels", {}), where)
        for key, value in meta.get("annotations", {}).items():
            assert isinstance(value, str), f"{where}: annotation {key}"
    names = [(o["kind"], o["metadata"]["name"]) for o in rendered.objects]
    assert len(names) == len(set(names)), "two objects of one kind share a name"


def test_deployment_is_runnable(rendered: Rendered) -> None:
    deployment = rendered.deployment
    template_labels = deployment["spec"]["template"]["metadata"]["labels"]
    _check_labels(template_labels, "pod template")
    assert deployment["spec"]["selector"]["matchLabels"].items() <= template_labels.items()
    pod = rendered.pod
    for container in pod["containers"]:
        assert DNS_LABEL.match(container["name"])
        assert container["image"] and " " not in container["image"]
        port_names = [p["name"] for p in container["ports"]]
        assert len(port_names) == len(set(port_names))
        for name in port_names:
            assert len(name) <= 15 and PORT_NAME.match(name) and re.search("[a-z]", name), name
        for probe in ("livenessProbe", "readinessProbe"):
            assert container[probe]["httpGet"]["port"] in port_names
        env_names = [e["name"] for e in container.get("env", [])]
        assert len(env_names) == len(set(env_names))
        for entry in container.get("env", []):
            assert ENV_NAME.match(entry["name"])
            assert set(entry) in ({"name", "value"}, {"name", "valueFrom"}), entry
            assert isinstance(entry.get("value", ""), str), entry
        volumes = {v["name"] for v in pod.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            assert mount["name"] in volumes
    accounts = {o["metadata"]["name"] for o in rendered.all("ServiceAccount")}
    assert pod["serviceAccountName"] in accounts or not accounts


def test_service_reaches_the_pods(rendered: Rendered) -> None:
    service = rendered.maybe("Service")
    if service is None:
        return
    pod_labels = rendered.deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    container_ports = {p["name"] for p in rendered.container["ports"]}
    ports = service["spec"]["ports"]
    assert len({p["name"] for p in ports}) == len(ports)
    assert len({p["port"] for p in ports}) == len(ports)
    for port in ports:
        assert 1 <= port["port"] <= 65535
        assert port["targetPort"] in container_ports


def test_rbac_references_resolve(rendered: Rendered) -> None:
    for kind in ("ClusterRole", "Role"):
        for role in rendered.all(kind):
            for rule in role["rules"]:
                assert rule["apiGroups"] and rule["resources"] and rule["verbs"]
                assert set(rule["verbs"]) <= VERBS, rule
    account = rendered.pod["serviceAccountName"]
    for binding_kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = rendered.one(binding_kind)
        assert binding["roleRef"]["kind"] == role_kind
        rendered.one(role_kind, binding["roleRef"]["name"])  # the role it grants exists
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
        ]


def test_controller_only_objects_target_the_controller(rendered: Rendered) -> None:
    deployment = rendered.deployment["metadata"]["name"]
    pod_labels = rendered.deployment["spec"]["template"]["metadata"]["labels"]
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment}
    for hpa in rendered.all("HorizontalPodAutoscaler"):
        assert hpa["spec"]["scaleTargetRef"] == target
        assert hpa["spec"]["maxReplicas"] >= hpa["spec"].get("minReplicas", 1)
    for vpa in rendered.all("VerticalPodAutoscaler"):
        assert vpa["spec"]["targetRef"] == target
        mode = vpa["spec"].get("updatePolicy", {}).get("updateMode", "Recreate")
        assert mode in {"Off", "Initial", "Recreate", "InPlaceOrRecreate", "Auto"}
    for pdb in rendered.all("PodDisruptionBudget"):
        assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        assert len({"minAvailable", "maxUnavailable"} & set(pdb["spec"])) == 1


def test_gateway_classes(rendered: Rendered) -> None:
    for gc in rendered.all("GatewayClass"):
        assert gc["spec"]["controllerName"] == "gateway.lychgate.dev/lychgate"
        ref = gc["spec"].get("parametersRef")
        if ref is not None:
            assert (ref["group"], ref["kind"]) == ("gateway.lychgate.dev", "GatewayParameters")
            assert DNS_SUBDOMAIN.match(ref["name"]) and DNS_LABEL.match(ref["namespace"])


# --- offline schemas ------------------------------------------------------------------------


def test_core_objects_match_the_kubernetes_schemas(rendered: Rendered) -> None:
    kv = pytest.importorskip(
        "kubernetes_validate", reason="needs kubernetes-validate (Kubernetes OpenAPI schemas)"
    )
    validated = 0
    for obj in rendered.objects:
        if obj["kind"] in CRD_KINDS:
            continue
        try:
            kv.validate(obj, KUBE_VERSION, strict=True)
        except kv.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {path}: {exc.message}")
        validated += 1
    assert validated >= 6


def test_gateway_classes_match_the_gateway_api_crd(rendered: Rendered) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    crd_file = GATEWAY_API_CRDS / "gateway.networking.k8s.io_gatewayclasses.yaml"
    if not crd_file.exists():
        pytest.skip(f"Gateway API CRDs not found at {crd_file.parent}")
    crd = yaml.safe_load(crd_file.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    validator = jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])
    classes = rendered.all("GatewayClass")
    assert classes
    for gc in classes:
        errors = [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(gc)]
        assert errors == [], gc["metadata"]["name"]
