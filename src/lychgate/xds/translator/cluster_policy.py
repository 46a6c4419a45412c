"""ir.BackendConfig (BackendConfigPolicy) onto an Envoy Cluster: connections, HTTP
protocol options, TLS, load balancing, health checks, outlier detection, circuit
breakers, DNS and the upstream PROXY protocol. Consistent-hashing keys are route
settings: `hash_policy` below is what route.py adds for them."""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterator

from envoy.config.cluster.v3 import circuit_breaker_pb2, cluster_pb2, outlier_detection_pb2
from envoy.config.core.v3 import (
    base_pb2,
    extension_pb2,
    health_check_pb2,
    protocol_pb2,
    proxy_protocol_pb2,
)
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.clusters.dns.v3 import dns_cluster_pb2
from envoy.extensions.filters.http.upstream_codec.v3 import upstream_codec_pb2
from envoy.extensions.http.header_formatters.preserve_case.v3 import preserve_case_pb2
from envoy.extensions.transport_sockets.proxy_protocol.v3 import upstream_proxy_protocol_pb2
from envoy.extensions.transport_sockets.raw_buffer.v3 import raw_buffer_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2 as tls_common_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as hpo
from envoy.type.matcher.v3 import string_pb2
from envoy.type.v3 import percent_pb2

from lychgate import ir
from lychgate.xds.translator import tls_params
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import ms, pack

HTTP_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


@contextlib.contextmanager
def http_options(out: cluster_pb2.Cluster) -> Iterator[hpo.HttpProtocolOptions]:
    """The cluster's HTTP protocol options, to change in the `with` block; written back
    with a protocol chosen (HTTP/1.1 when the cluster had none)."""
    options = hpo.HttpProtocolOptions()
    if HTTP_OPTIONS in out.typed_extension_protocol_options:
        out.typed_extension_protocol_options[HTTP_OPTIONS].Unpack(options)
    yield options
    if not options.HasField("explicit_http_config") and not options.HasField("auto_config"):
        options.explicit_http_config.http_protocol_options.SetInParent()
    out.typed_extension_protocol_options[HTTP_OPTIONS].CopyFrom(pack(options))


def add_upstream_filter(options: hpo.HttpProtocolOptions, name: str, config: object) -> None:
    """An HTTP filter in the cluster's upstream chain, before the codec Envoy requires last."""
    codec = "envoy.filters.http.upstream_codec"
    if options.http_filters and options.http_filters[-1].name == codec:  # another feature's filter came first
        del options.http_filters[-1]
    options.http_filters.add(name=name, typed_config=pack(config))
    options.http_filters.add(name=codec, typed_config=pack(upstream_codec_pb2.UpstreamCodec()))


DNS_CLUSTER = "envoy.clusters.dns"  # the DNS cluster extension (backend_cluster.py makes them)
# The proxy's trust store for `wellKnownCACertificates: System` (Debian/Ubuntu and the proxy image).
SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"

_LB = {"least_request": cluster_pb2.Cluster.LEAST_REQUEST, "round_robin": cluster_pb2.Cluster.ROUND_ROBIN,
       "ring_hash": cluster_pb2.Cluster.RING_HASH, "maglev": cluster_pb2.Cluster.MAGLEV,
       "random": cluster_pb2.Cluster.RANDOM}


def _wrapped(out: object, **values: int | bool | None) -> None:
    """Set the protobuf wrapper fields (UInt32Value, BoolValue, ...) of `out` whose value is given."""
    for attr, value in values.items():
        if value is not None:
            getattr(out, attr).value = value


def apply(cluster: ir.Cluster, out: cluster_pb2.Cluster) -> None:
    """Patch the Cluster built for `cluster` with its BackendConfig."""
    c = cluster.config
    if c is None:
        return
    if c.connect_timeout_ms is not None:
        out.connect_timeout.CopyFrom(ms(c.connect_timeout_ms))
    _wrapped(out, per_connection_buffer_limit_bytes=c.per_connection_buffer_limit_bytes)
    if c.tcp_keepalive is not None:
        probes, time_s, interval_s = c.tcp_keepalive
        keepalive = out.upstream_connection_options.tcp_keepalive
        keepalive.SetInParent()
        _wrapped(keepalive, keepalive_probes=probes, keepalive_time=time_s, keepalive_interval=interval_s)
    _http_options(cluster, c, out)
    if cluster.tls is None and c.tls is not None:  # a BackendTLSPolicy wins
        out.transport_socket.CopyFrom(upstream_tls(c.tls))
    if c.proxy_protocol is not None:
        _proxy_protocol(c.proxy_protocol, out)
    if c.load_balancing is not None and not cluster.endpoint_override:
        _load_balancing(c.load_balancing, out)
    if c.health_check is not None:
        out.health_checks.append(health_check(c.health_check))
    if c.outlier_detection is not None:
        out.outlier_detection.CopyFrom(_outlier(c.outlier_detection))
    if c.circuit_breakers is not None:
        out.circuit_breakers.thresholds.append(_thresholds(c.circuit_breakers))
    if out.cluster_type.name == DNS_CLUSTER:
        _dns(c, out)


