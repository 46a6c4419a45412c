"""autoHostRewrite: the Host header becomes the name of the backend host the
request goes to (a Backend's static host name, a forward proxy's target)."""

from __future__ import annotations

from typing import Any

from lychgate.api.policy import TrafficPolicy
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext


class AutoHostRewriteField(PolicyField):
    name, attr = "autoHostRewrite", "auto_host_rewrite"
    target_kinds = frozenset({"HTTPRoute"})

    def value(self, policy: TrafficPolicy) -> dict[str, Any] | None:
        enabled = policy.spec.auto_host_rewrite
        return None if enabled is None else {"enabled": enabled}  # a bool, not an object

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        return {"auto_host_rewrite": bool(value["enabled"])}


register(AutoHostRewriteField())
