"""rateLimit.global → one Envoy ratelimit filter per RateLimit GatewayExtension,
off by default; a route with a global limit enables its extension's filter with
the route's descriptors (RateLimitPerRoute.rate_limits).

The extension's percentEnabled / percentEnforced are the filter's filter_enabled
/ filter_enforced: a request outside the first is not asked about; one outside
the second is asked and counted (over_limit) but not refused (shadow mode)."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2, config_source_pb2
from envoy.config.ratelimit.v3 import rls_pb2 as rls_config_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.extensions.filters.http.ratelimit.v3 import rate_limit_pb2 as rl_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.type.v3 import percent_pb2

from lychgate import ir
from lychgate.xds.translator.ext_authz import grpc_service
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import (
    add_disabled_filter,
    enable_on_route,
    ms,
    policies,
    stat_name,
)

PREFIX = "envoy.filters.http.ratelimit/"


def filter_name(service: ir.RateLimitService) -> str:
    return PREFIX + service.name


def _percent(value: int, key: str) -> base_pb2.RuntimeFractionalPercent:
    return base_pb2.RuntimeFractionalPercent(
        default_value=percent_pb2.FractionalPercent(numerator=value, denominator=percent_pb2.FractionalPercent.HUNDRED),
        runtime_key=key,
    )


def rate_limit(service: ir.RateLimitService) -> rl_pb.RateLimit:
    out = rl_pb.RateLimit(
        domain=service.domain,
        timeout=ms(service.timeout_ms),
        failure_mode_deny=not service.fail_open,
        rate_limit_service=rls_config_pb2.RateLimitServiceConfig(
            grpc_service=grpc_service(service.cluster, service.authority, None),
            transport_api_version=config_source_pb2.V3),
        enable_x_ratelimit_headers=(ratelimit_pb2.DRAFT_VERSION_03 if service.x_ratelimit_headers
                                    else ratelimit_pb2.OFF),
        stat_prefix=stat_name(service.name),
    )
    # Runtime keys of their own, so that no runtime layer set for another filter moves them.
    key = f"lychgate.ratelimit.{stat_name(service.name)}"
    if service.percent_enabled is not None:
        out.filter_enabled.CopyFrom(_percent(service.percent_enabled, f"{key}.filter_enabled"))
    if service.percent_enforced is not None:
        out.filter_enforced.CopyFrom(_percent(service.percent_enforced, f"{key}.filter_enforced"))
    return out


def _action(entry: ir.DescriptorEntry) -> route_pb.RateLimit.Action:
    kind, a, b = entry
    if kind == "generic":
        return route_pb.RateLimit.Action(generic_key=route_pb.RateLimit.Action.GenericKey(
            descriptor_key=a, descriptor_value=b))
    if kind == "header":
        return route_pb.RateLimit.Action(request_headers=route_pb.RateLimit.Action.RequestHeaders(
            header_name=a, descriptor_key=a))
    if kind == "path":
        return route_pb.RateLimit.Action(request_headers=route_pb.RateLimit.Action.RequestHeaders(
            header_name=":path", descriptor_key="path"))
    return route_pb.RateLimit.Action(remote_address=route_pb.RateLimit.Action.RemoteAddress())


def per_route(limit: ir.GlobalRateLimit) -> rl_pb.RateLimitPerRoute:
    return rl_pb.RateLimitPerRoute(rate_limits=[
        route_pb.RateLimit(actions=[_action(e) for e in descriptor]) for descriptor in limit.descriptors])


class GlobalRateLimit(Feature):
    name = "ratelimit"
    order = 45  # after authentication: a rejected client does not spend the quota

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        services = {s.name: s for s in listener.extensions if isinstance(s, ir.RateLimitService)}
        for p in policies(listener):
            if p.global_rate_limit is not None:
                services[p.global_rate_limit.service.name] = p.global_rate_limit.service
        for name in sorted(services):
            add_disabled_filter(hcm, filter_name(services[name]), rate_limit(services[name]))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        limit = route.policy.global_rate_limit if route.policy is not None else None
        if limit is not None:
            enable_on_route(out, filter_name(limit.service), per_route(limit))


register(GlobalRateLimit())
