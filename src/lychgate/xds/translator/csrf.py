"""csrf → Envoy's csrf filter, off by default; a route enables it with its policy.

Envoy compares the Origin (or Referer) of non-safe requests (POST, PUT,
DELETE, PATCH) with the request's host and the additional origins, and answers
403 `Invalid origin` on a mismatch (or only counts it in shadow mode).
"""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.csrf.v3 import csrf_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from envoy.type.v3 import percent_pb2

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route

FILTER = "envoy.filters.http.csrf"


def _percent(value: int) -> base_pb2.RuntimeFractionalPercent:
    return base_pb2.RuntimeFractionalPercent(default_value=percent_pb2.FractionalPercent(numerator=value))


def string_matcher(m: ir.OriginMatch) -> string_pb2.StringMatcher:
    if m.kind == "safe_regex":
        return string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=m.value))
    out = string_pb2.StringMatcher(ignore_case=m.ignore_case)
    setattr(out, m.kind, m.value)
    return out


def policy(c: ir.Csrf) -> csrf_pb2.CsrfPolicy:
    return csrf_pb2.CsrfPolicy(filter_enabled=_percent(c.enabled_percent), shadow_enabled=_percent(c.shadow_percent),
                               additional_origins=[string_matcher(o) for o in c.additional_origins])


class Csrf(Feature):
    name = "csrf"
    order = 12  # after CORS, whose preflights are not state-changing requests

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if listener.policy_filters:
            add_disabled_filter(hcm, FILTER, csrf_pb2.CsrfPolicy(filter_enabled=_percent(0)))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        c = route.policy.csrf if route.policy is not None else None
        if c is not None:
            enable_on_route(out, FILTER, policy(c))


register(Csrf())
