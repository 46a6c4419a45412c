"""A ListenerPolicy's settings, field by field: spec values → IR settings.

`compile_http` and `compile_port` return, for each field the configuration
sets, the IR keyword arguments it contributes (ir_listener.HTTPSettings and
PortSettings). Fields are the unit of precedence: when two policies set the
same field on a listener, the more specific (a listener by sectionName), then
the older one wins it (translate/listener_policy.py).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from lychgate import envoy_limits, ir
from lychgate.api.listener_policy import HTTPSettings, ListenerConfig
from lychgate.store import Store
from lychgate.translate.access_logs import compile_access_logs
from lychgate.translate.grpc_stats import compile_grpc_stats
from lychgate.translate.local_replies import compile_local_replies
from lychgate.translate.tracing import compile_tracing
from lychgate.translate.values import (
    Invalid,
    Unresolved,
    duration_ms,
    envoy_check,
    header_name,
    quantity_bytes,
)

Compiled = dict[str, dict[str, Any]]  # field (as in the spec) -> IR keyword arguments

_SERVER_HEADER = {"Overwrite": "OVERWRITE", "AppendIfAbsent": "APPEND_IF_ABSENT", "PassThrough": "PASS_THROUGH"}
_XFCC = {"Sanitize": "SANITIZE", "ForwardOnly": "FORWARD_ONLY", "AppendForward": "APPEND_FORWARD",
         "SanitizeSet": "SANITIZE_SET", "AlwaysForwardOnly": "ALWAYS_FORWARD_ONLY"}
_UNDERSCORES = {"Allow": "ALLOW", "RejectRequest": "REJECT_REQUEST", "DropHeader": "DROP_HEADER"}
_ESCAPED_SLASHES = {"KeepUnchanged": "KEEP_UNCHANGED", "RejectRequest": "REJECT_REQUEST",
                    "UnescapeAndRedirect": "UNESCAPE_AND_REDIRECT", "UnescapeAndForward": "UNESCAPE_AND_FORWARD"}
_STRIP_PORT = {"MatchingPort": "matching", "AnyPort": "any"}
_WINDOW = (65535, 2147483647)
_SIMPLE = (  # (spec field, model attribute, IR field): copied as they are
    ("useRemoteAddress", "use_remote_address", "use_remote_address"),
    ("xffNumTrustedHops", "xff_num_trusted_hops", "xff_num_trusted_hops"),
    ("skipXFFAppend", "skip_xff_append", "skip_xff_append"),
    ("maxRequestHeadersKb", "max_request_headers_kb", "max_request_headers_kb"),
    ("preserveHttp1HeaderCase", "preserve_http1_header_case", "preserve_http1_header_case"),
    ("acceptHttp10", "accept_http10", "accept_http10"),
    ("defaultHostForHttp10", "default_host_for_http10", "default_host_for_http10"),
    ("proxy100Continue", "proxy100_continue", "proxy_100_continue"),
    ("serverName", "server_name", "server_name"),
    ("stripTrailingHostDot", "strip_trailing_host_dot", "strip_trailing_host_dot"),
    ("normalizePath", "normalize_path", "normalize_path"),
    ("mergeSlashes", "merge_slashes", "merge_slashes"),
    ("generateRequestId", "generate_request_id", "generate_request_id"),
    ("preserveExternalRequestId", "preserve_external_request_id", "preserve_external_request_id"),
    ("maxHeadersCount", "max_headers_count", "max_headers_count"),
    ("maxRequestsPerConnection", "max_requests_per_connection", "max_requests_per_connection"),
)


def compile_http(store: Store, kind: str, namespace: str, s: HTTPSettings, path: str,
                 clusters: dict[str, ir.Cluster], unresolved: dict[str, Unresolved]) -> Compiled:
    """Raises Invalid for the first value that cannot be served; a collector that
    cannot be reached leaves its field out and is recorded in `unresolved`."""
    out: Compiled = {}
    for name, attr, field in _SIMPLE:
        value = getattr(s, attr)
        if value is not None:
            out[name] = {field: value}
    _check_combinations(s, path)
    if s.access_log:
        unreachable: list[Unresolved] = []
        sinks = compile_access_logs(store, kind, namespace, s.access_log, f"{path}.accessLog", clusters, unreachable)
        if sinks:
            out["accessLog"] = {"access_logs": sinks}
        if unreachable:
            unresolved["accessLog"] = unreachable[0]
    if s.tracing is not None:
        try:
            out["tracing"] = {"tracing": compile_tracing(store, kind, namespace, s.tracing, f"{path}.tracing",
                                                         clusters)}
        except Unresolved as err:
            unresolved["tracing"] = err
    if s.upgrade_config is not None:
        if not s.upgrade_config.enabled_upgrades:
            raise Invalid(f"{path}.upgradeConfig.enabledUpgrades", "must list at least one upgrade type")
        out["upgradeConfig"] = {"upgrades": tuple(s.upgrade_config.enabled_upgrades)}
    if s.xff_trusted_cidrs:
        out["xffTrustedCIDRs"] = {"xff_trusted_cidrs": tuple(
            _cidr(c, f"{path}.xffTrustedCIDRs[{i}]") for i, c in enumerate(s.xff_trusted_cidrs))}
    if s.server_header_transformation is not None:
        out["serverHeaderTransformation"] = {"server_header_transformation":
                                             _SERVER_HEADER[s.server_header_transformation]}
    if s.stream_idle_timeout is not None:
        out["streamIdleTimeout"] = {"stream_idle_timeout_ms": duration_ms(s.stream_idle_timeout,
                                                                          f"{path}.streamIdleTimeout")}
    if s.idle_timeout is not None:
        out["idleTimeout"] = {"idle_timeout_ms": duration_ms(s.idle_timeout, f"{path}.idleTimeout")}
    if s.max_connection_duration is not None:
        # Envoy drains a connection after its first request at 0s (measured), which nobody
        # means by it: refused.
        where = f"{path}.maxConnectionDuration"
        ms = duration_ms(s.max_connection_duration, where)
        if ms == 0:
            raise Invalid(where, "0s would have Envoy close every connection after its first request; "
                          "leave the field out for no limit")
        out["maxConnectionDuration"] = {"max_connection_duration_ms": ms}
    if s.strip_host_port_mode is not None:
        out["stripHostPortMode"] = {"strip_host_port": _STRIP_PORT[s.strip_host_port_mode]}
    if s.request_headers_timeout is not None:
        out["requestHeadersTimeout"] = {"request_headers_timeout_ms": duration_ms(
            s.request_headers_timeout, f"{path}.requestHeadersTimeout")}
    if s.headers_with_underscores_action is not None:
        out["headersWithUnderscoresAction"] = {"headers_with_underscores_action":
                                               _UNDERSCORES[s.headers_with_underscores_action]}
    if s.escaped_slashes_action is not None:
        out["escapedSlashesAction"] = {"escaped_slashes_action": _ESCAPED_SLASHES[s.escaped_slashes_action]}
    if s.health_check is not None:
        out["healthCheck"] = {"health_check_path": s.health_check.path}
    if s.early_request_header_modifier is not None:
        m = s.early_request_header_modifier
        where = f"{path}.earlyRequestHeaderModifier"
        if not (m.set or m.add or m.remove):
            raise Invalid(where, "at least one of set, add or remove must be set")
        for op, headers in (("set", m.set), ("add", m.add)):
            for i, h in enumerate(headers):
                envoy_check(envoy_limits.header_value, h.value, f"{where}.{op}[{i}].value")
        out["earlyRequestHeaderModifier"] = {
            "early_set": tuple((header_name(h.name, f"{where}.set[{i}].name"), h.value) for i, h in enumerate(m.set)),
            "early_add": tuple((header_name(h.name, f"{where}.add[{i}].name"), h.value) for i, h in enumerate(m.add)),
            "early_remove": tuple(header_name(n, f"{where}.remove[{i}]") for i, n in enumerate(m.remove)),
        }
    if s.http2_protocol_options is not None:
        h2 = s.http2_protocol_options
        where = f"{path}.http2ProtocolOptions"
        out["http2ProtocolOptions"] = {
            "http2_initial_stream_window": _window(h2.initial_stream_window_size, f"{where}.initialStreamWindowSize"),
            "http2_initial_connection_window": _window(h2.initial_connection_window_size,
                                                       f"{where}.initialConnectionWindowSize"),
            "http2_max_concurrent_streams": h2.max_concurrent_streams,
            "http2_allow_connect": h2.allow_connect,
        }
    if s.forward_client_cert_details is not None:
        x = s.forward_client_cert_details
        details = x.details.model_dump(exclude_none=True) if x.details else {}
        mode = x.mode or ("SanitizeSet" if details else None)
        if mode is not None:
            out["forwardClientCertDetails"] = {
                "forward_client_cert": _XFCC[mode],
                "client_cert_details": tuple(k for k in ("subject", "cert", "chain", "dns", "uri") if details.get(k)),
            }
    if s.uuid_request_id_config is not None:
        u = s.uuid_request_id_config
        out["uuidRequestIdConfig"] = {"pack_trace_reason": u.pack_trace_reason,
                                      "use_request_id_for_trace_sampling": u.use_request_id_for_trace_sampling}
    if s.local_replies is not None:
        try:
            out["localReplies"] = {"local_replies": compile_local_replies(
                store, kind, namespace, s.local_replies, f"{path}.localReplies")}
        except Unresolved as err:
            unresolved["localReplies"] = err
    if s.grpc_stats is not None:
        out["grpcStats"] = {"grpc_stats": compile_grpc_stats(s.grpc_stats)}
    return out


def _check_combinations(s: HTTPSettings, path: str) -> None:
    """kgateway's CEL rules on HTTPSettings, as errors naming the field."""
    if s.xff_trusted_cidrs and s.use_remote_address is not False:
        raise Invalid(f"{path}.xffTrustedCIDRs", "useRemoteAddress must be set to false if xffTrustedCIDRs is set")
    if s.xff_trusted_cidrs and s.xff_num_trusted_hops is not None:
        raise Invalid(f"{path}.xffNumTrustedHops", "only one of xffNumTrustedHops and xffTrustedCIDRs may be set")
    x = s.forward_client_cert_details
    if x and x.details and x.mode not in (None, "AppendForward", "SanitizeSet"):
        raise Invalid(f"{path}.forwardClientCertDetails.details",
                      "details requires mode to be AppendForward or SanitizeSet (or unset)")


