"""extAuth → one Envoy ext_authz filter per GatewayExtension, enabled per route.

Each ExtAuth GatewayExtension a listener's routes use gets its own filter
(`envoy.filters.http.ext_authz/<namespace>/<name>`), off by default; a route
with extAuth enables its extension's filter and passes its context
extensions. A route whose policy disables extAuth simply does not enable it.
"""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2, config_source_pb2, grpc_service_pb2, http_uri_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.ext_authz.v3 import ext_authz_pb2 as authz_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.type.matcher.v3 import string_pb2
from envoy.type.v3 import http_status_pb2, percent_pb2

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import (
    add_disabled_filter,
    enable_on_route,
    extension_services,
    ms,
    retry_policy,
    stat_name,
)

PREFIX = "envoy.filters.http.ext_authz/"
# kgateway's HTTPDefaultTimeout (api/v1alpha1/kgateway/gateway_extensions_types.go): an
# httpService without requestTimeout waits 2 s for the auth service before failing closed.
DEFAULT_HTTP_TIMEOUT_MS = 2000


def filter_name(service: ir.ExtAuthService) -> str:
    return PREFIX + service.name


def _headers(names: tuple[str, ...]) -> string_pb2.ListStringMatcher:
    return string_pb2.ListStringMatcher(
        patterns=[string_pb2.StringMatcher(exact=n, ignore_case=True) for n in names]
    )


def _buffer(b: ir.BodyBuffer) -> authz_pb.BufferSettings:
    return authz_pb.BufferSettings(max_request_bytes=b.max_bytes, allow_partial_message=b.allow_partial,
                                   pack_as_bytes=b.pack_as_bytes)


def grpc_service(cluster: str, authority: str | None, timeout_ms: int | None,
                 retry: ir.ServiceRetry | None = None) -> grpc_service_pb2.GrpcService:
    out = grpc_service_pb2.GrpcService(
        envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=cluster, authority=authority or "")
    )
    if timeout_ms is not None:
        out.timeout.CopyFrom(ms(timeout_ms))
    if retry is not None:
        out.retry_policy.CopyFrom(retry_policy(retry))
    return out


def ext_authz(service: ir.ExtAuthService) -> authz_pb.ExtAuthz:
    out = authz_pb.ExtAuthz(
        transport_api_version=config_source_pb2.V3,
        failure_mode_allow=service.fail_open,
        status_on_error=http_status_pb2.HttpStatus(code=service.status_on_error),
        clear_route_cache=service.clear_route_cache,
        stat_prefix=service.stat_prefix or stat_name(service.name),
    )
    if service.headers_to_forward:
        out.allowed_headers.CopyFrom(_headers(service.headers_to_forward))
    if service.with_request_body is not None:
        out.with_request_body.CopyFrom(_buffer(service.with_request_body))
    if service.percentage_enabled is not None:
        # Requests not sampled pass unchecked (kgateway percentageEnabled: a gradual roll-out).
        out.filter_enabled.CopyFrom(base_pb2.RuntimeFractionalPercent(
            default_value=percent_pb2.FractionalPercent(numerator=service.percentage_enabled)))
    if service.protocol == "grpc":
        out.grpc_service.CopyFrom(grpc_service(service.cluster, service.authority, service.timeout_ms,
                                               service.retry))
    else:
        http = authz_pb.HttpService(
            server_uri=http_uri_pb2.HttpUri(
                uri=f"http://{service.cluster}", cluster=service.cluster,
                timeout=ms(service.timeout_ms or DEFAULT_HTTP_TIMEOUT_MS),
            ),
            path_prefix=service.path_prefix or "",
        )
        if service.retry is not None:
            http.retry_policy.CopyFrom(retry_policy(service.retry))
        for name, value in service.headers_to_add:
            http.authorization_request.headers_to_add.append(base_pb2.HeaderValue(key=name, value=value))
        if service.allowed_upstream_headers:
            http.authorization_response.allowed_upstream_headers.CopyFrom(_headers(service.allowed_upstream_headers))
        if service.allowed_client_headers:
            http.authorization_response.allowed_client_headers.CopyFrom(_headers(service.allowed_client_headers))
        if service.allowed_client_headers_on_success:
            http.authorization_response.allowed_client_headers_on_success.CopyFrom(
                _headers(service.allowed_client_headers_on_success))
        out.http_service.CopyFrom(http)
    return out


class ExtAuthz(Feature):
    name = "ext_authz"
    order = 40

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        services = extension_services(listener, ir.ExtAuthService, "ext_auth")
        for name in sorted(services):
            add_disabled_filter(hcm, filter_name(services[name]), ext_authz(services[name]))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        auth = route.policy.ext_auth if route.policy is not None else None
        if auth is None:
            return
        settings = authz_pb.CheckSettings(context_extensions=dict(auth.context_extensions))
        if auth.with_request_body is not None:
            settings.with_request_body.CopyFrom(_buffer(auth.with_request_body))
        enable_on_route(out, filter_name(auth.service), authz_pb.ExtAuthzPerRoute(check_settings=settings))


register(ExtAuthz())
