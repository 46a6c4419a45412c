"""GatewayParameters of a class and of a Gateway, merged as kgateway merges them.

The installation's parameters of the class (Helm's gatewayClassParametersRefs)
lie lowest, then the GatewayClass's parametersRef; they are the defaults and the
Gateway's are laid over them, field by field: objects merge key by key, a list or a value the Gateway sets
replaces the class's, and what the Gateway leaves unset keeps the class's value
(a Gateway naming its own parameters no longer loses the class's defaults).
Overlays merge the same way, so the class's overlay applies first and the
Gateway's over it. `kube` and `selfManaged` exclude each other: a layer that
sets one drops the other from the layers below.

The overlays (and the PDB, HPA and VPA specs) are free-form patches of the
proxy's Kubernetes objects, so they are checked here, by the objects they make,
in both modes: locally too an overlay that would make an invalid Deployment
refuses the Gateway's parameters by the field, instead of being kept unread.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from lychgate.api.gateway import Gateway
from lychgate.api.lychgate import GatewayParameters
from lychgate.deploy import manifests, overlays
from lychgate.deploy.overload import quantity_bytes
from lychgate.store import Store

log = logging.getLogger(__name__)


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


def installed(store: Store, class_name: str, ref: Mapping[str, str] | None) -> GatewayParameters | None:
    """The installation's GatewayParameters of a class (Helm's gatewayClassParametersRefs), if any;
    when it does not exist the class's Gateways get lychgate's defaults, said once in the log."""
    if not ref:
        return None
    params = store.get(GatewayParameters, ref["namespace"], ref["name"])
    if params is None:
        _missing(class_name, ref["namespace"], ref["name"])
    return params


@functools.cache
def _missing(class_name: str, namespace: str, name: str) -> None:
    log.warning("gatewayClassParametersRefs.%s: GatewayParameters %s/%s not found; its Gateways get "
                "lychgate's defaults until it exists", class_name, namespace, name)


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


# spec.kube's fields that shape the proxy's Kubernetes objects by free-form patches.
_PATCHES = tuple(overlays.ATTRIBUTES[field] for field, _ in overlays.CHECKED.values())
# Only the objects' shape matters to the check, not where the proxy finds its control plane.
_STAND_IN = manifests.ProxyContext(xds_host="lychgate.lychgate-system.svc")
# A pass asks for every Gateway's parameters; merging layers (a dump and a validation, ~30 µs
# for two) and rendering and checking the objects (milliseconds) must not be spent again on
# layers it has seen. Keyed by the very objects they are made from (stored objects are
# immutable and replaced when they change: nothing is serialized per pass to key them), and
# holding them, so that their ids are not reused while the key lives.
_CHECKED: dict[tuple[object, ...], tuple[tuple[object, ...], GatewayParameters | None, str | None]] = {}
_CHECKED_MAX = 256


def checked(gateway: Gateway, layers: Sequence[GatewayParameters | None],
            ports: tuple[int, ...]) -> tuple[GatewayParameters | None, str | None]:
    """The parameters `layers` merge into (merge()), and what of them lychgate cannot honour,
    naming the field: problem(), then the first overlay that makes an invalid Kubernetes object
    of this Gateway's proxy. The same merged object while the layers stay the same."""
    key = (id(gateway), ports, *map(id, layers))
    hit = _CHECKED.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], (gateway, *layers), strict=True)):
        return hit[1], hit[2]
    params = merge(*layers)
    found = problem(params)
    if found is None and params is not None and params.spec.self_managed is None and any(
            getattr(params.spec.kube, attr) is not None for attr in _PATCHES):
        found = overlays.problem(params.spec.kube, manifests.proxy_objects(gateway, params, ports, _STAND_IN))
    if len(_CHECKED) >= _CHECKED_MAX:
        _CHECKED.clear()
    _CHECKED[key] = ((gateway, *layers), params, found)
    return params, found