def _dns(c: ir.BackendConfig, out: cluster_pb2.Cluster) -> None:
    """BackendConfigPolicy `dns` on a DNS cluster (Envoy's envoy.clusters.dns extension)."""
    dns = dns_cluster_pb2.DnsCluster()
    out.cluster_type.typed_config.Unpack(dns)
    if c.dns_refresh_ms is not None:
        dns.dns_refresh_rate.CopyFrom(ms(c.dns_refresh_ms))
    if c.dns_jitter_ms is not None:
        dns.dns_jitter.CopyFrom(ms(c.dns_jitter_ms))
    if c.dns_respect_ttl is not None:
        dns.respect_dns_ttl = c.dns_respect_ttl
    out.cluster_type.typed_config.Pack(dns)


def _http_options(cluster: ir.Cluster, c: ir.BackendConfig, out: cluster_pb2.Cluster) -> None:
    options = hpo.HttpProtocolOptions()
    if HTTP_OPTIONS in out.typed_extension_protocol_options:
        out.typed_extension_protocol_options[HTTP_OPTIONS].Unpack(options)
    common = options.common_http_protocol_options
    if c.idle_timeout_ms is not None:
        common.idle_timeout.CopyFrom(ms(c.idle_timeout_ms))
    if c.max_connection_duration_ms is not None:
        common.max_connection_duration.CopyFrom(ms(c.max_connection_duration_ms))
    if c.max_headers_count is not None:
        common.max_headers_count.value = c.max_headers_count
    if c.max_stream_duration_ms is not None:
        common.max_stream_duration.CopyFrom(ms(c.max_stream_duration_ms))
    if c.max_requests_per_connection is not None:
        common.max_requests_per_connection.value = c.max_requests_per_connection
    explicit = options.explicit_http_config
    if options.HasField("explicit_http_config") and explicit.HasField("http2_protocol_options"):
        # The backend speaks HTTP/2 (appProtocol): the HTTP/2 options are its.
        if c.http2:
            _http2(c, explicit.http2_protocol_options)
    elif c.http1_enable_trailers is not None or c.http1_preserve_case or c.http1_override_stream_error is not None:
        http1 = explicit.http_protocol_options
        http1.SetInParent()
        if c.http1_enable_trailers is not None:
            http1.enable_trailers = c.http1_enable_trailers
        if c.http1_override_stream_error is not None:
            http1.override_stream_error_on_invalid_http_message.value = c.http1_override_stream_error
        if c.http1_preserve_case:
            http1.header_key_format.stateful_formatter.CopyFrom(extension_pb2.TypedExtensionConfig(
                name="preserve_case", typed_config=pack(preserve_case_pb2.PreserveCaseFormatterConfig())))
    if options.ListFields():
        if not options.HasField("explicit_http_config"):
            # Common options alone still need a protocol choice: the one the cluster had.
            explicit.http_protocol_options.SetInParent()
        out.typed_extension_protocol_options[HTTP_OPTIONS].CopyFrom(pack(options))


def _http2(c: ir.BackendConfig, http2: protocol_pb2.Http2ProtocolOptions) -> None:
    _wrapped(http2, initial_stream_window_size=c.http2_initial_stream_window,
             initial_connection_window_size=c.http2_initial_connection_window,
             max_concurrent_streams=c.http2_max_concurrent_streams,
             override_stream_error_on_invalid_http_message=c.http2_override_stream_error)
    if c.http2_keepalive is not None:
        timeout, interval, idle = c.http2_keepalive
        http2.connection_keepalive.timeout.CopyFrom(ms(timeout))
        if interval is not None:
            http2.connection_keepalive.interval.CopyFrom(ms(interval))
        if idle is not None:
            http2.connection_keepalive.connection_idle_interval.CopyFrom(ms(idle))


