"""extAuth: call an ExtAuth GatewayExtension (Envoy ext_authz) before forwarding."""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.api.policy import TrafficPolicy
from lychgate.translate.policies.extensions import ext_auth_service
from lychgate.translate.policies.fields import PolicyField, deep_merge, register
from lychgate.translate.values import CompileContext, Invalid


def normalize_ref(policy: TrafficPolicy, value: dict[str, Any]) -> dict[str, Any]:
    ref = value.get("extensionRef")
    if ref is not None:
        value["extensionRef"] = {"name": ref["name"], "namespace": ref.get("namespace") or policy.namespace}
    return value


def merge_switchable(high: dict[str, Any], low: dict[str, Any]) -> dict[str, Any]:
    """Deep merge where `disable` on the winning side switches the feature off."""
    if "disable" in high:
        return high
    merged: dict[str, Any] = deep_merge(high, low)
    if "extensionRef" in merged:
        merged.pop("disable", None)
    return merged


def check_switch(value: dict[str, Any], path: str) -> bool:
    """True when the value turns the feature off; Invalid unless exactly one is set."""
    if ("extensionRef" in value) == ("disable" in value):
        raise Invalid(path, "exactly one of extensionRef or disable must be set")
    return "disable" in value


class ExtensionField(PolicyField):
    """A field that names a GatewayExtension (`extensionRef`) or turns the feature off (`disable`)."""

    def normalize(self, policy: TrafficPolicy, value: dict[str, Any]) -> dict[str, Any]:
        return normalize_ref(policy, value)

    def merge(self, high: dict[str, Any], low: dict[str, Any]) -> dict[str, Any]:
        return merge_switchable(high, low)


class ExtAuthField(ExtensionField):
    name, attr, deep_mergeable, security = "extAuth", "ext_auth", True, True
    combines_across_delegation = True

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if check_switch(value, path):
            return {"ext_auth": None}
        ref = value["extensionRef"]
        service, cluster = ext_auth_service(ctx.store, ref["namespace"], ref["name"])
        ctx.clusters[cluster.name] = cluster
        body = value.get("withRequestBody")
        return {"ext_auth": ir.ExtAuthRoute(
            service=service,
            context_extensions=tuple(sorted((value.get("contextExtensions") or {}).items())),
            with_request_body=ir.BodyBuffer(body["maxRequestBytes"], body.get("allowPartialMessage", False),
                                            body.get("packAsBytes", False)) if body else None,
        )}


register(ExtAuthField())
