"""GatewayParameters overlays and the optional objects they create.

An overlay (`deploymentOverlay`, `serviceOverlay`, `serviceAccountOverlay`) is
laid over the generated object last: its labels and annotations are added and
its `spec` is merged like a strategic merge patch — maps key by key, lists of
named items (containers, volumes, env, ports) item by item by name, other lists
replaced, and `null` removes a key. `podDisruptionBudget`,
`horizontalPodAutoscaler` and `verticalPodAutoscaler` create that object for the
proxy, with its selector or target filled in and the overlay's spec over it.

An overlay's spec is free-form (in the CRD too, as kgateway's: a patch may be any
part of the object), so the object it makes is checked whole against Kubernetes'
own type (api/kube_types.py) before it is written: the API server would drop an
unknown field without a word (server-side apply only warns) and refuse a mistyped
one far from the field that caused it. The VerticalPodAutoscaler, a CRD that
Kubernetes' schemas do not hold, is checked against its CRD's schema as
api/kube_types.py writes it down.
"""

from __future__ import annotations

import copy
from typing import Any

from lychgate.api import kube_types
from lychgate.api.lychgate import KubernetesProxyConfig, ResourceOverlay

# Optional objects: kind -> (apiVersion, plural).
OPTIONAL_KINDS = {
    "PodDisruptionBudget": ("policy/v1", "poddisruptionbudgets"),
    "HorizontalPodAutoscaler": ("autoscaling/v2", "horizontalpodautoscalers"),
    "VerticalPodAutoscaler": ("autoscaling.k8s.io/v1", "verticalpodautoscalers"),
}
_MERGE_KEYS = ("name", "containerPort", "port", "mountPath")
# kind -> (the field of spec.kube that shapes it, Kubernetes' type of the object).
CHECKED = {
    "Deployment": ("deploymentOverlay", "io.k8s.api.apps.v1.Deployment"),
    "Service": ("serviceOverlay", "io.k8s.api.core.v1.Service"),
    "ServiceAccount": ("serviceAccountOverlay", "io.k8s.api.core.v1.ServiceAccount"),
    "PodDisruptionBudget": ("podDisruptionBudget", "io.k8s.api.policy.v1.PodDisruptionBudget"),
    "HorizontalPodAutoscaler": ("horizontalPodAutoscaler", "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler"),
    "VerticalPodAutoscaler": ("verticalPodAutoscaler", kube_types.VERTICAL_POD_AUTOSCALER),
}


def _merge_key(items: list[Any]) -> str | None:
    for key in _MERGE_KEYS:
        if items and all(isinstance(i, dict) and key in i for i in items):
            return key
    return None


def strategic_merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = strategic_merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    if isinstance(base, list) and isinstance(patch, list):
        key = _merge_key(base + patch)
        if key is not None:
            merged = {item[key]: item for item in base}
            for item in patch:
                merged[item[key]] = strategic_merge(merged[item[key]], item) if item[key] in merged else item
            return list(merged.values())
    return copy.deepcopy(patch)


def apply(obj: dict[str, Any], overlay: ResourceOverlay | None) -> dict[str, Any]:
    if overlay is None:
        return obj
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    if overlay.metadata is not None:
        meta["labels"] = {**meta.get("labels", {}), **overlay.metadata.labels}
        meta["annotations"] = {**meta.get("annotations", {}), **overlay.metadata.annotations}
    if overlay.spec:
        out["spec"] = strategic_merge(out.get("spec", {}), overlay.spec)
    return out


def optional_objects(kube: KubernetesProxyConfig, metadata: dict[str, Any],
                     selector: dict[str, str]) -> list[dict[str, Any]]:
    """The PDB, HPA and VPA the parameters ask for, aimed at the proxy's Pods or Deployment."""
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": metadata["name"]}
    wanted = (("PodDisruptionBudget", kube.pod_disruption_budget, {"selector": {"matchLabels": selector}}),
              ("HorizontalPodAutoscaler", kube.horizontal_pod_autoscaler, {"scaleTargetRef": target}),
              ("VerticalPodAutoscaler", kube.vertical_pod_autoscaler, {"targetRef": target}))
    out = []
    for kind, overlay, spec in wanted:
        if overlay is not None:
            base = {"apiVersion": OPTIONAL_KINDS[kind][0], "kind": kind, "metadata": copy.deepcopy(metadata),
                    "spec": spec}
            out.append(apply(base, overlay))
    return out


def problem(kube: KubernetesProxyConfig, objs: list[dict[str, Any]]) -> str | None:
    """The first object an overlay shaped that is not a valid Kubernetes object, naming the
    overlay and the field; None: all are (objects no overlay touched are lychgate's own)."""
    for obj in objs:
        kind = obj["kind"]
        if kind not in CHECKED or getattr(kube, ATTRIBUTES[CHECKED[kind][0]]) is None:
            continue
        field, definition = CHECKED[kind]
        try:
            kube_types.check(definition, obj)
        except ValueError as err:
            return f"spec.kube.{field}: the {kind} it makes is {err}"
    return None


# spec.kube's field names (CHECKED's) -> the model's attributes.
ATTRIBUTES = {info.serialization_alias or name: name for name, info in KubernetesProxyConfig.model_fields.items()}
