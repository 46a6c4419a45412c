"""rateLimit.local: a token bucket per route, enforced by Envoy's local_ratelimit filter."""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.translate.policies.common import CompileContext, Invalid, duration_ms
from lychgate.translate.policies.fields import PolicyField, register


class RateLimitField(PolicyField):
    name, attr = "rateLimit", "rate_limit"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if "global" in value:
            raise Invalid(f"{path}.global", "global rate limiting is not supported by lychgate yet; use local")
        bucket = (value.get("local") or {}).get("tokenBucket")
        if bucket is None:
            # `local: {}` (no bucket) switches an inherited limit off.
            return {"rate_limit": None}
        return {"rate_limit": ir.TokenBucket(
            max_tokens=bucket["maxTokens"], tokens_per_fill=bucket.get("tokensPerFill", 1),
            fill_interval_ms=duration_ms(bucket["fillInterval"], f"{path}.local.tokenBucket.fillInterval", 50),
        )}


register(RateLimitField())
