"""The proxy objects as data: golden files, Kubernetes' own schemas, and Envoy's verdict on the bootstrap.

Regenerate the golden files with `pytest tests/kube --update-golden` and review the diff.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lychgate.ai.config import AIConfig, Provider
from lychgate.api.gateway import Gateway
from lychgate.api.lychgate import GatewayParameters, Image
from lychgate.api.registry import parse
from lychgate.deploy.images import image_ref
from lychgate.deploy.local import envoy_binary
from lychgate.deploy.manifests import ProxyContext, proxy_objects
from tests.kube.helpers import gateway, gateway_parameters

HERE = Path(__file__).parent
KUBE_VERSION = "1.33.0"
CTX = ProxyContext(xds_host="lychgate.lychgate-system.svc")

FULL_PARAMS = gateway_parameters(
    deployment={"replicas": 2, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
    envoyContainer={
        "bootstrap": {"logLevel": "debug", "componentLogLevels": {"upstream": "trace", "http": "debug"}},
        "image": {"registry": "registry.example.com", "repository": "envoy-custom", "tag": "v2",
                  "pullPolicy": "IfNotPresent"},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": 2, "memory": "1Gi"}},
        "securityContext": {"runAsUser": 4242},
        "env": [{"name": "ENVOY_EXTRA", "value": "1"}],
    },
    podTemplate={
        "extraLabels": {"team": "edge"},
        "extraAnnotations": {"example.com/scrape": "true"},
        "securityContext": {"fsGroup": 2000, "sysctls": [{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]},
        "imagePullSecrets": [{"name": "regcred"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "gw"}}}}]}},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gateway", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 45,
        "priorityClassName": "gateway-critical",
    },
    service={"type": "LoadBalancer", "extraLabels": {"exposure": "public"},
             "extraAnnotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"},
             "externalTrafficPolicy": "Local", "loadBalancerSourceRanges": ["203.0.113.0/24"]},
    serviceAccount={"extraAnnotations": {"iam.example.com/role": "gateway"}},
)

# kgateway's newer fields: io_uring, the DNS resolver, PROXY protocol on the readiness port, a
# platform-chosen user, resource claims and the Istio mesh sidecars.
MESH_PARAMS = gateway_parameters(
    envoyContainer={
        "bootstrap": {"ioUring": {"enabled": True}, "dnsResolver": {"udpMaxQueries": 50},
                      "enableReadinessProbeProxyProtocol": True},
        "resources": {"limits": {"memory": "256Mi"}, "claims": [{"name": "gpu", "request": "fast"}]},
    },
    floatingUserId=True,
    sdsContainer={"image": {"registry": "cr.example.com/kgateway-dev", "repository": "sds", "tag": "v2.1.0"},
                  "bootstrap": {"logLevel": "debug"}, "resources": {"requests": {"cpu": "10m"}}},
    istio={"istioProxyContainer": {"logLevel": "info", "istioDiscoveryAddress": "istiod.mesh.svc:15012",
                                   "istioMetaClusterId": "east"},
           "customSidecars": [{"name": "trace-agent", "image": "example.com/agent:1"}]},
)


def _gateway(**kw: Any) -> Gateway:
    raw = gateway(**kw)
    raw["metadata"]["uid"] = "11111111-2222-3333-4444-555555555555"
    obj = parse(raw)
    assert isinstance(obj, Gateway)
    return obj


# A Gateway whose routes use an AI Backend: the AI extension beside Envoy, shaped by aiExtension.
AI_PARAMS = gateway_parameters(aiExtension={
    "image": {"registry": "mirror.example.com", "pullPolicy": "IfNotPresent"},
    "resources": {"requests": {"cpu": "50m"}, "limits": {"memory": "256Mi"}},
    "env": [{"name": "LOG_LEVEL", "value": "DEBUG"}],
    "ports": [{"name": "debug", "containerPort": 5678}],
})
AI = AIConfig(providers={"default/llm/gpt": Provider(id="default/llm/gpt", kind="openai", host="api.openai.com",
                                                     port=443, tls=True, token="sk-golden-not-a-key")})

Case = tuple[Gateway, GatewayParameters | None, tuple[int, ...], ProxyContext, tuple[int, ...], AIConfig | None]
CASES: dict[str, Case] = {
    "default": (_gateway(port=80), None, (80,), CTX, (), None),
    # A UDP listener beside TCP ones on the same port number: UDP ports of their own.
    "udp": (_gateway(port=53), None, (53,), CTX, (53,), None),
    "ai": (_gateway(port=8080), parse(AI_PARAMS), (8080,), CTX, (), AI),  # type: ignore[dict-item]
    "full": (
        _gateway(port=443, infra={"labels": {"cost-center": "42"}, "annotations": {"example.com/owner": "edge"}}),
        parse(FULL_PARAMS),  # type: ignore[dict-item]
        (80, 443),
        ProxyContext(xds_host="gw-system.infra.svc", xds_port=15010, default_image="mirror.example.com/envoy@sha256:abc",
                     xds_ca_pem="-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
        (),
        None,
    ),
    "mesh": (_gateway(port=80), parse(MESH_PARAMS), (80,), CTX, (), None),  # type: ignore[dict-item]
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str, update_golden: bool) -> None:
    got = yaml.safe_dump_all(proxy_objects(*CASES[case]), sort_keys=False, width=120)
    path = HERE / "golden" / f"{case}.yaml"
    if update_golden or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
        if not update_golden:
            pytest.fail(f"{path} did not exist; written now, check it in")
    assert got == path.read_text(), f"proxy objects of {case} changed; run with --update-golden and review"


@pytest.mark.parametrize("case", sorted(CASES))
def test_objects_match_the_kubernetes_schemas(case: str) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    for obj in proxy_objects(*CASES[case]):
        try:
            kv.validate(obj, KUBE_VERSION, strict=True)
        except kv.ValidationError as exc:
            pytest.fail(f"{obj['kind']}: {'.'.join(map(str, exc.path))}: {exc.message}")


@pytest.mark.parametrize("case", ["default", "mesh"])
def test_envoy_accepts_the_bootstrap(case: str, tmp_path: Path) -> None:
    config_map = next(o for o in proxy_objects(*CASES[case]) if o["kind"] == "ConfigMap")
    config = tmp_path / "envoy.json"
    config.write_text(config_map["data"]["envoy.json"])
    result = subprocess.run([envoy_binary(), "--mode", "validate", "-c", str(config)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mesh_parameters_reach_the_deployment() -> None:
    """What kgateway renders for istio/sdsContainer, floatingUserId, resources.claims and the bootstrap fields."""
    objs = {o["kind"]: o for o in proxy_objects(*CASES["mesh"])}
    pod = objs["Deployment"]["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    assert list(containers) == ["envoy", "sds", "istio-proxy", "trace-agent"]
    assert containers["sds"]["image"] == "cr.example.com/kgateway-dev/sds:v2.1.0"
    assert {"name": "LOG_LEVEL", "value": "debug"} in containers["sds"]["env"]
    assert containers["sds"]["ports"] == [{"name": "sds", "containerPort": 8234, "protocol": "TCP"}]
    istio = containers["istio-proxy"]
    assert istio["image"] == "docker.io/istio/proxyv2:1.22.0" and "--proxyLogLevel=info" in istio["args"]
    env = {e["name"]: e.get("value") for e in istio["env"]}
    assert (env["CA_ADDR"], env["ISTIO_META_CLUSTER_ID"], env["ISTIO_META_MESH_ID"]) == (
        "istiod.mesh.svc:15012", "east", "cluster.local")
    volumes = {v["name"]: v for v in pod["volumes"]}
    token = volumes["istio-token"]["projected"]["sources"][0]["serviceAccountToken"]
    assert token["audience"] == "istio-ca" and volumes["istiod-ca-cert"]["configMap"]["name"] == "istio-ca-root-cert"
    # floatingUserId: the platform picks the user, so no securityContext names one.
    assert all("runAsUser" not in c.get("securityContext", {}) for c in (pod, *pod["containers"]))
    assert containers["envoy"]["securityContext"]["runAsNonRoot"] is True
    assert containers["envoy"]["resources"]["claims"] == [{"name": "gpu", "request": "fast"}]
    boot = json.loads(objs["ConfigMap"]["data"]["envoy.json"])
    assert boot["default_socket_interface"] == "envoy.extensions.network.socket_interface.default_socket_interface"
    assert any(e.get("typed_config", {}).get("io_uring_options") == {} for e in boot["bootstrap_extensions"])
    assert boot["typed_dns_resolver_config"]["typed_config"]["udp_max_queries"] == 50
    readiness = next(l for l in boot["static_resources"]["listeners"] if l["name"] == "lychgate_readiness")
    assert [f["name"] for f in readiness["listener_filters"]] == ["envoy.filters.listener.proxy_protocol"]


@pytest.mark.parametrize("default, override, expected", [
    ("ghcr.io/lychgate/envoy:1.40.0", None, "ghcr.io/lychgate/envoy:1.40.0"),
    ("ghcr.io/lychgate/envoy:1.40.0", Image(tag="1.41.0"), "ghcr.io/lychgate/envoy:1.41.0"),
    ("ghcr.io/lychgate/envoy:1.40.0", Image(registry="localhost:5000"), "localhost:5000/envoy:1.40.0"),
    ("ghcr.io/lychgate/envoy:1.40.0", Image(repository="other"), "ghcr.io/lychgate/other:1.40.0"),
    ("ghcr.io/lychgate/envoy:1.40.0", Image(digest="sha256:ff"), "ghcr.io/lychgate/envoy@sha256:ff"),
    ("localhost:5000/envoy@sha256:aa", Image(tag="x"), "localhost:5000/envoy:x"),
    ("envoy", Image(registry=""), "envoy"),
])
def test_image_override_part_by_part(default: str, override: Image | None, expected: str) -> None:
    assert image_ref(default, override)[0] == expected
