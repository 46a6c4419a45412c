"""ai: TrafficPolicy's AI settings (prompt enrichment, prompt guards, defaults, route
type) for routes to AI Backends.

Envoy does none of it: the AI extension does (lychgate.ai.policy), per attempt. The
route carries only the settings' id, a digest of the merged value, in its metadata
(xds/translator/ai_gateway.py); the extension gets the settings themselves with its
config (translate/ai_config.py builds them from the same values, with `route_settings()`),
so a policy edit is a new id and a new config at once.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lychgate.ai.config import LimitService, RouteSettings, TokenRateLimit
from lychgate.api.ai import AIPolicy
from lychgate.api.policy import TrafficPolicy
from lychgate.api.rate_limit import GlobalRateLimitPolicy
from lychgate.store import Store
from lychgate.translate import ai_backends
from lychgate.translate.policies.extensions import rate_limit_service
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, descriptor_entry

NAMESPACE = "fromNamespace"


def settings_id(value: dict[str, Any]) -> str:
    """The id routes carry for `ai` settings: the same for the same settings."""
    return hashlib.blake2b(json.dumps(value, sort_keys=True).encode(), digest_size=8).hexdigest()


def route_settings(policy_id: str, policy: AIPolicy, *, store: Store, namespace: str,
                   path: str = "spec.ai") -> RouteSettings:
    """A TrafficPolicy's `ai` as the extension reads it. The moderation guard's token is
    resolved like a provider's (from a Secret of the policy's `namespace`) and handed over
    as `authToken: {kind: Inline, inline: <token>}` (or `{kind: Passthrough}`);
    `tokenRateLimit`'s GatewayExtension (in that namespace unless its ref says another)
    as the addresses the extension calls."""
    guard = None
    if policy.prompt_guard is not None:
        guard = policy.prompt_guard.model_dump(by_alias=True, exclude_none=True)
        request = policy.prompt_guard.request
        moderation = request.moderation.open_ai_moderation if request and request.moderation else None
        if moderation is not None:
            where = f"{path}.promptGuard.request.moderation.openAIModeration.authToken"
            token = ai_backends.auth_token(store, namespace, moderation.auth_token, where)
            guard["request"]["moderation"]["openAIModeration"]["authToken"] = (
                {"kind": "Passthrough"} if token is None else {"kind": "Inline", "inline": token})
    enrichment = policy.prompt_enrichment
    limit = policy.token_rate_limit
    return RouteSettings(
        id=policy_id, route_type=policy.route_type,
        prompt_enrichment=enrichment.model_dump(by_alias=True, exclude_none=True) if enrichment else None,
        prompt_guard=guard,
        defaults=tuple(d.model_dump(by_alias=True, exclude_none=True) for d in policy.defaults),
        token_rate_limit=_token_rate_limit(store, namespace, limit, f"{path}.tokenRateLimit") if limit else None)


def _token_rate_limit(store: Store, namespace: str, limit: GlobalRateLimitPolicy, path: str) -> TokenRateLimit:
    """`tokenRateLimit` as the extension calls it: the descriptors as rateLimit.global
    builds them, and its RateLimit GatewayExtension's service by the addresses of its
    ready endpoints (the extension calls it directly, not through Envoy). Raises Invalid
    or Unresolved as rateLimit.global does."""
    descriptors = tuple(
        tuple(descriptor_entry(e.model_dump(by_alias=True, exclude_none=True), f"{path}.descriptors[{i}].entries[{j}]")
              for j, e in enumerate(d.entries))
        for i, d in enumerate(limit.descriptors))
    ref = limit.extension_ref
    service, cluster = rate_limit_service(store, ref.namespace or namespace, ref.name)
    addresses = tuple(f"[{e.address}]:{e.port}" if ":" in e.address else f"{e.address}:{e.port}"
                      for e in cluster.endpoints if e.ready)
    return TokenRateLimit(LimitService(
        name=service.name, addresses=addresses, domain=service.domain, fail_open=service.fail_open,
        timeout_ms=service.timeout_ms, authority=service.authority,
        x_ratelimit_headers=service.x_ratelimit_headers), descriptors)


class AIField(PolicyField):
    name, attr = "ai", "ai"
    # A guard whose moderation key cannot be read must not leave prompts unguarded.
    security = True

    def normalize(self, policy: TrafficPolicy, value: dict[str, Any]) -> dict[str, Any]:
        value[NAMESPACE] = policy.namespace  # where the moderation guard's Secret is
        return value

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        # The model validated every field on load; what is left is the moderation
        # guard's Secret. On a route to other backends the settings have nothing to act
        # on (Envoy never calls the extension there).
        spec = {k: v for k, v in value.items() if k != NAMESPACE}
        route_settings("", AIPolicy.model_validate(spec), store=ctx.store, namespace=value[NAMESPACE], path=path)
        return {"ai": settings_id(value)}


AI = register(AIField())