def upstream_tls(tls: ir.BackendTLS) -> base_pb2.TransportSocket:
    common = tls_pb2.CommonTlsContext(alpn_protocols=list(tls.alpn))
    tls_params.apply(ir.TLSParams(tls.min_version, tls.max_version, tls.cipher_suites, tls.ecdh_curves,
                                  tls.signature_algorithms), common.tls_params)
    if not common.tls_params.ListFields():
        common.ClearField("tls_params")
    if tls.certificate is not None:
        common.tls_certificates.append(tls_common_pb2.TlsCertificate(
            certificate_chain=base_pb2.DataSource(inline_string=tls.certificate.chain),
            private_key=base_pb2.DataSource(inline_string=tls.certificate.key)))
    elif tls.certificate_files is not None:
        common.tls_certificates.append(tls_common_pb2.TlsCertificate(
            certificate_chain=base_pb2.DataSource(filename=tls.certificate_files[0]),
            private_key=base_pb2.DataSource(filename=tls.certificate_files[1])))
    if not tls.insecure:
        # Verified unless insecure: with no CA of its own, the system bundle (a context
        # without trusted_ca would make Envoy accept any certificate).
        trusted = (base_pb2.DataSource(inline_string=tls.ca) if tls.ca is not None
                   else base_pb2.DataSource(filename=tls.ca_file) if tls.ca_file is not None
                   else base_pb2.DataSource(filename=SYSTEM_CA_BUNDLE))
        common.validation_context.trusted_ca.CopyFrom(trusted)
        common.validation_context.match_typed_subject_alt_names.extend(
            tls_common_pb2.SubjectAltNameMatcher(
                san_type=tls_common_pb2.SubjectAltNameMatcher.SanType.Value(san_type(name)),
                matcher=string_pb2.StringMatcher(exact=name))
            for name in tls.sans)
    context = tls_pb2.UpstreamTlsContext(common_tls_context=common, allow_renegotiation=tls.allow_renegotiation)
    if tls.sni is not None:
        context.sni = tls.sni
    return base_pb2.TransportSocket(name="envoy.transport_sockets.tls", typed_config=pack(context))


def _proxy_protocol(version: str, out: cluster_pb2.Cluster) -> None:
    inner = base_pb2.TransportSocket(name="envoy.transport_sockets.raw_buffer",
                                     typed_config=pack(raw_buffer_pb2.RawBuffer()))
    if out.HasField("transport_socket"):  # TLS: the PROXY header goes first, in the clear
        inner.CopyFrom(out.transport_socket)
    config = upstream_proxy_protocol_pb2.ProxyProtocolUpstreamTransport(
        config=proxy_protocol_pb2.ProxyProtocolConfig(
            version=proxy_protocol_pb2.ProxyProtocolConfig.V2 if version == "V2" else proxy_protocol_pb2.ProxyProtocolConfig.V1),
        transport_socket=inner)
    out.transport_socket.CopyFrom(base_pb2.TransportSocket(
        name="envoy.transport_sockets.upstream_proxy_protocol", typed_config=pack(config)))


def _slow_start(slow: ir.SlowStart) -> cluster_pb2.Cluster.SlowStartConfig:
    out = cluster_pb2.Cluster.SlowStartConfig()
    if slow.window_ms is not None:
        out.slow_start_window.CopyFrom(ms(slow.window_ms))
    if slow.aggression is not None:
        out.aggression.default_value = slow.aggression
        out.aggression.runtime_key = "upstream.slow_start.aggression"
    if slow.min_weight_percent is not None:
        out.min_weight_percent.value = slow.min_weight_percent
    return out


def _load_balancing(lb: ir.LoadBalancing, out: cluster_pb2.Cluster) -> None:
    out.lb_policy = _LB[lb.algorithm]
    if lb.algorithm == "least_request":
        out.least_request_lb_config.SetInParent()
        if lb.choice_count is not None:
            out.least_request_lb_config.choice_count.value = lb.choice_count
        if lb.slow_start is not None:
            out.least_request_lb_config.slow_start_config.CopyFrom(_slow_start(lb.slow_start))
    elif lb.algorithm == "round_robin" and lb.slow_start is not None:
        out.round_robin_lb_config.slow_start_config.CopyFrom(_slow_start(lb.slow_start))
    elif lb.algorithm == "ring_hash":
        out.ring_hash_lb_config.SetInParent()
        if lb.ring_min is not None:
            out.ring_hash_lb_config.minimum_ring_size.value = lb.ring_min
        if lb.ring_max is not None:
            out.ring_hash_lb_config.maximum_ring_size.value = lb.ring_max
    common = out.common_lb_config
    if lb.healthy_panic_threshold is not None:
        common.healthy_panic_threshold.CopyFrom(percent_pb2.Percent(value=lb.healthy_panic_threshold))
    if lb.update_merge_window_ms is not None:
        common.update_merge_window.CopyFrom(ms(lb.update_merge_window_ms))
    if lb.locality_weighted:
        common.locality_weighted_lb_config.SetInParent()
    if lb.close_connections_on_host_set_change:
        common.close_connections_on_host_set_change = True
    if lb.use_hostname_for_hashing:
        common.consistent_hashing_lb_config.use_hostname_for_hashing = True


