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
from typing import Annotated, Any

import jsonschema
from pydantic import AfterValidator

# The newest Kubernetes release whose schemas kubernetes-validate ships (strict variant).
SCHEMA_VERSION = "v1.37.0-local-strict"


@functools.cache
def _definitions() -> dict[str, Any]:
    path = resources.files("kubernetes_validate") / "kubernetes-json-schema" / SCHEMA_VERSION / "_definitions.json"
    defs: dict[str, Any] = json.loads(path.read_text())["$defs"]
    return defs


@functools.cache
def _validator(definition: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": _definitions()})


def _where(error: jsonschema.ValidationError) -> str:
    parts = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return parts.lstrip(".")


def check(definition: str, value: Any) -> Any:
    """`value` if it is a valid `definition` (io.k8s.api.core.v1.SecurityContext, ...), else ValueError."""
    errors = sorted(_validator(definition).iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        kind = definition.rsplit(".", 1)[-1]
        first = errors[0]
        # oneOf/anyOf failures say little at the top: the deepest cause names the field.
        while first.context:
            first = max(first.context, key=lambda e: len(e.absolute_path))
        where = _where(first)
        raise ValueError(f"not a valid Kubernetes {kind}: " + (f"{where}: " if where else "") + first.message)
    return value


def _is(definition: str) -> AfterValidator:
    return AfterValidator(functools.partial(check, definition))


_CORE = "io.k8s.api.core.v1."
Object = dict[str, Any]
# Each is kept as written once valid; the API server has the last word when the Deployment is written.
SecurityContext = Annotated[Object, _is(_CORE + "SecurityContext")]
PodSecurityContext = Annotated[Object, _is(_CORE + "PodSecurityContext")]
Affinity = Annotated[Object, _is(_CORE + "Affinity")]
Toleration = Annotated[Object, _is(_CORE + "Toleration")]
TopologySpreadConstraint = Annotated[Object, _is(_CORE + "TopologySpreadConstraint")]
EnvVar = Annotated[Object, _is(_CORE + "EnvVar")]
VolumeMount = Annotated[Object, _is(_CORE + "VolumeMount")]
Volume = Annotated[Object, _is(_CORE + "Volume")]
Probe = Annotated[Object, _is(_CORE + "Probe")]
Container = Annotated[Object, _is(_CORE + "Container")]
DeploymentStrategy = Annotated[Object, _is("io.k8s.api.apps.v1.DeploymentStrategy")]
