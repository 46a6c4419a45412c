"""jwtAuth → one Envoy jwt_authn filter per listener, a requirement per JWT extension.

The filter holds the providers of every usable JWT GatewayExtension (named
`<namespace>/<extension>/<provider>`) and one requirement per extension: any
of its providers, plus `allow_missing` for `validationMode: AllowMissing` or
`allow_missing_or_failed` for `AllowMissingOrFailed` (as kgateway 2.5 maps
them). Every provider writes why a token failed to dynamic metadata
(`failed_status`), as kgateway does, so access logs show the requests an
AllowMissingOrFailed policy would have refused.
It is off by default; a route with jwtAuth enables it naming its extension's
requirement. Verified claims land in dynamic metadata
(`envoy.filters.http.jwt_authn` → `payload`), where rbac's CEL reads them.
"""

from __future__ import annotations

from envoy.config.core.v3 import http_uri_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.jwt_authn.v3 import config_pb2 as jwt_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from google.protobuf import empty_pb2

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import (
    add_disabled_filter,
    enable_on_route,
    extension_services,
    ms,
    retry_policy,
)

FILTER = "envoy.filters.http.jwt_authn"
PAYLOAD_KEY = "payload"
FAILED_STATUS_KEY = "failed_status"
JWKS_FETCH_TIMEOUT_MS = 5000
DEFAULT_CACHE_MS = 5 * 60 * 1000  # kgateway's default cacheDuration


def provider(p: ir.JwtProvider) -> jwt_pb.JwtProvider:
    out = jwt_pb.JwtProvider(
        issuer=p.issuer, audiences=list(p.audiences), forward=p.forward,
        payload_in_metadata=PAYLOAD_KEY, failed_status_in_metadata=FAILED_STATUS_KEY,
        claim_to_headers=[jwt_pb.JwtClaimToHeader(claim_name=c, header_name=h) for c, h in p.claims_to_headers],
        clear_route_cache=bool(p.claims_to_headers),
    )
    if p.clock_skew_s is not None:
        out.clock_skew_seconds = p.clock_skew_s
    if p.cache is not None:
        size, max_token = p.cache
        out.jwt_cache_config.SetInParent()  # `cache: {}`: on, with Envoy's defaults
        if size is not None:
            out.jwt_cache_config.jwt_cache_size = size
        if max_token is not None:
            out.jwt_cache_config.jwt_max_token_size = max_token
    if p.header is not None:
        out.from_headers.append(jwt_pb.JwtHeader(name=p.header, value_prefix=p.prefix or ""))
    if p.query is not None:
        out.from_params.append(p.query)
    if p.local_jwks is not None:
        out.local_jwks.inline_string = p.local_jwks
    elif p.remote_url is not None and p.remote_cluster is not None:
        remote = out.remote_jwks
        remote.http_uri.CopyFrom(http_uri_pb2.HttpUri(
            uri=p.remote_url, cluster=p.remote_cluster, timeout=ms(p.fetch_timeout_ms or JWKS_FETCH_TIMEOUT_MS)))
        remote.cache_duration.CopyFrom(ms(p.cache_ms or DEFAULT_CACHE_MS))
        if p.async_fetch is not None:  # else fetched on demand, as kgateway does
            remote.async_fetch.fast_listener = p.async_fetch.fast_listener
            if p.async_fetch.failed_refetch_ms is not None:
                remote.async_fetch.failed_refetch_duration.CopyFrom(ms(p.async_fetch.failed_refetch_ms))
        if p.fetch_retry is not None:
            remote.retry_policy.CopyFrom(retry_policy(p.fetch_retry))
    return out


def requirement(service: ir.JwtService) -> jwt_pb.JwtRequirement:
    anyof = [jwt_pb.JwtRequirement(provider_name=p.name) for p in service.providers]
    if service.allow_failed:
        anyof.append(jwt_pb.JwtRequirement(allow_missing_or_failed=empty_pb2.Empty()))
    elif service.allow_missing:
        anyof.append(jwt_pb.JwtRequirement(allow_missing=empty_pb2.Empty()))
    if len(anyof) == 1:
        return anyof[0]
    return jwt_pb.JwtRequirement(requires_any=jwt_pb.JwtRequirementOrList(requirements=anyof))


def jwt_authentication(services: list[ir.JwtService]) -> jwt_pb.JwtAuthentication:
    out = jwt_pb.JwtAuthentication()
    for s in services:
        for p in s.providers:
            out.providers[p.name].CopyFrom(provider(p))
        out.requirement_map[s.name].CopyFrom(requirement(s))
    return out


class JwtAuthn(Feature):
    name = "jwt_authn"
    order = 32  # after CORS (preflights pass), before rbac and ext_authz (they may use the claims)

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        services = extension_services(listener, ir.JwtService, "jwt_auth")
        if services:
            add_disabled_filter(hcm, FILTER, jwt_authentication([services[n] for n in sorted(services)]))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        jwt = route.policy.jwt_auth if route.policy is not None else None
        if jwt is not None:
            enable_on_route(out, FILTER, jwt_pb.PerRouteConfig(requirement_name=jwt.service.name))


register(JwtAuthn())
