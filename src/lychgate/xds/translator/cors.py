"""CORS policy → Envoy's cors filter, configured per route."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from google.protobuf import wrappers_pb2

from lychgate import ir
from lychgate.envoy_limits import wildcard_origin_regex
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.host_flags import any_host
from lychgate.xds.translator.policy_filters import pack

FILTER = "envoy.filters.http.cors"


def origin_matcher(origin: str) -> string_pb2.StringMatcher:
    if origin == "*":
        return string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=".*"))
    if "*" in origin:
        return string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=wildcard_origin_regex(origin)))
    return string_pb2.StringMatcher(exact=origin, ignore_case=True)


def cors_policy(c: ir.Cors) -> cors_pb2.CorsPolicy:
    out = cors_pb2.CorsPolicy(
        allow_origin_string_match=[origin_matcher(o) for o in c.allow_origins],
        # ", " as kgateway joins them: its suites compare these headers as whole strings.
        allow_methods=", ".join(c.allow_methods),
        allow_headers=", ".join(c.allow_headers),
        expose_headers=", ".join(c.expose_headers),
        # Envoy forwards a preflight from an origin it does not allow to the backend by
        # default; Gateway API wants the gateway to answer it (200, no CORS headers), so
        # the backend never sees OPTIONS from a foreign origin.
        forward_not_matching_preflights=wrappers_pb2.BoolValue(value=False),
    )
    if c.max_age_s is not None:
        out.max_age = str(c.max_age_s)
    if c.allow_credentials is not None:
        out.allow_credentials.value = c.allow_credentials
    return out


class Cors(Feature):
    name = "cors"
    order = 10

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        # Only where a route has a CorsPolicy: the filter looks at every request's
        # Origin, and a listener without CORS should not pay for it. The first
        # CORS route changes the listener (Envoy drains the old chain; connections
        # on it answer without CORS headers, which browsers treat as a refusal).
        if any_host(listener, _has_cors):
            hcm.http_filters.append(hcm_pb.HttpFilter(name=FILTER, typed_config=pack(cors_pb2.Cors())))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        cors = route.cors or (route.policy.cors if route.policy is not None else None)
        if cors is not None:
            out.typed_per_filter_config[FILTER].CopyFrom(pack(cors_policy(cors)))


def _has_cors(vh: ir.VirtualHost) -> bool:
    return any(r.cors is not None for r in vh.routes) or any(p.cors is not None for p in vh.policies)


register(Cors())
