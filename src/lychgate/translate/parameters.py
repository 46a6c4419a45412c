"""GatewayParameters of a class and of a Gateway, merged as kgateway merges them.

The class's parameters are the defaults and the Gateway's are laid over them,
field by field: objects merge key by key, a list or a value the Gateway sets
replaces the class's, and what the Gateway leaves unset keeps the class's value
(a Gateway naming its own parameters no longer loses the class's defaults).
Overlays merge the same way, so the class's overlay applies first and the
Gateway's over it. `kube` and `selfManaged` exclude each other: a layer that
sets one drops the other from the layers below.
"""

from __future__ import annotations

from typing import Any

from lychgate.api.lychgate import GatewayParameters
from lychgate.deploy.overload import quantity_bytes


def deep_merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = deep_merge(base[key], value) if key in base else value
        return out
    return over


def merge(*layers: GatewayParameters | None) -> GatewayParameters | None:
    """The layers (lowest first) as one GatewayParameters, named after the last one."""
    present = [p for p in layers if p is not None]
    if len(present) < 2:
        return present[0] if present else None
    spec: dict[str, Any] = {}
    for params in present:
        layer = params.spec.model_dump(by_alias=True, exclude_unset=True, mode="json")
        # kube and selfManaged exclude each other: the later layer's choice of platform wins.
        for platform, other in (("selfManaged", "kube"), ("kube", "selfManaged")):
            if platform in layer:
                spec.pop(other, None)
        spec = deep_merge(spec, layer)
    top = present[-1]
    return GatewayParameters.model_validate({
        "apiVersion": top.api_version, "kind": top.kind,
        "metadata": top.metadata.model_dump(by_alias=True, exclude_none=True, mode="json"), "spec": spec})


def problem(params: GatewayParameters | None) -> str | None:
    """What lychgate cannot honour in the (merged) parameters, naming the field; None: all of it."""
    if params is None:
        return None
    kube = params.spec.kube
    overload = kube.envoy_container.bootstrap.overload
    if overload is not None and overload.max_heap_size is not None and quantity_bytes(overload.max_heap_size) < 1:
        return (f"spec.kube.envoyContainer.bootstrap.overload.maxHeapSize: {overload.max_heap_size!r} is not a "
                "size such as 512Mi")
    if kube.agentgateway is not None and kube.agentgateway.enabled:
        return ("spec.kube.agentgateway.enabled: lychgate runs Envoy proxies, not agentgateway; "
                "remove agentgateway or set enabled: false")
    ai = kube.ai_extension
    if ai is not None and ai.stats is not None and ai.stats.custom_labels:
        return ("spec.kube.aiExtension.stats.customLabels: the AI extension's metrics have fixed labels "
                "(gateway, route, backend, provider, model); remove customLabels")
    if ai is not None and ai.tracing is not None:
        return "spec.kube.aiExtension.tracing: the AI extension sends no OpenTelemetry traces; remove tracing"
    sds = kube.sds_container
    if kube.istio is None:
        return None if sds is None else ("spec.kube.sdsContainer: the SDS sidecar serves Istio's workload "
                                         "certificates and is rendered with spec.kube.istio; set istio too")
    if sds is None or sds.image is None or not sds.image.repository:
        return ("spec.kube.sdsContainer.image: lychgate ships no SDS image; name one (registry, repository, tag), "
                "such as kgateway's sds image")
    return None
