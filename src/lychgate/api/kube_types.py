"""Kubernetes core objects inside lychgate's kinds, validated as the API server would.

GatewayParameters carry pieces of a Pod (a container's securityContext, the
Pod's affinity, tolerations, env, volumes, probes, ...) exactly as kgateway
takes them: Kubernetes' own types. Modelling each of them by hand would miss or
refuse fields a newer API server allows; they are checked instead against the
OpenAPI schema of the real type that the `kubernetes-validate` package ships
(strict: an unknown field is an error, as `kubectl apply --validate=strict`
says), and kept as written. An error names the field inside the object.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, WithJsonSchema

if TYPE_CHECKING:
    import jsonschema

# The newest Kubernetes release whose schemas kubernetes-validate ships (strict variant).
SCHEMA_VERSION = "v1.37.0-local-strict"


@functools.cache
def _definitions() -> dict[str, Any]:
    path = resources.files("kubernetes_validate") / "kubernetes-json-schema" / SCHEMA_VERSION / "_definitions.json"
    defs: dict[str, Any] = json.loads(path.read_text())["$defs"]
    return {**defs, **_VPA}


def _ref(definition: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{definition}"}


def _closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object of these fields and no other (as the strict schemas are)."""
    return {"type": "object", "properties": properties, "additionalProperties": False,
            **({"required": list(required)} if required else {})}


def _strings(*allowed: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(allowed)} if allowed else {"type": "string"}


