"""Local mode: the installation's GatewayParameters of a class (Helm's gatewayClassParametersRefs,
LYCHGATE_GATEWAY_CLASS_PARAMETERS_REFS locally) are the lowest layer translation merges, and
their overlays are checked like any other layer's.

A real ControlPlane over the file source, with a deployer that starts no proxy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lychgate.api.base import ObjectKey
from lychgate.controlplane import ControlPlane, builtin_class
from lychgate.settings import Settings
from lychgate.sources.files import FileSource
from tests.no_proxies import NoProxies

GATEWAY = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: lychgate
  infrastructure: {parametersRef: {group: gateway.lychgate.dev, kind: GatewayParameters, name: own}}
  listeners: [{name: http, protocol: HTTP, port: 8080}]
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayParameters
metadata: {name: own, namespace: default}
spec:
  kube:
    horizontalPodAutoscaler: {spec: {minReplicas: 2}}
"""


def installed(overlay: str) -> str:
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayParameters
metadata: {{name: defaults, namespace: infra}}
spec:
  kube:
    horizontalPodAutoscaler: {{spec: {{maxReplicas: 6}}}}
    deploymentOverlay: {{spec: {{template: {{spec: {{{overlay}}}}}}}}}
"""


def accepted(cp: ControlPlane) -> dict[str, Any]:
    status = cp.status.get(ObjectKey("Gateway", "default", "gw")) or {}
    return next(c for c in status.get("conditions", []) if c["type"] == "Accepted")


async def test_the_installations_layer_is_merged_and_checked_locally(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    refs = {"lychgate": {"name": "defaults", "namespace": "infra"}}
    cp = ControlPlane(Settings(state_dir=tmp_path / "state", gateway_class_parameters_refs=refs),
                      NoProxies())  # type: ignore[arg-type]
    cp.store.upsert(builtin_class())
    source = FileSource(manifests, cp.store)

    async def write(name: str, text: str) -> None:
        (manifests / name).write_text(text)
        source.reload(manifests / name)
        await cp.sync_once()

    # No installation layer yet: the Gateway's own HPA lacks maxReplicas, which no layer gives.
    await write("gateway.yaml", GATEWAY)
    refused = accepted(cp)
    assert refused["status"] == "False" and refused["reason"] == "InvalidParameters", refused
    assert "spec.kube.horizontalPodAutoscaler: the HorizontalPodAutoscaler it makes is not a valid" in refused["message"]

    # The installation's layer gives it; its own overlay has a misspelt field, named.
    await write("defaults.yaml", installed("dnsPolicyy: None"))
    refused = accepted(cp)
    assert refused["status"] == "False" and (
        "GatewayParameters default/own: spec.kube.deploymentOverlay: the Deployment it makes is not a valid "
        "Kubernetes Deployment: spec.template.spec: Additional properties are not allowed ('dnsPolicyy' was "
        "unexpected)") in refused["message"], refused

    # Fixed: accepted, and the proxy's parameters are the layers merged.
    await write("defaults.yaml", installed("dnsPolicy: None"))
    assert accepted(cp)["status"] == "True", accepted(cp)
    params = cp.translation.proxies["default/gw"].parameters
    assert params is not None
    hpa = params.spec.kube.horizontal_pod_autoscaler
    assert hpa is not None and hpa.spec is not None
    assert hpa.spec.get("minReplicas") == 2 and hpa.spec.get("maxReplicas") == 6, hpa.spec

    # A pass with nothing changed does not merge the layers again (a dump and a validation per
    # Gateway each pass): the proxy keeps the very same parameters.
    await cp.sync_once()
    assert cp.translation.proxies["default/gw"].parameters is params
