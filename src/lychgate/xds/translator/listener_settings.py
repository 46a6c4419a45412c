"""ListenerPolicy settings of connection managers and listeners (besides access logs and tracing).

Connection manager: client address (useRemoteAddress, xffNumTrustedHops,
xffTrustedCIDRs, skipXFFAppend), Server header and name, Host and path
normalisation, timeouts and connection lifetime, header limits and case,
HTTP/1.0, 100-continue, request ids, upgrades, early header changes, HTTP/2
windows and extended CONNECT, x-forwarded-client-cert, and the health check
path Envoy answers itself (a filter first in the chain, so no backend or
policy is involved). Listener: the PROXY protocol listener filter (first,
before TLS inspection), the per-connection buffer limit and the transport
(TLS handshake) deadline of its filter chains.
"""

from __future__ import annotations

from envoy.config.core.v3 import address_pb2, base_pb2, extension_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.health_check.v3 import health_check_pb2
from envoy.extensions.filters.listener.proxy_protocol.v3 import proxy_protocol_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.extensions.filters.network.http_connection_manager.v3.http_connection_manager_pb2 import (
    HttpConnectionManager as HCM,
)
from envoy.extensions.http.early_header_mutation.header_mutation.v3 import header_mutation_pb2
from envoy.extensions.http.header_formatters.preserve_case.v3 import preserve_case_pb2
from envoy.extensions.http.original_ip_detection.xff.v3 import xff_pb2
from envoy.extensions.request_id.uuid.v3 import uuid_pb2
from envoy.type.matcher.v3 import string_pb2

from lychgate import ir, ir_listener
from lychgate.xds.translator.features import Feature, register

_APPEND = base_pb2.HeaderValueOption


def _typed(name: str, message: object) -> extension_pb2.TypedExtensionConfig:
    out = extension_pb2.TypedExtensionConfig(name=name)
    out.typed_config.Pack(message)
    return out


def _client_address(s: ir_listener.HTTPSettings, hcm: HCM) -> None:
    if s.use_remote_address is not None:
        hcm.use_remote_address.value = s.use_remote_address
        # kgateway: a proxy that does not use the peer's address is transparent to XFF.
        if not s.use_remote_address and s.skip_xff_append is None:
            hcm.skip_xff_append = True
    if s.skip_xff_append is not None:
        hcm.skip_xff_append = s.skip_xff_append
    if s.xff_num_trusted_hops is not None:
        hcm.xff_num_trusted_hops = s.xff_num_trusted_hops
    if s.xff_trusted_cidrs:
        xff = xff_pb2.XffConfig()
        xff.xff_trusted_cidrs.cidrs.extend(address_pb2.CidrRange(address_prefix=a, prefix_len={"value": n})
                                           for a, n in s.xff_trusted_cidrs)
        hcm.original_ip_detection_extensions.append(_typed("envoy.extensions.http.original_ip_detection.xff", xff))


def _host_and_path(s: ir_listener.HTTPSettings, hcm: HCM) -> None:
    """Before routing: the route lookup, the filters and the backend see the result. (The
    scope key of a split table too: Envoy runs early header mutations after these.)"""
    if s.strip_host_port == "matching":
        hcm.strip_matching_host_port = True
    elif s.strip_host_port == "any":
        hcm.strip_any_host_port = True
    if s.strip_trailing_host_dot is not None:
        hcm.strip_trailing_host_dot = s.strip_trailing_host_dot
    if s.normalize_path is not None:  # both on by default (listener.py)
        hcm.normalize_path.value = s.normalize_path
    if s.merge_slashes is not None:
        hcm.merge_slashes = s.merge_slashes


def _protocol(s: ir_listener.HTTPSettings, hcm: HCM) -> None:
    if s.server_header_transformation is not None:
        hcm.server_header_transformation = HCM.ServerHeaderTransformation.Value(s.server_header_transformation)
    if s.server_name is not None:
        hcm.server_name = s.server_name
    if s.proxy_100_continue is not None:
        hcm.proxy_100_continue = s.proxy_100_continue
    if s.max_connection_duration_ms is not None:
        hcm.common_http_protocol_options.max_connection_duration.FromMilliseconds(s.max_connection_duration_ms)
    if s.stream_idle_timeout_ms is not None:
        hcm.stream_idle_timeout.FromMilliseconds(s.stream_idle_timeout_ms)
    if s.idle_timeout_ms is not None:
        hcm.common_http_protocol_options.idle_timeout.FromMilliseconds(s.idle_timeout_ms)
    if s.max_request_headers_kb is not None:
        hcm.max_request_headers_kb.value = s.max_request_headers_kb
    h1 = hcm.http_protocol_options
    if s.preserve_http1_header_case:
        h1.header_key_format.stateful_formatter.CopyFrom(_typed(
            "envoy.http.stateful_header_formatters.preserve_case", preserve_case_pb2.PreserveCaseFormatterConfig()))
    if s.accept_http10 is not None:
        h1.accept_http_10 = s.accept_http10
    if s.accept_http10 and s.default_host_for_http10:
        h1.default_host_for_http_10 = s.default_host_for_http10
    h2 = hcm.http2_protocol_options
    if s.http2_initial_stream_window is not None:
        h2.initial_stream_window_size.value = s.http2_initial_stream_window
    if s.http2_initial_connection_window is not None:
        h2.initial_connection_window_size.value = s.http2_initial_connection_window
    if s.http2_max_concurrent_streams is not None:
        h2.max_concurrent_streams.value = s.http2_max_concurrent_streams
    if s.http2_allow_connect is not None:
        h2.allow_connect = s.http2_allow_connect
    for upgrade in s.upgrades:
        hcm.upgrade_configs.append(HCM.UpgradeConfig(upgrade_type=upgrade))


