"""ai: TrafficPolicy's AI settings (prompt enrichment, prompt guards, defaults, route
type) for routes to AI Backends.

Envoy does none of it: the AI extension does (lychgate.ai.policy), per attempt. The
route carries only the settings' id, a digest of the merged value, in its metadata
(xds/translator/ai_gateway.py); the extension gets the settings themselves with its
config (translate/ai_config.py builds them from the same values), so a policy edit is
a new id and a new config at once.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lychgate.api.ai import AIPolicy
from lychgate.api.policy import TrafficPolicy
from lychgate.translate import ai_backends
from lychgate.translate.policies.common import CompileContext
from lychgate.translate.policies.fields import PolicyField, register

NAMESPACE = "fromNamespace"


def settings_id(value: dict[str, Any]) -> str:
    """The id routes carry for `ai` settings: the same for the same settings."""
    return hashlib.blake2b(json.dumps(value, sort_keys=True).encode(), digest_size=8).hexdigest()


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
        ai_backends.route_settings("", AIPolicy.model_validate(spec), store=ctx.store, namespace=value[NAMESPACE],
                                   path=path)
        return {"ai": settings_id(value)}


AI = register(AIField())
