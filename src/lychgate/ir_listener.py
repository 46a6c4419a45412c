"""The IR of listener settings: what ListenerPolicies make of a Gateway's listeners.

Plain frozen values like the rest of the IR (lychgate/ir.py holds them on
`HTTPListener.settings` and `GatewayIR.ports`); translate/listener_policy.py
produces them and the xDS features access_log.py, tracing.py and
listener_settings.py turn them into Envoy configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class GrpcCollector:
    """A gRPC service Envoy streams to (access log service, OTLP collector)."""

    cluster: str
    authority: str | None = None
    timeout_ms: int | None = None
    initial_metadata: tuple[tuple[str, str], ...] = ()
    max_receive_message_length: int | None = None
    skip_envoy_headers: bool | None = None
    retries: int | None = None
    retry_base_ms: int | None = None
    retry_max_ms: int | None = None


LogFilterKind = Literal["status", "duration", "not_health_check", "traceable", "header", "response_flags",
                        "grpc_status", "cel", "runtime", "and", "or"]


@dataclass(frozen=True)
class LogFilter:
    """One access log filter; `and`/`or` hold the others in `children`."""

    kind: LogFilterKind
    op: str = ""  # EQ, GE, LE (status, duration)
    value: int = 0
    header: tuple[str, str, str] | None = None  # (name, Exact | RegularExpression, value)
    values: tuple[str, ...] = ()  # response flags, gRPC statuses
    exclude: bool = False
    text: str = ""  # CEL expression, runtime key
    numerator: int | None = None
    denominator: str = "HUNDRED"
    independent: bool = False
    children: tuple[LogFilter, ...] = ()


@dataclass(frozen=True)
class AccessLogSink:
    """One `accessLog[]` entry: a file, Envoy's gRPC access log service or OTLP."""

    kind: Literal["file", "grpc", "otel"]
    filter: LogFilter | None = None
    # file
    path: str = ""
    text_format: str | None = None
    json_format: str | None = None  # the format dictionary as JSON text (keeps it hashable)
    # grpc, otel
    collector: GrpcCollector | None = None
    log_name: str = ""
    request_headers: tuple[str, ...] = ()
    response_headers: tuple[str, ...] = ()
    response_trailers: tuple[str, ...] = ()
    # otel: AnyValue/KeyValueList in OTLP's JSON form
    body: str | None = None
    attributes: str | None = None
    resource_attributes: str | None = None
    disable_builtin_labels: bool = False


@dataclass(frozen=True)
class TraceTag:
    """A custom span attribute: a literal, an environment variable, a request header or metadata."""

    name: str
    kind: Literal["literal", "environment", "header", "metadata"]
    value: str  # the literal, variable or header name, or the metadata key
    default: str | None = None
    metadata_kind: str = ""
    path: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tracing:
    collector: GrpcCollector
    service_name: str
    client_sampling: int | None = None
    random_sampling: int | None = None
    overall_sampling: int | None = None
    verbose: bool = False
    max_path_tag_length: int | None = None
    tags: tuple[TraceTag, ...] = ()
    spawn_upstream_span: bool | None = None
    environment_detector: bool = False
    always_on: bool = False


@dataclass(frozen=True)
class ReplyFormat:
    """A body format: a text or a JSON format dictionary (as canonical JSON text), and its content type."""

    text: str | None = None
    json: str | None = None
    content_type: str | None = None


@dataclass(frozen=True)
class ReplyMapper:
    """One `localReplies.mappers[]` entry: the replies its filter matches get what it sets."""

    filter: LogFilter
    status_code: int | None = None
    body: str | None = None
    body_format: ReplyFormat | None = None
    set_headers: tuple[tuple[str, str], ...] = ()  # values are Envoy format strings
    add_headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class LocalReplies:
    """The connection manager's local_reply_config."""

    mappers: tuple[ReplyMapper, ...] = ()
    body_format: ReplyFormat | None = None


@dataclass(frozen=True)
class GrpcStats:
    """Envoy's grpc_stats filter: counters for every method, or for the listed (service, methods)."""

    all_methods: bool | None = None
    allowlist: tuple[tuple[str, tuple[str, ...]], ...] = ()
    upstream_stats: bool | None = None


@dataclass(frozen=True)
class HTTPSettings:
    """The connection manager settings of one HTTP listener (None: lychgate's default)."""

    access_logs: tuple[AccessLogSink, ...] = ()
    tracing: Tracing | None = None
    upgrades: tuple[str, ...] = ()
    use_remote_address: bool | None = None
    xff_num_trusted_hops: int | None = None
    xff_trusted_cidrs: tuple[tuple[str, int], ...] = ()
    skip_xff_append: bool | None = None
    server_header_transformation: str | None = None
    server_name: str | None = None
    strip_host_port: str | None = None  # "matching" (the listener's port) or "any"
    strip_trailing_host_dot: bool | None = None
    normalize_path: bool | None = None
    merge_slashes: bool | None = None
    stream_idle_timeout_ms: int | None = None
    idle_timeout_ms: int | None = None
    max_connection_duration_ms: int | None = None
    max_request_headers_kb: int | None = None
    preserve_http1_header_case: bool | None = None
    accept_http10: bool | None = None
    default_host_for_http10: str | None = None
    proxy_100_continue: bool | None = None
    generate_request_id: bool | None = None
    preserve_external_request_id: bool | None = None
    pack_trace_reason: bool | None = None
    use_request_id_for_trace_sampling: bool | None = None
    health_check_path: str | None = None
    early_set: tuple[tuple[str, str], ...] = ()
    early_add: tuple[tuple[str, str], ...] = ()
    early_remove: tuple[str, ...] = ()
    http2_initial_stream_window: int | None = None
    http2_initial_connection_window: int | None = None
    http2_max_concurrent_streams: int | None = None
    http2_allow_connect: bool | None = None
    forward_client_cert: str | None = None
    client_cert_details: tuple[str, ...] = ()  # subject, cert, chain, dns, uri
    request_headers_timeout_ms: int | None = None
    max_headers_count: int | None = None
    max_requests_per_connection: int | None = None
    headers_with_underscores_action: str | None = None  # Envoy's enum value name
    escaped_slashes_action: str | None = None  # Envoy's enum value name
    local_replies: LocalReplies | None = None
    grpc_stats: GrpcStats | None = None


@dataclass(frozen=True)
class PortSettings:
    """What applies to the whole Envoy listener on a port, whatever its protocol."""

    port: int
    proxy_protocol: bool = False
    allow_without_proxy_protocol: bool = False
    buffer_limit_bytes: int | None = None
    transport_socket_connect_timeout_ms: int | None = None  # on every filter chain of the port