# The VerticalPodAutoscaler (autoscaling.k8s.io/v1) is a CRD of the Kubernetes autoscaler project,
# not in Kubernetes' own schemas: its spec as that CRD (VPA 1.x) defines it, in the same form, so a
# GatewayParameters' verticalPodAutoscaler is checked like its HorizontalPodAutoscaler.
_VPA_PREFIX = "io.k8s.autoscaler.vpa.v1."
_RESOURCES = {"type": "object", "additionalProperties": _ref("io.k8s.apimachinery.pkg.api.resource.Quantity")}
_VPA: dict[str, Any] = {
    _VPA_PREFIX + "VerticalPodAutoscaler": _closed({
        "apiVersion": _strings(), "kind": _strings(),
        "metadata": _ref("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
        "spec": _ref(_VPA_PREFIX + "VerticalPodAutoscalerSpec"),
    }, ("spec",)),
    _VPA_PREFIX + "VerticalPodAutoscalerSpec": _closed({
        "targetRef": _ref("io.k8s.api.autoscaling.v1.CrossVersionObjectReference"),
        "updatePolicy": _closed({
            "updateMode": _strings("Off", "Initial", "Recreate", "InPlaceOrRecreate", "Auto"),
            "minReplicas": {"type": "integer", "format": "int32"},
            "evictionRequirements": {"type": "array", "items": _closed({
                "resources": {"type": "array", "items": _strings()},
                "changeRequirement": _strings("TargetHigherThanRequests", "TargetLowerThanRequests"),
            }, ("resources", "changeRequirement"))},
        }),
        "resourcePolicy": _closed({
            "containerPolicies": {"type": "array", "items": _closed({
                "containerName": _strings(),
                "mode": _strings("Auto", "Off"),
                "minAllowed": _RESOURCES,
                "maxAllowed": _RESOURCES,
                "controlledResources": {"type": "array", "items": _strings("cpu", "memory")},
                "controlledValues": _strings("RequestsAndLimits", "RequestsOnly"),
            })},
        }),
        "recommenders": {"type": "array", "items": _closed({"name": _strings()}, ("name",))},
    }, ("targetRef",)),
}


def _draft(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    import jsonschema  # (2.3 MiB, its meta-schemas: only once a Kubernetes piece is checked)

    return jsonschema.Draft202012Validator({**schema, "$defs": _definitions()})


@functools.cache
def _validator(definition: str) -> jsonschema.Draft202012Validator:
    return _draft({"$ref": f"#/$defs/{definition}"})


def _where(error: jsonschema.ValidationError) -> str:
    parts = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return parts.lstrip(".")


def check(definition: str, value: Any) -> Any:
    """`value` if it is a valid `definition` (io.k8s.api.core.v1.SecurityContext, ...), else ValueError."""
    return _raise_first(definition, _validator(definition), value)


def _raise_first(definition: str, validator: jsonschema.Draft202012Validator, value: Any) -> Any:
    errors = sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        kind = definition.rsplit(".", 1)[-1]
        first = errors[0]
        # oneOf/anyOf failures say little at the top: the deepest cause names the field.
        while first.context:
            first = max(first.context, key=lambda e: len(e.absolute_path))
        where = _where(first)
        raise ValueError(f"not a valid Kubernetes {kind}: " + (f"{where}: " if where else "") + first.message)
    return value


# The JSON schema of such a field names the Kubernetes type: tools/gen_crds.py writes the
# type's own schema (structural()) into the CRD, so the API server checks it too.
DEFINITION_KEY = "x-lychgate-kubernetes-definition"


def _is(definition: str) -> tuple[AfterValidator, WithJsonSchema]:
    return (AfterValidator(functools.partial(check, definition)),
            WithJsonSchema({"type": "object", DEFINITION_KEY: definition}))


# A spec lychgate completes (a PDB's selector, an HPA's scaleTargetRef), written in layers (a
# class's GatewayParameters, then a Gateway's, merged: translate/parameters.py): each layer
# may leave out a top-level field the type requires, such as an HPA's maxReplicas, which the
# object lychgate makes must have (deploy/overlays.py checks that one whole). Every field
# given, to any depth, is checked as the type says.
PARTIAL_KEY = "x-lychgate-partial"


@functools.cache
def _partial_validator(definition: str) -> jsonschema.Draft202012Validator:
    return _draft({k: v for k, v in _definitions()[definition].items() if k != "required"})


def check_partial(definition: str, value: Any) -> Any:
    """`value` if it is a valid `definition` but for top-level required fields, else ValueError."""
    return _raise_first(definition, _partial_validator(definition), value)


def _is_partial(definition: str) -> tuple[AfterValidator, WithJsonSchema]:
    return (AfterValidator(functools.partial(check_partial, definition)),
            WithJsonSchema({"type": "object", DEFINITION_KEY: definition, PARTIAL_KEY: True}))


# What of Kubernetes' schemas a CRD keeps: no descriptions (the CRD would grow by
# megabytes) and no list-map markers (a CRD needs their keys required or defaulted).
_KEEP = ("enum", "format", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "pattern")
# Fields of embedded types a CRD leaves out. An ObjectMeta inside a spec (a volumeClaimTemplate's)
# is a template: managedFields is the API server's record of who wrote which field, written by it
# alone on real objects, never by a user in a template; its fieldsV1 is free-form even in
# Kubernetes' own schema. Left out, it is pruned instead of kept unchecked.
_LEFT_OUT = {"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": frozenset({"managedFields"})}


def structural(definition: str, partial: bool = False) -> dict[str, Any]:
    """The Kubernetes `definition` as a structural OpenAPI schema, as a CRD embeds it;
    `partial`: without its top-level required fields (_is_partial)."""
    out = _structural(_definitions()[definition], (definition,))
    if partial:
        out.pop("required", None)
    return out


def _structural(node: dict[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in stack:  # recursive (none in Pod types): keep the rest as written
            return {"x-kubernetes-preserve-unknown-fields": True}
        return _structural(_definitions()[name], (*stack, name))
    if "oneOf" in node:  # Quantity, IntOrString: a number or a string
        return {"x-kubernetes-int-or-string": True}
    types = node.get("type")
    type_ = next((t for t in types if t != "null"), None) if isinstance(types, list) else types
    if type_ is None:
        return {"x-kubernetes-preserve-unknown-fields": True}
    out: dict[str, Any] = {"type": type_, **{k: node[k] for k in _KEEP if k in node}}
    if "enum" in out:
        out["enum"] = [v for v in out["enum"] if v is not None]
    if type_ == "object":
        props = node.get("properties") or {}
        if props:
            left_out = _LEFT_OUT.get(stack[-1], frozenset())
            out["properties"] = {k: _structural(v, stack) for k, v in props.items() if k not in left_out}
            if node.get("required"):
                out["required"] = list(node["required"])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            out["additionalProperties"] = _structural(extra, stack)
        elif not props:
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif type_ == "array":
        out["items"] = _structural(node.get("items") or {}, stack)
    return out


_CORE = "io.k8s.api.core.v1."
Object = dict[str, Any]
# Each is kept as written once valid; the API server has the last word when the Deployment is written.
SecurityContext = Annotated[Object, *_is(_CORE + "SecurityContext")]
PodSecurityContext = Annotated[Object, *_is(_CORE + "PodSecurityContext")]
Affinity = Annotated[Object, *_is(_CORE + "Affinity")]
Toleration = Annotated[Object, *_is(_CORE + "Toleration")]
TopologySpreadConstraint = Annotated[Object, *_is(_CORE + "TopologySpreadConstraint")]
EnvVar = Annotated[Object, *_is(_CORE + "EnvVar")]
VolumeMount = Annotated[Object, *_is(_CORE + "VolumeMount")]
Volume = Annotated[Object, *_is(_CORE + "Volume")]
Probe = Annotated[Object, *_is(_CORE + "Probe")]
Container = Annotated[Object, *_is(_CORE + "Container")]
ContainerPort = Annotated[Object, *_is(_CORE + "ContainerPort")]
DeploymentStrategy = Annotated[Object, *_is("io.k8s.api.apps.v1.DeploymentStrategy")]
# The specs of the objects GatewayParameters ask lychgate to create for the proxy (deploy/overlays.py).
PodDisruptionBudgetSpec = Annotated[Object, *_is_partial("io.k8s.api.policy.v1.PodDisruptionBudgetSpec")]
HorizontalPodAutoscalerSpec = Annotated[Object, *_is_partial("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec")]
VERTICAL_POD_AUTOSCALER = _VPA_PREFIX + "VerticalPodAutoscaler"
VerticalPodAutoscalerSpec = Annotated[Object, *_is_partial(_VPA_PREFIX + "VerticalPodAutoscalerSpec")]
