"""apiKeyAuth → Envoy's api_key_auth filter, off by default; a route enables it with its keys."""

from __future__ import annotations

from envoy.extensions.filters.http.api_key_auth.v3 import api_key_auth_pb2 as key_pb

from lychgate import ir
from lychgate.xds.translator.features import register
from lychgate.xds.translator.policy_filters import PolicyFilter

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


class ApiKeyAuth(PolicyFilter):
    name, filter, field = "api_key_auth", FILTER, "api_key_auth"
    order = 34

    def listener_config(self) -> object:
        return key_pb.ApiKeyAuth()

    def route_config(self, value: ir.ApiKeyAuth) -> object:
        return per_route(value)


register(ApiKeyAuth())
