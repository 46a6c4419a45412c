"""rateLimit.local → Envoy's local_ratelimit filter with a token bucket per route.

A bucket shared across the Gateway sets local_cluster_rate_limit: Envoy then
divides it by the number of hosts of its local cluster, the Gateway's proxies
(xds/replicas.py), and uses all of it while that cluster is empty."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2 as lrl_pb
from envoy.type.v3 import percent_pb2, token_bucket_pb2

from lychgate import ir
from lychgate.xds.translator.features import register
from lychgate.xds.translator.host_flags import any_host
from lychgate.xds.translator.policy_filters import PolicyFilter, ms

FILTER = "envoy.filters.http.local_ratelimit"
STAT_PREFIX = "http_local_rate_limiter"


def _percent(value: int, key: str) -> base_pb2.RuntimeFractionalPercent:
    return base_pb2.RuntimeFractionalPercent(
        default_value=percent_pb2.FractionalPercent(numerator=value, denominator=percent_pb2.FractionalPercent.HUNDRED),
        runtime_key=key,
    )


def route_limit(bucket: ir.TokenBucket) -> lrl_pb.LocalRateLimit:
    limit = lrl_pb.LocalRateLimit(
        stat_prefix=STAT_PREFIX,
        token_bucket=token_bucket_pb2.TokenBucket(
            max_tokens=bucket.max_tokens, tokens_per_fill={"value": bucket.tokens_per_fill},
            fill_interval=ms(bucket.fill_interval_ms),
        ),
        filter_enabled=_percent(bucket.percent_enabled, "lychgate_local_rate_limit"),
        filter_enforced=_percent(bucket.percent_enforced, "lychgate_local_rate_limit"),
        enable_x_ratelimit_headers=ratelimit_pb2.DRAFT_VERSION_03,
    )
    if bucket.share_across_gateway:
        limit.local_cluster_rate_limit.SetInParent()
    return limit


def _shares_bucket(vh: ir.VirtualHost) -> bool:
    return any(p.rate_limit is not None and p.rate_limit.share_across_gateway for p in vh.policies)


def counts_replicas(gateway: ir.GatewayIR) -> bool:
    """Does any route of the Gateway share its bucket across the Gateway's proxies (so
    that its proxies must know how many they are: xds/cache.py, SnapshotCache.set)?"""
    return any(any_host(listener, _shares_bucket) for listener in gateway.listeners)


class LocalRateLimit(PolicyFilter):
    name, filter, field = "local_ratelimit", FILTER, "rate_limit"
    order = 20

    def listener_config(self) -> object:
        return lrl_pb.LocalRateLimit(stat_prefix=STAT_PREFIX)

    def route_config(self, value: ir.TokenBucket) -> object:
        return route_limit(value)


register(LocalRateLimit())
