"""The chart as a whole: lint, defaults, the schema's refusals and the template's own failures."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from typing import Any

import helm_python as helm
import pytest
from _helm_support import CHART_DIR, EVERYTHING, NAMESPACE, REPO, Rendered

import lychgate


def _lint_problems(values: dict[str, Any] | None) -> list[dict[str, Any]]:
    report = helm.lint(CHART_DIR, values, strict=True, namespace=NAMESPACE, kube_version="v1.33.0")
    # Severity 1 is "info" (e.g. "icon is recommended"); warnings and errors are problems.
    return [m for m in report["messages"] if m["severity"] >= 2]


@pytest.mark.parametrize("values", [None, EVERYTHING], ids=["defaults", "everything"])
def test_lint_is_clean(values: dict[str, Any] | None) -> None:
    assert _lint_problems(values) == []


def test_lint_reports_bad_values() -> None:
    # The lint gate must be able to fail, or the test above proves nothing.
    problems = _lint_problems({"controller": {"replicaCount": "many"}})
    assert any("replicaCount" in p["error"] for p in problems)


def test_chart_version_follows_the_package(chart: helm.Chart) -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert chart.metadata["appVersion"] == pyproject["project"]["version"] == lychgate.__version__


def test_defaults_render_the_controller(defaults: Rendered) -> None:
    assert sorted(defaults.kinds()) == sorted(
        [
            "ClusterRole/lychgate-lychgate-system",
            "ClusterRoleBinding/lychgate-lychgate-system",
            "Deployment/lychgate",
            "GatewayClass/lychgate",
            "Role/lychgate-leader-election",
            "RoleBinding/lychgate-leader-election",
            "Service/lychgate",
            "ServiceAccount/lychgate",
        ]
    )
    c = defaults.container
    assert c["image"] == "ghcr.io/lychgate/lychgate:0.1.0"
    assert c["command"] == ["lychgate", "controller"]
    assert defaults.deployment["spec"]["replicas"] == 1
    assert defaults.deployment["spec"]["template"]["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9092",
        "prometheus.io/path": "/metrics",
    }
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"grpc": 9977, "agentgateway": 9978, "health": 9093, "metrics": 9092}
    svc_ports = {p["name"]: p["port"] for p in defaults.one("Service")["spec"]["ports"]}
    assert svc_ports == ports
    assert defaults.one("Service")["spec"]["type"] == "ClusterIP"
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    # TLS off: no Secret is required for the pod to start.
    assert "volumes" not in defaults.pod
    assert defaults.maybe("GatewayClass", "lychgate-waypoint") is None
    assert "WARNING" not in defaults.notes


def test_controller_addresses(defaults: Rendered) -> None:
    env = defaults.env()
    assert env["LYCHGATE_XDS_ADDRESS"] == "0.0.0.0:9977"
    assert env["LYCHGATE_AGENTGATEWAY_XDS_ADDRESS"] == "0.0.0.0:9978"
    assert env["LYCHGATE_METRICS_ADDRESS"] == "0.0.0.0:9092"
    assert env["LYCHGATE_HEALTH_ADDRESS"] == "0.0.0.0:9093"
    # The admin server has no authentication: it stays on loopback, reached by port-forward.
    assert env["LYCHGATE_ADMIN_ADDRESS"] == "127.0.0.1:9095"
    namespace = next(e for e in defaults.env_entries() if e["name"] == "LYCHGATE_NAMESPACE")
    assert namespace["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def test_extra_env_overrides_without_duplicates(render: Callable[..., Rendered]) -> None:
    r = render(
        {
            "controller": {
                "extraEnv": {
                    "LYCHGATE_LOG_LEVEL": "trace",
                    "TOKEN": {"secretKeyRef": {"name": "s", "key": "k"}},
                    "N": 3,
                }
            }
        }
    )
    names = [e["name"] for e in r.env_entries()]
    assert len(names) == len(set(names))
    assert r.env()["LYCHGATE_LOG_LEVEL"] == "trace"
    assert r.env()["N"] == "3"
    token = next(e for e in r.env_entries() if e["name"] == "TOKEN")
    assert token == {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}


def test_rbac_covers_what_the_controller_touches(defaults: Rendered) -> None:
    def allowed(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
        return any(
            group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
            for r in rules
        )

    cluster = defaults.one("ClusterRole")["rules"]
    gateway_api = [
        "gateways",
        "gatewayclasses",
        "httproutes",
        "grpcroutes",
        "tlsroutes",
        "tcproutes",
        "udproutes",
        "referencegrants",
        "backendtlspolicies",
        "listenersets",
    ]
    for resource in gateway_api:
        assert allowed(cluster, "gateway.networking.k8s.io", resource, "watch"), resource
        if resource != "referencegrants":
            assert allowed(cluster, "gateway.networking.k8s.io", f"{resource}/status", "patch"), (
                resource
            )
    for resource in ["gatewayparameters", "trafficpolicies", "gatewayextensions", "backends"]:
        assert allowed(cluster, "gateway.lychgate.dev", resource, "list"), resource
        assert allowed(cluster, "gateway.lychgate.dev", f"{resource}/status", "update"), resource
    for resource in ["services", "namespaces", "secrets", "configmaps"]:
        assert allowed(cluster, "", resource, "watch"), resource
    assert allowed(cluster, "discovery.k8s.io", "endpointslices", "watch")
    for group, resource in [
        ("apps", "deployments"),
        ("", "services"),
        ("", "serviceaccounts"),
        ("", "configmaps"),
    ]:
        for verb in ["create", "update", "delete"]:
            assert allowed(cluster, group, resource, verb), (resource, verb)
    assert allowed(cluster, "", "events", "create")
    # The AI extension's config Secret of a proxy (deploy/ai_container.py): written, pruned.
    for verb in ["create", "patch", "delete"]:
        assert allowed(cluster, "", "secrets", verb), verb
    # Read-only where it only reads; no access to Pods at all.
    assert not allowed(cluster, "", "namespaces", "update")
    assert not any("pods" in r["resources"] for r in cluster)
    assert not any("*" in r["verbs"] or "*" in r["resources"] for r in cluster)
    # The lease lives in the installation namespace only.
    assert not allowed(cluster, "coordination.k8s.io", "leases", "update")
    assert allowed(defaults.one("Role")["rules"], "coordination.k8s.io", "leases", "update")
    binding = defaults.one("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == defaults.one("ClusterRole")["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "lychgate", "namespace": NAMESPACE}
    ]


def test_inference_pools_readable_only_when_enabled(
    defaults: Rendered, render: Callable[..., Rendered]
) -> None:
    def pools(r: Rendered) -> list[dict[str, Any]]:
        return [
            rule for rule in r.one("ClusterRole")["rules"] if "inferencepools" in rule["resources"]
        ]

    assert pools(defaults) == []
    (rule,) = pools(render({"inferenceExtension": {"enabled": True}}))
    assert rule["apiGroups"] == ["inference.networking.k8s.io"]
    assert rule["verbs"] == ["get", "list", "watch"]


def test_waypoint_class_gets_its_own_parameters(render: Callable[..., Rendered]) -> None:
    r = render(EVERYTHING)
    assert r.one("GatewayClass", "lychgate")["spec"]["parametersRef"]["name"] == "gp"
    assert r.one("GatewayClass", "lychgate-waypoint")["spec"]["parametersRef"]["name"] == "gp-mesh"


# --- refusals: the schema (wrong types, unknown keys, bad enums) -----------------------------

SCHEMA_REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("unknown top-level key", {"replicaCount": 2}, "replicaCount"),
    ("unknown controller key", {"controller": {"replicas": 2}}, "replicas"),
    ("unknown service key", {"controller": {"service": {"port": 80}}}, "port"),
    ("unknown service port", {"controller": {"service": {"ports": {"http": 80}}}}, "http"),
    ("unknown feature key", {"waypoint": {"enable": True}}, "enable"),
    (
        "unknown GatewayClass",
        {"gatewayClassParametersRefs": {"other": {"name": "a", "namespace": "b"}}},
        "other",
    ),
    (
        "autoscaler target is automatic",
        {"controller": {"horizontalPodAutoscaler": {"maxReplicas": 3, "scaleTargetRef": {}}}},
        "scaleTargetRef",
    ),
    ("replicaCount string", {"controller": {"replicaCount": "two"}}, "replicaCount"),
    ("bool as string", {"waypoint": {"enabled": "yes"}}, "enabled"),
    ("labels as list", {"commonLabels": ["team=edge"]}, "commonLabels"),
    (
        "annotation value not a string",
        {"podAnnotations": {"prometheus.io/scrape": True}},
        "podAnnotations",
    ),
    ("tolerations as object", {"tolerations": {"key": "x"}}, "tolerations"),
    (
        "selectors as object",
        {"discoveryNamespaceSelectors": {"matchLabels": {"a": "b"}}},
        "discoveryNamespaceSelectors",
    ),
    (
        "bad selector operator",
        {
            "discoveryNamespaceSelectors": [
                {"matchExpressions": [{"key": "a", "operator": "Equals"}]}
            ]
        },
        "operator",
    ),
    ("port out of range", {"controller": {"service": {"ports": {"grpc": 70000}}}}, "grpc"),
    ("validation level", {"validation": {"level": "lenient"}}, "level"),
    ("log level", {"controller": {"logLevel": "verbose"}}, "logLevel"),
    ("strategy type", {"controller": {"strategy": {"type": "BlueGreen"}}}, "type"),
    (
        "policy merge mode",
        {"policyMerge": {"trafficPolicy": {"extProc": "ShallowMerge"}}},
        "extProc",
    ),
    (
        "policy merge feature",
        {"policyMerge": {"trafficPolicy": {"rateLimit": "DeepMerge"}}},
        "rateLimit",
    ),
    ("service type", {"controller": {"service": {"type": "Internal"}}}, "type"),
    ("pull policy", {"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
    (
        "allocateLoadBalancerNodePorts",
        {"controller": {"service": {"allocateLoadBalancerNodePorts": "maybe"}}},
        "allocateLoadBalancerNodePorts",
    ),
]


@pytest.mark.parametrize(
    ("values", "where"),
    [(v, w) for _, v, w in SCHEMA_REFUSALS],
    ids=[i for i, _, _ in SCHEMA_REFUSALS],
)
def test_schema_refuses(
    values: dict[str, Any], where: str, render_error: Callable[[dict[str, Any]], str]
) -> None:
    message = render_error(values)
    assert "schema" in message and where in message, message


@pytest.mark.parametrize("level", ["standard", "strict", "STRICT", "Standard"])
def test_validation_level_is_case_insensitive(level: str, render: Callable[..., Rendered]) -> None:
    r = render({"validation": {"level": level}})
    assert r.env()["LYCHGATE_VALIDATION_LEVEL"] == level.lower()


@pytest.mark.parametrize("merge", ["extAuth", "extProc", "transformation"])
def test_policy_merge_accepts_deep_merge(merge: str, render: Callable[..., Rendered]) -> None:
    r = render({"policyMerge": {"trafficPolicy": {merge: "DeepMerge"}}})
    assert merge in r.env()["LYCHGATE_POLICY_MERGE"]


@pytest.mark.parametrize("strategy", ["Recreate", "RollingUpdate"])
def test_strategy_types(strategy: str, render: Callable[..., Rendered]) -> None:
    assert render({"controller": {"strategy": {"type": strategy}}}).deployment["spec"][
        "strategy"
    ] == {"type": strategy}


# --- refusals: the templates (rules a schema cannot say clearly) ------------------------------

TEMPLATE_REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    (
        "parametersRef without namespace",
        {"gatewayClassParametersRefs": {"lychgate": {"name": "gp"}}},
        "gatewayClassParametersRefs.lychgate: missing namespace",
    ),
    (
        "parametersRef without name",
        {"gatewayClassParametersRefs": {"lychgate-waypoint": {"namespace": "infra"}}},
        "gatewayClassParametersRefs.lychgate-waypoint: missing name",
    ),
    (
        "parametersRef empty",
        {"gatewayClassParametersRefs": {"lychgate": {}}},
        "gatewayClassParametersRefs.lychgate: missing name and namespace",
    ),
    (
        "parametersRef blank name",
        {"gatewayClassParametersRefs": {"lychgate": {"name": "", "namespace": "infra"}}},
        "gatewayClassParametersRefs.lychgate: missing name",
    ),
    (
        "autoscaler without maxReplicas",
        {"controller": {"horizontalPodAutoscaler": {"minReplicas": 2}}},
        "maxReplicas is required",
    ),
    (
        "budget with both bounds",
        {"controller": {"podDisruptionBudget": {"minAvailable": 1, "maxUnavailable": 1}}},
        "not both",
    ),
    (
        "Recreate with rollingUpdate",
        {"controller": {"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}}},
        "only allowed with controller.strategy.type RollingUpdate",
    ),
]


@pytest.mark.parametrize(
    ("values", "expected"),
    [(v, e) for _, v, e in TEMPLATE_REFUSALS],
    ids=[i for i, _, _ in TEMPLATE_REFUSALS],
)
def test_template_refuses_clearly(
    values: dict[str, Any], expected: str, render_error: Callable[[dict[str, Any]], str]
) -> None:
    assert expected in render_error(values)


def test_common_labels_reach_every_optional_object(render: Callable[..., Rendered]) -> None:
    r = render(EVERYTHING)
    kinds = {o["kind"] for o in r.objects}
    assert {"HorizontalPodAutoscaler", "VerticalPodAutoscaler", "PodDisruptionBudget"} <= kinds
    for obj in r.objects:
        assert obj["metadata"]["labels"]["team"] == "edge", obj["kind"]