def health_check(hc: ir.HealthCheck) -> health_check_pb2.HealthCheck:
    # `interval` is "the time between health checks" for the user; Envoy would
    # otherwise wait a minute (no_traffic_interval) between checks until the
    # cluster has seen traffic, so a backend back up stays out that long.
    out = health_check_pb2.HealthCheck(timeout=ms(hc.timeout_ms), interval=ms(hc.interval_ms),
                                       no_traffic_interval=ms(hc.interval_ms))
    out.unhealthy_threshold.value = hc.unhealthy_threshold
    out.healthy_threshold.value = hc.healthy_threshold
    if hc.http_path is not None:
        http = out.http_health_check
        http.path = hc.http_path
        if hc.http_host:
            http.host = hc.http_host
        if hc.http_method:
            http.method = base_pb2.RequestMethod.Value(hc.http_method)
    elif hc.grpc:
        out.grpc_health_check.SetInParent()
        if hc.grpc_service:
            out.grpc_health_check.service_name = hc.grpc_service
        if hc.grpc_authority:
            out.grpc_health_check.authority = hc.grpc_authority
    else:
        out.tcp_health_check.SetInParent()
        if hc.tcp_send is not None:
            out.tcp_health_check.send.text = hc.tcp_send
        out.tcp_health_check.receive.extend(health_check_pb2.HealthCheck.Payload(text=r) for r in hc.tcp_receive)
    return out


def _outlier(o: ir.OutlierDetection) -> outlier_detection_pb2.OutlierDetection:
    out = outlier_detection_pb2.OutlierDetection(
        split_external_local_origin_errors=o.split_external_local_origin_errors)
    _wrapped(out, consecutive_5xx=o.consecutive_5xx, enforcing_consecutive_5xx=o.enforcing_consecutive_5xx,
             consecutive_local_origin_failure=o.consecutive_local_origin_failure,
             enforcing_consecutive_local_origin_failure=o.enforcing_consecutive_local_origin_failure,
             max_ejection_percent=o.max_ejection_percent)
    if o.interval_ms is not None:
        out.interval.CopyFrom(ms(o.interval_ms))
    if o.base_ejection_time_ms is not None:
        out.base_ejection_time.CopyFrom(ms(o.base_ejection_time_ms))
    return out


def _thresholds(cb: ir.CircuitBreakers) -> circuit_breaker_pb2.CircuitBreakers.Thresholds:
    out = circuit_breaker_pb2.CircuitBreakers.Thresholds(track_remaining=cb.track_remaining)
    _wrapped(out, max_connections=cb.max_connections, max_pending_requests=cb.max_pending_requests,
             max_requests=cb.max_requests, max_retries=cb.max_retries)
    return out


def hash_policy(h: ir.HashPolicy) -> route_pb.RouteAction.HashPolicy:
    out = route_pb.RouteAction.HashPolicy(terminal=h.terminal)
    if h.header is not None:
        out.header.header_name = h.header
    elif h.cookie is not None:
        out.cookie.name = h.cookie
        if h.cookie_path is not None:
            out.cookie.path = h.cookie_path
        if h.cookie_ttl_ms is not None:
            out.cookie.ttl.CopyFrom(ms(h.cookie_ttl_ms))
        out.cookie.attributes.extend(route_pb.RouteAction.HashPolicy.CookieAttribute(name=n, value=v)
                                     for n, v in h.cookie_attributes)
    else:
        out.connection_properties.source_ip = True
    return out



def san_type(name: str) -> str:
    """How a verifySubjectAltNames entry is matched: IP, URI, email or DNS name."""
    try:
        ipaddress.ip_address(name)
        return "IP_ADDRESS"
    except ValueError:
        pass
    if "://" in name:
        return "URI"
    return "EMAIL" if "@" in name else "DNS"


class HashPolicies(Feature):
    """The consistent-hashing key of a route whose backends hash (ring hash, maglev)."""

    name = "hash_policy"

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if isinstance(route.action, ir.Forward) and route.action.hash_policies:
            out.route.hash_policy.extend(hash_policy(h) for h in route.action.hash_policies)


register(HashPolicies())
