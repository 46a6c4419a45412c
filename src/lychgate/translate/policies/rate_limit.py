"""rateLimit: `local`, a token bucket per route (Envoy's local_ratelimit filter; with
shareAcrossGateway each proxy of the Gateway holds an even share of it), `global`, descriptors a
RateLimit GatewayExtension's service counts (Envoy's ratelimit filter speaking
envoy.service.ratelimit.v3), and `quota`, buckets a RateLimitQuota server assigns
quota to (rate_limit_quota.py)."""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.api.policy import TrafficPolicy
from lychgate.translate.policies.ext_auth import normalize_ref
from lychgate.translate.policies.extensions import rate_limit_service
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.policies.rate_limit_quota import compile_quota
from lychgate.translate.values import (
    CompileContext,
    Invalid,
    descriptor_entry,
    duration_ms,
)


class RateLimitField(PolicyField):
    name, attr = "rateLimit", "rate_limit"

    def normalize(self, policy: TrafficPolicy, value: dict[str, Any]) -> dict[str, Any]:
        for part in ("global", "quota"):
            if isinstance(value.get(part), dict):
                value[part] = normalize_ref(policy, value[part])
        return value

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        out: dict[str, Any] = {"rate_limit": None, "global_rate_limit": None, "rate_limit_quota": None}
        # `local: {}` (no bucket) switches an inherited limit off.
        local = value.get("local") or {}
        bucket = local.get("tokenBucket")
        share = bool(local.get("shareAcrossGateway"))
        if share and bucket is None:
            # The share is of a bucket: with none there is nothing to divide (kgateway refuses it too).
            raise Invalid(f"{path}.local.shareAcrossGateway", "true needs tokenBucket")
        if bucket is not None:
            out["rate_limit"] = ir.TokenBucket(
                max_tokens=bucket["maxTokens"], tokens_per_fill=bucket.get("tokensPerFill", 1),
                fill_interval_ms=duration_ms(bucket["fillInterval"], f"{path}.local.tokenBucket.fillInterval", 50),
                percent_enabled=local.get("percentEnabled", 100), percent_enforced=local.get("percentEnforced", 100),
                share_across_gateway=share,
            )
        limit = value.get("global")
        if limit is not None:
            descriptors = tuple(
                tuple(descriptor_entry(e, f"{path}.global.descriptors[{i}].entries[{j}]")
                      for j, e in enumerate(d["entries"]))
                for i, d in enumerate(limit["descriptors"]))
            if not descriptors:
                raise Invalid(f"{path}.global.descriptors", "at least one descriptor is needed")
            ref = limit["extensionRef"]  # after the descriptors: an invalid policy says so first
            service, cluster = rate_limit_service(ctx.store, ref["namespace"], ref["name"])
            ctx.clusters[cluster.name] = cluster
            out["global_rate_limit"] = ir.GlobalRateLimit(service, descriptors)
        quota = value.get("quota")
        if quota is not None:
            out["rate_limit_quota"] = compile_quota(ctx, quota, f"{path}.quota")
        return out


register(RateLimitField())
