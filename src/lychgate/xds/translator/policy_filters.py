"""Helpers shared by the policy features: per-route filter config, filters off by default.

Policy filters sit in a listener's HTTP connection manager, disabled, once any
of its routes has a TrafficPolicy (translate PolicyIndex.filters_for): the
ext_authz / ext_proc filter of every usable GatewayExtension, and the rate
limit, buffer, transformation and other policy filters. A route that needs one
enables and configures it through `typed_per_filter_config`. Routes without
the policy never run the filter, and attaching, changing or removing a policy
touches only the route configuration (RDS). That matters: a listener change
makes Envoy drain the old listener, and its open connections (keep-alive
clients) keep the old filter chain, so a newly attached auth policy would not
protect them until they close. A listener's first policy is the change that
adds filters (a listener without policies carries none it does not use), and
chain_routes.py keeps the connections of the chain it replaces from reaching a
backend (docs/policies.md, "Filters in the chain").
"""

from __future__ import annotations

from typing import Any, TypeVar

from envoy.config.core.v3 import backoff_pb2, base_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.type.v3 import percent_pb2
from google.protobuf import any_pb2, duration_pb2, wrappers_pb2

from lychgate import ir
from lychgate.xds.translator.features import Feature

S = TypeVar("S", ir.ExtAuthService, ir.ExtProcService, ir.JwtService, ir.OAuth2Service)


def pack(message: object) -> any_pb2.Any:
    out = any_pb2.Any()
    out.Pack(message)
    return out


def ms(value: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=value // 1000, nanos=(value % 1000) * 1_000_000)


def percent(value: int) -> percent_pb2.FractionalPercent:
    return percent_pb2.FractionalPercent(numerator=value, denominator=percent_pb2.FractionalPercent.HUNDRED)


def policies(listener: ir.HTTPListener) -> tuple[ir.RoutePolicy, ...]:
    """The policy of every route of a listener that has one (walked once per listener)."""
    return listener.route_policies


def extension_services(listener: ir.HTTPListener, cls: type[S], field: str) -> dict[str, S]:
    """The extension services (of one type) a listener needs a filter for, by name:
    every usable GatewayExtension, and any a route's policy names (the field holds
    one route setting, or a tuple of them: ext_proc)."""
    services = {s.name: s for s in listener.extensions if isinstance(s, cls)}
    for p in policies(listener):
        used = getattr(p, field)
        for one in used if isinstance(used, tuple) else (used,):
            if one is not None:
                services[one.service.name] = one.service
    return services


def add_disabled_filter(hcm: hcm_pb.HttpConnectionManager, name: str, config: object) -> None:
    hcm.http_filters.append(hcm_pb.HttpFilter(name=name, typed_config=pack(config), disabled=True))


def enable_on_route(out: route_pb.Route, name: str, config: object | None) -> None:
    """Turn a filter that is off by default on for this route, with its per-route config."""
    fc = route_pb.FilterConfig()
    if config is not None:
        fc.config.CopyFrom(pack(config))
    else:
        # A filter without per-route settings (oauth2): an empty `config` is how Envoy
        # is told "enabled here"; no `config` at all is refused.
        fc.config.SetInParent()
    out.typed_per_filter_config[name].CopyFrom(pack(fc))


class PolicyFilter(Feature):
    """A TrafficPolicy feature that is one filter: off in every listener once any
    TrafficPolicy exists, on (with its per-route config) in the routes whose
    policy sets `field`. Subclasses give the filter, the field and both configs."""

    filter = ""  # the HTTP filter's name in the chain
    field = ""  # the ir.RoutePolicy attribute that turns it on

    def listener_config(self) -> object:
        """The filter's config in the listener, where it stays off."""
        raise NotImplementedError

    def route_config(self, value: Any) -> object:
        """The per-route config that turns it on for a route with `value`."""
        raise NotImplementedError

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if listener.policy_filters:
            add_disabled_filter(hcm, self.filter, self.listener_config())

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        value = getattr(route.policy, self.field) if route.policy is not None else None
        if value is not None:
            enable_on_route(out, self.filter, self.route_config(value))


def stat_name(name: str) -> str:
    """A GatewayExtension "namespace/name" as a stats prefix segment."""
    return name.replace("/", "_").replace(".", "_")


def retry_policy(retry: ir.ServiceRetry) -> base_pb2.RetryPolicy:
    """Retries of a filter's calls to its service (ext_authz, ext_proc), as kgateway
    configures them: `attempts` retries, jittered backoff from baseInterval."""
    out = base_pb2.RetryPolicy(num_retries=wrappers_pb2.UInt32Value(value=retry.attempts))
    if retry.base_interval_ms is not None:
        out.retry_back_off.CopyFrom(backoff_pb2.BackoffStrategy(base_interval=ms(retry.base_interval_ms)))
        if retry.max_interval_ms is not None:
            out.retry_back_off.max_interval.CopyFrom(ms(retry.max_interval_ms))
    return out
