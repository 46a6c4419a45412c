"""Kubernetes pieces of GatewayParameters are checked against Kubernetes' own schemas."""

from __future__ import annotations

from typing import Any

import pytest

from lychgate.api.lychgate import SelfManaged
from lychgate.api.registry import ManifestError, parse


def params(**kube: Any) -> dict[str, Any]:
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "GatewayParameters",
            "metadata": {"name": "p", "namespace": "default"}, "spec": {"kube": kube}}


def test_whatever_the_api_server_allows_loads() -> None:
    parse(params(
        envoyContainer={
            "securityContext": {"seLinuxOptions": {"level": "s0:c123"}, "appArmorProfile": {"type": "RuntimeDefault"},
                                "procMount": "Default", "seccompProfile": {"type": "Localhost",
                                                                           "localhostProfile": "envoy.json"}},
            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "optional": True}}}],
            "extraVolumeMounts": [{"name": "certs", "mountPath": "/certs", "recursiveReadOnly": "IfPossible"}],
            "resources": {"claims": [{"name": "gpu"}]},
        },
        podTemplate={
            "securityContext": {"fsGroupChangePolicy": "OnRootMismatch", "supplementalGroupsPolicy": "Strict"},
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "matchLabelKeys": ["pod-template-hash"]}]}},
            "tolerations": [{"operator": "Exists"}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                           "nodeAffinityPolicy": "Honor"}],
            "livenessProbe": {"grpc": {"port": 9000, "service": "health"}, "terminationGracePeriodSeconds": 5},
            "extraVolumes": [{"name": "certs", "csi": {"driver": "secrets-store.csi.k8s.io", "readOnly": True}}],
        },
        deployment={"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%"}}},
    ))


@pytest.mark.parametrize("kube, error", [
    ({"envoyContainer": {"securityContext": {"runAsUser": "root"}}},
     "spec.kube.envoyContainer.securityContext: Value error, not a valid Kubernetes SecurityContext: runAsUser: "
     "'root' is not of type 'integer'"),
    ({"podTemplate": {"tolerations": [{"key": "a", "efect": "NoSchedule"}]}},
     "spec.kube.podTemplate.tolerations[0]: Value error, not a valid Kubernetes Toleration: Additional properties "
     "are not allowed ('efect' was unexpected)"),
    ({"podTemplate": {"readinessProbe": {"httpGet": {"path": "/ready"}}}},
     "not a valid Kubernetes Probe: httpGet: 'port' is a required property"),
    ({"podTemplate": {"extraVolumes": [{"name": "v", "emptyDir": {"sizeLimit": []}}]}},
     "not a valid Kubernetes Volume: emptyDir.sizeLimit"),
])
def test_a_wrong_kubernetes_field_is_named(kube: dict[str, Any], error: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse(params(**kube))
    assert error in str(err.value), str(err.value)


def test_kube_and_self_managed_exclude_each_other() -> None:
    with pytest.raises(ManifestError, match="exactly one of kube, selfManaged may be set"):
        parse({**params(), "spec": {"kube": {}, "selfManaged": {}}})
    assert parse({**params(), "spec": {"selfManaged": {}}}).spec.self_managed == SelfManaged()  # type: ignore[attr-defined]
    with pytest.raises(ManifestError, match=r"spec.selfManaged.image: Extra inputs are not permitted"):
        parse({**params(), "spec": {"selfManaged": {"image": "x"}}})  # kgateway's selfManaged has no fields
