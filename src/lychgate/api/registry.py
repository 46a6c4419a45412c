"""Which kinds lychgate knows, and turning raw manifests into typed objects.

Errors name the object and the field path (`spec.rules[0].backendRefs[0].port`)
because that is what a person needs to fix a manifest.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from lychgate.api import (
    backend,
    backend_config,
    core,
    direct_response,
    gateway,
    inference,
    listener_policy,
    lychgate,
    policy,
)
from lychgate.api.base import Resource

KINDS: tuple[type[Resource], ...] = (
    core.Namespace,
    core.Service,
    core.EndpointSlice,
    core.Secret,
    core.ConfigMap,
    core.Pod,
    gateway.GatewayClass,
    gateway.Gateway,
    gateway.ListenerSet,
    gateway.HTTPRoute,
    gateway.GRPCRoute,
    gateway.TLSRoute,
    gateway.TCPRoute,
    gateway.UDPRoute,
    gateway.ReferenceGrant,
    gateway.BackendTLSPolicy,
    lychgate.GatewayParameters,
    policy.TrafficPolicy,
    policy.GatewayExtension,
    listener_policy.ListenerPolicy,
    listener_policy.HTTPListenerPolicy,
    backend_config.BackendConfigPolicy,
    backend.Backend,
    direct_response.DirectResponse,
    inference.InferencePool,
)

_BY_GROUP_KIND: dict[tuple[str, str], type[Resource]] = {(k.GROUP, k.KIND): k for k in KINDS}
BY_KIND: dict[str, type[Resource]] = {k.KIND: k for k in KINDS}


class ManifestError(ValueError):
    """A manifest that cannot become an object; the message is for a person, `fields`
    (field path, message) for a tool that points at each field (`lychgate check`)."""

    def __init__(self, message: str, fields: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.fields = fields


def describe(raw: Any) -> str:
    """'HTTPRoute default/foo' from whatever parts of a manifest are readable."""
    if not isinstance(raw, dict):
        return "document"
    kind = raw.get("kind") or "object"
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    name = meta.get("name") or "<no name>"
    known = BY_KIND.get(kind) if isinstance(kind, str) else None
    # A namespaced kind without a namespace is read into `default`: named so everywhere.
    ns = meta.get("namespace") or ("default" if known is not None and known.NAMESPACED else None)
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(object)"


def parse(raw: Any, default_namespace: str = "default") -> Resource:
    """Validate one manifest. Raises ManifestError naming the object and field."""
    if not isinstance(raw, dict):
        raise ManifestError(f"expected a mapping with apiVersion and kind, got {type(raw).__name__}")
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise ManifestError(f"{describe(raw)}: apiVersion and kind are required")
    group, _, version = api_version.rpartition("/")
    cls = _BY_GROUP_KIND.get((group, kind))
    if cls is None:
        raise ManifestError(
            f"{describe(raw)}: unknown kind {kind!r} in apiVersion {api_version!r}; "
            f"known kinds: {', '.join(sorted(BY_KIND))}"
        )
    if version not in cls.VERSIONS:
        raise ManifestError(
            f"{describe(raw)}: apiVersion {api_version!r} is not served; use "
            + " or ".join(f"{group + '/' if group else ''}{v}" for v in cls.VERSIONS)
        )
    raw = dict(raw)
    if not isinstance(raw.get("metadata"), dict):
        raise ManifestError(f"{describe(raw)}: metadata must be a mapping with a name")
    meta = dict(raw["metadata"])
    if cls.NAMESPACED:
        meta.setdefault("namespace", default_namespace)
    else:
        meta.pop("namespace", None)
    raw["metadata"] = meta
    try:
        return cls.model_validate(raw)
    except ValidationError as err:
        fields = tuple((field_path(e["loc"]), e["msg"]) for e in err.errors(include_url=False))
        problems = "; ".join(f"{path}: {msg}" for path, msg in fields)
        raise ManifestError(f"{describe(raw)}: {problems}", fields) from None
