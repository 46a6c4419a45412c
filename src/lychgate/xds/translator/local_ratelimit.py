"""rateLimit.local → Envoy's local_ratelimit filter with a token bucket per route."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2 as lrl_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.type.v3 import percent_pb2, token_bucket_pb2

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route, ms

FILTER = "envoy.filters.http.local_ratelimit"
STAT_PREFIX = "http_local_rate_limiter"


def _percent(value: int, key: str) -> base_pb2.RuntimeFractionalPercent:
    return base_pb2.RuntimeFractionalPercent(
        default_value=percent_pb2.FractionalPercent(numerator=value, denominator=percent_pb2.FractionalPercent.HUNDRED),
        runtime_key=key,
    )


def route_limit(bucket: ir.TokenBucket) -> lrl_pb.LocalRateLimit:
    return lrl_pb.LocalRateLimit(
        stat_prefix=STAT_PREFIX,
        token_bucket=token_bucket_pb2.TokenBucket(
            max_tokens=bucket.max_tokens, tokens_per_fill={"value": bucket.tokens_per_fill},
            fill_interval=ms(bucket.fill_interval_ms),
        ),
        filter_enabled=_percent(bucket.percent_enabled, "lychgate_local_rate_limit"),
        filter_enforced=_percent(bucket.percent_enforced, "lychgate_local_rate_limit"),
        enable_x_ratelimit_headers=ratelimit_pb2.DRAFT_VERSION_03,
    )


class LocalRateLimit(Feature):
    name = "local_ratelimit"
    order = 20

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if not listener.policy_filters:
            return
        add_disabled_filter(hcm, FILTER, lrl_pb.LocalRateLimit(stat_prefix=STAT_PREFIX))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if route.policy is not None and route.policy.rate_limit is not None:
            enable_on_route(out, FILTER, route_limit(route.policy.rate_limit))


register(LocalRateLimit())
