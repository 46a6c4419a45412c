"""apiKeyAuth → Envoy's api_key_auth filter, off by default; a route enables it with its keys."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.api_key_auth.v3 import api_key_auth_pb2 as key_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route

FILTER = "envoy.filters.http.api_key_auth"


def per_route(auth: ir.ApiKeyAuth) -> key_pb.ApiKeyAuthPerRoute:
    out = key_pb.ApiKeyAuthPerRoute(
        credentials=[key_pb.Credential(key=key, client=client) for key, client in auth.credentials],
        key_sources=[key_pb.KeySource(header=s.header or "", query=s.query or "", cookie=s.cookie or "")
                     for s in auth.sources],
        forwarding=key_pb.Forwarding(header=auth.client_id_header or "",
                                     hide_credentials=not auth.forward_credential),
    )
    return out


class ApiKeyAuth(Feature):
    name = "api_key_auth"
    order = 34

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if listener.policy_filters:
            add_disabled_filter(hcm, FILTER, key_pb.ApiKeyAuth())

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        auth = route.policy.api_key_auth if route.policy is not None else None
        if auth is not None:
            enable_on_route(out, FILTER, per_route(auth))


register(ApiKeyAuth())
