"""rateLimit.quota → one Envoy rate_limit_quota filter per RateLimitQuota
GatewayExtension in a listener whose routes use it.

Envoy's filter has no per-route settings (a RateLimitQuotaOverride on a route is
ignored), so a route's bucket is chosen in the listener's filter: its bucket
matchers pick, by the name of the route the request matched (a CEL
`xds.route_name == ...`), the bucket settings of that route's policy, as kgateway
does. A request of any other route matches no bucket and passes unlimited. So,
unlike the other policy filters, attaching or changing a quota changes the
listener, not only its routes.
"""

from __future__ import annotations

import json

from cel.expr import syntax_pb2
from envoy.config.core.v3 import extension_pb2 as core_extension_pb2
from envoy.extensions.filters.http.rate_limit_quota.v3 import rate_limit_quota_pb2 as rlq_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.type.matcher.v3 import http_inputs_pb2 as envoy_inputs_pb2
from envoy.type.v3 import http_status_pb2, ratelimit_strategy_pb2
from xds.core.v3 import extension_pb2
from xds.type.matcher.v3 import cel_pb2 as cel_matcher_pb2
from xds.type.matcher.v3 import http_inputs_pb2
from xds.type.matcher.v3 import matcher_pb2 as m
from xds.type.v3 import cel_pb2

from lychgate import cel, ir
from lychgate.xds.translator.ext_authz import grpc_service
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import ms, pack, policies

PREFIX = "envoy.filters.http.rate_limit_quota/"
Strategy = ratelimit_strategy_pb2.RateLimitStrategy
Settings = rlq_pb.RateLimitQuotaBucketSettings


def filter_name(service: ir.RateLimitQuotaService) -> str:
    return PREFIX + service.name


def _blanket(allow: bool) -> ratelimit_strategy_pb2.RateLimitStrategy:
    return Strategy(blanket_rule=Strategy.ALLOW_ALL if allow else Strategy.DENY_ALL)


def bucket_settings(quota: ir.RateLimitQuota) -> rlq_pb.RateLimitQuotaBucketSettings:
    out = Settings(reporting_interval=ms(quota.reporting_interval_ms))
    for key, kind, value in quota.bucket:
        builder = out.bucket_id_builder.bucket_id_builder[key]
        if kind == "generic":
            builder.string_value = value
        else:
            # A request without the header builds no bucket id: Envoy lets it through.
            builder.custom_value.CopyFrom(core_extension_pb2.TypedExtensionConfig(
                name="request-header",
                typed_config=pack(envoy_inputs_pb2.HttpRequestHeaderMatchInput(header_name=value))))
    if quota.deny_status is not None:
        out.deny_response_settings.http_status.CopyFrom(http_status_pb2.HttpStatus(code=quota.deny_status))
    if quota.no_assignment is not None:
        out.no_assignment_behavior.fallback_rate_limit.CopyFrom(_blanket(quota.no_assignment == "Allow"))
    if quota.expired is not None:
        strategy, timeout_ms = quota.expired
        expired = out.expired_assignment_behavior
        expired.expired_assignment_behavior_timeout.CopyFrom(ms(timeout_ms))
        if strategy == "ReuseLast":
            expired.reuse_last_assignment.SetInParent()
        else:
            expired.fallback_rate_limit.CopyFrom(_blanket(strategy == "Allow"))
    return out


def _route_is(name: str) -> m.Matcher.MatcherList.Predicate:
    expr = f"xds.route_name == {json.dumps(name)}"
    Predicate = m.Matcher.MatcherList.Predicate
    return Predicate(single_predicate=Predicate.SinglePredicate(
        input=extension_pb2.TypedExtensionConfig(
            name="envoy.matching.inputs.cel_data_input", typed_config=pack(http_inputs_pb2.HttpAttributesCelMatchInput())),
        custom_match=extension_pb2.TypedExtensionConfig(
            name="envoy.matching.matchers.cel_matcher", typed_config=pack(cel_matcher_pb2.CelMatcher(
                expr_match=cel_pb2.CelExpression(cel_expr_parsed=syntax_pb2.ParsedExpr.FromString(cel.parse(expr))),
                description=expr)))))


def quota_filter(service: ir.RateLimitQuotaService, routes: dict[str, ir.RateLimitQuota]) -> rlq_pb.RateLimitQuotaFilterConfig:
    out = rlq_pb.RateLimitQuotaFilterConfig(
        rlqs_server=grpc_service(service.cluster, service.authority, service.timeout_ms, service.retry),
        domain=service.domain)
    matchers = out.bucket_matchers.matcher_list.matchers
    for name, quota in routes.items():
        matchers.add(predicate=_route_is(name), on_match=m.Matcher.OnMatch(action=extension_pb2.TypedExtensionConfig(
            name="rate_limit_quota", typed_config=pack(bucket_settings(quota)))))
    return out


def _quota_routes(listener: ir.HTTPListener) -> dict[str, dict[str, ir.RateLimitQuota]]:
    """Extension name -> route name -> the route's quota. A route name seen twice (one
    HTTPRoute rule under two hostnames) keeps the first quota, as kgateway's does."""
    out: dict[str, dict[str, ir.RateLimitQuota]] = {}
    for vh in listener.virtual_hosts:
        if not any(p.rate_limit_quota is not None for p in vh.policies):
            continue
        for route in vh.routes:
            quota = route.policy.rate_limit_quota if route.policy is not None else None
            if quota is not None:
                out.setdefault(quota.service.name, {}).setdefault(route.source.ref, quota)
    return out


class RateLimitQuota(Feature):
    name = "rate_limit_quota"
    order = 46  # beside the global rate limit: after authentication, a rejected client spends no quota

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if not any(p.rate_limit_quota is not None for p in policies(listener)):
            return
        services = {p.rate_limit_quota.service.name: p.rate_limit_quota.service
                    for p in policies(listener) if p.rate_limit_quota is not None}
        for name, routes in sorted(_quota_routes(listener).items()):
            hcm.http_filters.append(hcm_pb.HttpFilter(
                name=filter_name(services[name]), typed_config=pack(quota_filter(services[name], routes))))


register(RateLimitQuota())