def _request_id(s: ir_listener.HTTPSettings, hcm: HCM) -> None:
    if s.generate_request_id is not None:
        hcm.generate_request_id.value = s.generate_request_id
    if s.preserve_external_request_id is not None:
        hcm.preserve_external_request_id = s.preserve_external_request_id
    if s.pack_trace_reason is not None or s.use_request_id_for_trace_sampling is not None:
        uuid = uuid_pb2.UuidRequestIdConfig()
        if s.pack_trace_reason is not None:
            uuid.pack_trace_reason.value = s.pack_trace_reason
        if s.use_request_id_for_trace_sampling is not None:
            uuid.use_request_id_for_trace_sampling.value = s.use_request_id_for_trace_sampling
        hcm.request_id_extension.typed_config.Pack(uuid)


def _headers(s: ir_listener.HTTPSettings, hcm: HCM) -> None:
    if s.early_set or s.early_add or s.early_remove:
        mutation = header_mutation_pb2.HeaderMutation()
        for name in s.early_remove:
            mutation.mutations.add(remove=name)
        for ops, action in ((s.early_set, _APPEND.OVERWRITE_IF_EXISTS_OR_ADD),
                            (s.early_add, _APPEND.APPEND_IF_EXISTS_OR_ADD)):
            for name, value in ops:
                mutation.mutations.add(append=_APPEND(header=base_pb2.HeaderValue(key=name, value=value),
                                                      append_action=action))
        hcm.early_header_mutation_extensions.append(
            _typed("envoy.http.early_header_mutation.header_mutation", mutation))
    if s.forward_client_cert is not None:
        hcm.forward_client_cert_details = HCM.ForwardClientCertDetails.Value(s.forward_client_cert)
        details = hcm.set_current_client_cert_details
        for part in s.client_cert_details:
            if part == "subject":
                details.subject.value = True
            else:
                setattr(details, part, True)


def _health_check(path: str) -> hcm_pb.HttpFilter:
    check = health_check_pb2.HealthCheck(pass_through_mode={"value": False}, headers=[
        route_pb.HeaderMatcher(name=":path", string_match=string_pb2.StringMatcher(exact=path))])
    out = hcm_pb.HttpFilter(name="envoy.filters.http.health_check")
    out.typed_config.Pack(check)
    return out


class ListenerSettingsFeature(Feature):
    name = "listener_settings"
    order = 0  # the health check filter answers before any other filter runs

    def patch_hcm(self, listener: ir.HTTPListener, hcm: HCM) -> None:
        s = listener.settings
        if s is None:
            return
        _client_address(s, hcm)
        _host_and_path(s, hcm)
        _protocol(s, hcm)
        _request_id(s, hcm)
        _headers(s, hcm)
        if s.health_check_path is not None:
            hcm.http_filters.append(_health_check(s.health_check_path))

    def patch_listener(self, gateway: ir.GatewayIR, port: int, listener: listener_pb2.Listener) -> None:
        settings = next((p for p in gateway.ports if p.port == port), None)
        if settings is None:
            return
        if settings.buffer_limit_bytes is not None:
            listener.per_connection_buffer_limit_bytes.value = settings.buffer_limit_bytes
        if settings.transport_socket_connect_timeout_ms is not None:
            # Every chain of the port, as kgateway: a chain without TLS is connected at once
            # (the raw socket has no handshake), so the deadline only closes TLS clients.
            for chain in listener.filter_chains:
                chain.transport_socket_connect_timeout.FromMilliseconds(
                    settings.transport_socket_connect_timeout_ms)
        if settings.proxy_protocol:
            proxy = proxy_protocol_pb2.ProxyProtocol(
                allow_requests_without_proxy_protocol=settings.allow_without_proxy_protocol)
            f = listener_components_pb2.ListenerFilter(name="envoy.filters.listener.proxy_protocol")
            f.typed_config.Pack(proxy)
            listener.listener_filters.insert(0, f)


register(ListenerSettingsFeature())