def _cidr(value: str, path: str) -> tuple[str, int]:
    try:
        net = ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise Invalid(path, f"{value!r} is not an address range such as 10.0.0.0/8") from None
    return str(net.network_address), net.prefixlen


def _window(value: int | str | None, path: str) -> int | None:
    if value is None:
        return None
    size = quantity_bytes(value, path)
    if not _WINDOW[0] <= size <= _WINDOW[1]:
        raise Invalid(path, f"{value!r} must be between {_WINDOW[0]} and {_WINDOW[1]} bytes")
    return size


def compile_port(config: ListenerConfig, path: str) -> Compiled:
    """The settings of whole Envoy listeners: PROXY protocol, the buffer limit and the
    TLS handshake deadline. Raises Invalid for tcpKeepalive (see below)."""
    out: Compiled = {}
    if config.tcp_keepalive is not None:
        # Envoy sets keepalive on the listening socket (the accepted ones inherit it), and
        # refuses to change a running listener's socket options unless SO_REUSEPORT is on
        # (measured with Envoy 1.40: the update is rejected, "duplicate address"; a renamed
        # listener cannot bind the port either). lychgate turns SO_REUSEPORT off so that a
        # port another program holds is refused and reported (xds/translator/listener.py);
        # with keepalive, adding, changing or removing it would leave the listener refusing
        # every update until the proxy restarts.
        raise Invalid(f"{path}.tcpKeepalive", "is not supported: Envoy cannot change the socket "
                      "options of a running listener without SO_REUSEPORT, which lychgate keeps off "
                      "(a port taken by another program must fail, not be shared); remove it, or set "
                      "keepalive in the network in front of the gateway")
    if config.proxy_protocol is not None:
        out["proxyProtocol"] = {"proxy_protocol": True, "allow_without_proxy_protocol":
                                bool(config.proxy_protocol.allow_requests_without_proxy_protocol)}
    if config.per_connection_buffer_limit_bytes is not None:
        out["perConnectionBufferLimitBytes"] = {"buffer_limit_bytes": config.per_connection_buffer_limit_bytes}
    if config.transport_socket_connect_timeout is not None:
        out["transportSocketConnectTimeout"] = {"transport_socket_connect_timeout_ms": duration_ms(
            config.transport_socket_connect_timeout, f"{path}.transportSocketConnectTimeout")}
    return out
