"""Envoy's edge best practices: the default limits of every HTTP listener and port.

Envoy's own defaults suit a service mesh (no HTTP/2 stream limit, 256 MiB
HTTP/2 windows, 1 MiB buffered per connection, idle connections kept an hour);
Envoy's guide "Configuring Envoy as an edge proxy" lists what a proxy facing
the internet should set instead. Each value here applies where the listener's
ListenerPolicy leaves the field unset (listener_settings.py writes what a
policy sets), so every limit can be changed per Gateway, listener or port:
docs/edge.md names the field of each. The process-wide limits (overload
manager, connection limit) are in the bootstrap (deploy/overload.py).
"""

from __future__ import annotations

from envoy.config.core.v3 import protocol_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.network.http_connection_manager.v3.http_connection_manager_pb2 import (
    HttpConnectionManager as HCM,
)

from lychgate import ir, ir_listener
from lychgate.xds.translator.features import Feature, register

# Listener: what Envoy buffers per connection (read and write) before it stops reading.
BUFFER_LIMIT_BYTES = 32 * 1024
# A route whose filters read the whole request body (AI, Lambda, MCP, transformations, external
# processing and auth) may buffer this much of it, Envoy's default before the limit above:
# a larger body is answered 413 (a buffer policy's maxRequestSize sets its own).
BODY_BUFFER_BYTES = 1024 * 1024
# Connection manager.
IDLE_TIMEOUT_MS = 60_000  # a connection without a request is closed after a minute (Envoy: 1 h)
STREAM_IDLE_TIMEOUT_MS = 300_000  # a request sending or receiving nothing for 5 min (Envoy's default, made visible)
REQUEST_HEADERS_TIMEOUT_MS = 10_000  # from the first byte of a request to its last header (Envoy: none)
MAX_REQUEST_HEADERS_KB = 60  # Envoy's default, made visible: larger headers are answered 431
MAX_HEADERS_COUNT = 100  # Envoy's default, made visible: more headers are answered 431
UNDERSCORES = "REJECT_REQUEST"  # x_user vs x-user: backends that fold them cannot be fooled
ESCAPED_SLASHES = "UNESCAPE_AND_REDIRECT"  # /a%2Fb is redirected to /a/b, then routed as such
# HTTP/2 (the edge guide's values; Envoy: 2^31-1 streams and 256 MiB windows).
H2_MAX_CONCURRENT_STREAMS = 100
H2_INITIAL_STREAM_WINDOW = 64 * 1024
H2_INITIAL_CONNECTION_WINDOW = 1024 * 1024

_UNSET = ir_listener.HTTPSettings()


def _limits(s: ir_listener.HTTPSettings, hcm: HCM) -> None:
    common = hcm.common_http_protocol_options
    if s.idle_timeout_ms is None:
        common.idle_timeout.FromMilliseconds(IDLE_TIMEOUT_MS)
    if s.stream_idle_timeout_ms is None:
        hcm.stream_idle_timeout.FromMilliseconds(STREAM_IDLE_TIMEOUT_MS)
    hcm.request_headers_timeout.FromMilliseconds(
        REQUEST_HEADERS_TIMEOUT_MS if s.request_headers_timeout_ms is None else s.request_headers_timeout_ms)
    if s.max_request_headers_kb is None:
        hcm.max_request_headers_kb.value = MAX_REQUEST_HEADERS_KB
    common.max_headers_count.value = s.max_headers_count or MAX_HEADERS_COUNT
    if s.max_requests_per_connection is not None:
        common.max_requests_per_connection.value = s.max_requests_per_connection
    common.headers_with_underscores_action = protocol_pb2.HttpProtocolOptions.HeadersWithUnderscoresAction.Value(
        s.headers_with_underscores_action or UNDERSCORES)
    hcm.path_with_escaped_slashes_action = HCM.PathWithEscapedSlashesAction.Value(
        s.escaped_slashes_action or ESCAPED_SLASHES)
    h2 = hcm.http2_protocol_options
    if s.http2_max_concurrent_streams is None:
        h2.max_concurrent_streams.value = H2_MAX_CONCURRENT_STREAMS
    if s.http2_initial_stream_window is None:
        h2.initial_stream_window_size.value = H2_INITIAL_STREAM_WINDOW
    if s.http2_initial_connection_window is None:
        h2.initial_connection_window_size.value = H2_INITIAL_CONNECTION_WINDOW


def _reads_whole_body(route: ir.Route) -> bool:
    action, policy = route.action, route.policy
    if isinstance(action, ir.Forward) and (action.ai is not None or action.aws_lambda is not None or action.mcp):
        return True
    return policy is not None and (policy.transformation is not None or bool(policy.ext_proc)
                                   or policy.ext_auth is not None)


class Edge(Feature):
    name = "edge"
    order = 0  # adds no filter

    def patch_hcm(self, listener: ir.HTTPListener, hcm: HCM) -> None:
        _limits(listener.settings or _UNSET, hcm)

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if _reads_whole_body(route):
            out.request_body_buffer_limit.value = BODY_BUFFER_BYTES

    def patch_listener(self, gateway: ir.GatewayIR, port: int, listener: listener_pb2.Listener) -> None:
        settings = next((p for p in gateway.ports if p.port == port), None)
        if settings is None or settings.buffer_limit_bytes is None:
            listener.per_connection_buffer_limit_bytes.value = BUFFER_LIMIT_BYTES


register(Edge())
