"""ListenerPolicy and the deprecated HTTPListenerPolicy (gateway.lychgate.dev/v1alpha1).

The shapes are kgateway's (`api/v1alpha1/kgateway/listener_policy_types.go` and
`http_listener_policy_types.go`), so a kgateway manifest loads unchanged with the
group renamed: a ListenerPolicy targets Gateways (optionally one listener by
`sectionName`) and carries a `default` listener configuration and `perPort[]`
overrides; its `httpSettings` configure the HTTP connection manager (access
logs, tracing, client address, timeouts, ...). kgateway's other shape puts the
listener configuration (`httpSettings`, `proxyProtocol`,
`perConnectionBufferLimitBytes`) directly in the spec, meaning what `default`
means; translation refuses a spec that mixes the two shapes. An HTTPListenerPolicy carries the
same HTTP settings inline in its spec.

Only the shape is checked here; what a value means (a duration, a reference, a
format string) is checked by translation (translate/listener_policy.py), which
reports it on the policy's status with the field path.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic.json_schema import JsonDict

from lychgate.api.backend_config import TCPKeepalive
from lychgate.api.base import NESTING_KEY, Model, Resource
from lychgate.api.client_validation import ClientCertificateValidationConfig
from lychgate.api.direct_response import BodyFormat
from lychgate.api.format_dict import FormatDictionary
from lychgate.api.gateway import BackendRef, HeaderMatch, HeaderModifier
from lychgate.api.headers import EnvoyHeaderName
from lychgate.api.lychgate import GROUP
from lychgate.api.policy import (
    LocalPolicyTargetReference,
    LocalPolicyTargetSelector,
    PolicyHeaderFilter,
)
from lychgate.api.rules import CEL, at_least_one_of, at_most_one_of, field_rules
from lychgate.api.status import PolicyStatus
from lychgate.api.trace_attributes import CustomAttribute

# --- gRPC services (access log and trace collectors) -----------------------------------


class HeaderValue(Model):
    key: str = Field(min_length=1)
    value: str | None = None


class BackoffStrategy(Model):
    base_interval: str
    max_interval: str | None = None


class RetryPolicy(Model):
    retry_back_off: BackoffStrategy | None = None
    num_retries: int | None = Field(None, ge=1)


class CommonGrpcService(Model):
    """A gRPC service Envoy calls itself (`envoy_grpc`): a Service by backendRef."""

    backend_ref: BackendRef
    authority: str | None = None
    max_receive_message_length: int | None = Field(None, ge=1)
    skip_envoy_headers: bool | None = None
    timeout: str | None = None
    initial_metadata: list[HeaderValue] = Field(default_factory=list)
    retry_policy: RetryPolicy | None = None


class CommonAccessLogGrpcService(CommonGrpcService):
    log_name: str = Field(min_length=1)


class AccessLogGrpcService(CommonAccessLogGrpcService):
    """Envoy's gRPC access log service (envoy.service.accesslog.v3)."""

    additional_request_headers_to_log: list[str] = Field(default_factory=list)
    additional_response_headers_to_log: list[str] = Field(default_factory=list)
    additional_response_trailers_to_log: list[str] = Field(default_factory=list)


# How deep OTLP values may nest: the CRD cannot be recursive, so tools/gen_crds.py writes
# AnyValue out this many levels (a value at the last level is a string) and the model
# refuses deeper values, so the API server and lychgate refuse the same (kgateway's CRD
# leaves everything below the first level unchecked instead).
MAX_NESTING = 5


class AnyValue(Model):
    """OTLP's AnyValue: exactly one of a string, a list of values, a list of key-values."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1, "maxProperties": 1,  # as kgateway's
                                                 NESTING_KEY: MAX_NESTING})

    string_value: str | None = None
    array_value: list[AnyValue] | None = None
    kv_list_value: KeyAnyValueList | None = None

    @model_validator(mode="after")
    def _one(self) -> AnyValue:
        given = [n for n, v in (("stringValue", self.string_value), ("arrayValue", self.array_value),
                                ("kvListValue", self.kv_list_value)) if v is not None]
        if len(given) != 1:
            raise ValueError("exactly one of stringValue, arrayValue or kvListValue must be set"
                             + (f" (found {', '.join(given)})" if given else ""))
        if self.levels() > MAX_NESTING:
            raise ValueError(f"values nest at most {MAX_NESTING} levels deep (a value at the last level is a "
                             "stringValue)")
        return self

    def levels(self) -> int:
        """The levels this value spans: 1 for a string, one more than its deepest item for a
        list (an empty list too: the CRD has no list at the last level)."""
        if self.string_value is not None:
            return 1
        items = self.array_value if self.array_value is not None else [
            kv.value for kv in (self.kv_list_value.values if self.kv_list_value is not None else [])]
        return 1 + max((item.levels() for item in items), default=1)


class KeyAnyValue(Model):
    key: str = Field(min_length=1)
    value: AnyValue


class KeyAnyValueList(Model):
    values: list[KeyAnyValue] = Field(default_factory=list)


class OpenTelemetryAccessLogService(Model):
    """OTLP logs (opentelemetry.proto.collector.logs.v1) to a collector."""

    grpc_service: CommonAccessLogGrpcService
    body: str | None = None
    disable_builtin_labels: bool | None = None
    attributes: KeyAnyValueList | None = None
    resource_attributes: KeyAnyValueList | None = None


# --- access logs ------------------------------------------------------------------------


class FileSink(Model):
    """A file Envoy appends one line per request to: `stringFormat` or `jsonFormat`."""

    # kgateway demands exactly one; lychgate's own default format stands in for neither
    # (docs/observability.md), so the CRD refuses only both, as translate/access_logs.py does.
    RULES = (at_most_one_of("string_format", "json_format", checked_by="translate/access_logs.py"),)

    path: str = Field(min_length=1)
    string_format: str | None = None
    # Format dictionary: keys to Envoy command operators (`%REQ(:PATH)%`), nested allowed.
    json_format: FormatDictionary | None = None


ComparisonOp = Literal["EQ", "GE", "LE"]


class ComparisonFilter(Model):
    op: ComparisonOp
    value: int = Field(ge=0, le=4294967295)


class LogHeaderMatch(HeaderMatch):
    """kgateway's gwv1.HTTPHeaderMatch, but the name may be a request pseudo-header
    (`:method`, `:path`): Envoy's access-log header filter matches those too."""

    name: EnvoyHeaderName


class HeaderFilter(Model):
    header: LogHeaderMatch


class ResponseFlagFilter(Model):
    flags: list[str] = Field(min_length=1)


GrpcStatus = Literal[
    "OK", "CANCELED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
]


class GrpcStatusFilter(Model):
    # kgateway's MinItems (an empty list used to reach Envoy as written).
    statuses: list[GrpcStatus] = Field(default_factory=list, min_length=1)
    exclude: bool | None = None


class CELFilter(Model):
    match: str = Field(min_length=1)


class FractionalPercent(Model):
    numerator: int = Field(ge=0)
    denominator: Literal["HUNDRED", "TEN_THOUSAND", "MILLION"] | None = None


class RuntimeFilter(Model):
    runtime_key: str = Field(min_length=1)
    percent_sampled: FractionalPercent | None = None
    use_independent_randomness: bool | None = None


# kgateway's Min/MaxProperties: one condition (translate/access_logs.py says which are too many).
_ONE_PROPERTY = ConfigDict(json_schema_extra={"minProperties": 1, "maxProperties": 1})


class FilterType(Model):
    """Exactly one condition a request must meet to be logged."""

    model_config = _ONE_PROPERTY

    status_code_filter: ComparisonFilter | None = None
    duration_filter: ComparisonFilter | None = None
    not_health_check_filter: bool | None = None
    traceable_filter: bool | None = None
    header_filter: HeaderFilter | None = None
    response_flag_filter: ResponseFlagFilter | None = None
    grpc_status_filter: GrpcStatusFilter | None = None
    cel_filter: CELFilter | None = Field(None, alias="celFilter")
    runtime_filter: RuntimeFilter | None = None


class AccessLogFilter(FilterType):
    """One condition (inline), or `andFilter` / `orFilter` of several."""

    and_filter: list[FilterType] = Field(default_factory=list, json_schema_extra=field_rules(minItems=2))
    or_filter: list[FilterType] = Field(default_factory=list, json_schema_extra=field_rules(minItems=2))


class AccessLog(Model):
    file_sink: FileSink | None = None
    grpc_service: AccessLogGrpcService | None = None
    open_telemetry: OpenTelemetryAccessLogService | None = None
    filter: AccessLogFilter | None = None


# --- tracing ---------------------------------------------------------------------------


class EnvironmentResourceDetectorConfig(Model):
    enable: bool = True


class ResourceDetector(Model):
    environment_resource_detector: EnvironmentResourceDetectorConfig | None = None


class AlwaysOnConfig(Model):
    pass


class Sampler(Model):
    always_on: AlwaysOnConfig | None = Field(None, alias="alwaysOnConfig")


class OpenTelemetryTracingConfig(Model):
    grpc_service: CommonGrpcService
    service_name: str | None = None
    resource_detectors: list[ResourceDetector] = Field(default_factory=list)
    sampler: Sampler | None = None


class TracingProvider(Model):
    model_config = _ONE_PROPERTY  # kgateway's; translate/tracing.py asks for openTelemetry

    open_telemetry: OpenTelemetryTracingConfig | None = None


class Tracing(Model):
    provider: TracingProvider
    client_sampling: int | None = Field(None, ge=0, le=100)
    random_sampling: int | None = Field(None, ge=0, le=100)
    overall_sampling: int | None = Field(None, ge=0, le=100)
    verbose: bool | None = None
    max_path_tag_length: int | None = Field(None, ge=1)
    attributes: list[CustomAttribute] = Field(default_factory=list)
    spawn_upstream_span: bool | None = None


# --- local replies and gRPC statistics ---------------------------------------------------


class LocalReplyMapper(Model):
    """What to change in the local replies (Envoy's own answers: 404 no route, 503, 403...)
    its `filter` matches; the first mapper that matches is the only one applied."""

    filter: AccessLogFilter
    status_code: int | None = Field(None, ge=200, le=599)  # Envoy's range
    body: str | None = None  # the text %LOCAL_REPLY_BODY% stands for
    body_format_override: BodyFormat | None = None
    headers: PolicyHeaderFilter | None = None


class LocalReplyConfig(Model):
    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    default_body_format: BodyFormat | None = None
    mappers: list[LocalReplyMapper] = Field(default_factory=list, min_length=1, max_length=16)

    RULES = (at_least_one_of("default_body_format", "mappers"),)


# "/package.Service/Method" (the package is optional, as in gRPC): what Envoy's grpc_stats
# allowlist takes, split into its service and method names.
GRPC_METHOD = r"^/[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*/[A-Za-z_][A-Za-z0-9_]*$"


def _grpc_method(value: str) -> str:
    if not re.match(GRPC_METHOD, value):
        raise ValueError(f"{value!r} is not a gRPC method name: write /package.Service/Method, "
                         "e.g. /grpc.health.v1.Health/Check")
    return value


GrpcMethod = Annotated[str, AfterValidator(_grpc_method),
                       WithJsonSchema({"type": "string", "maxLength": 1024, "pattern": GRPC_METHOD})]


class GrpcStatsConfig(Model):
    """Envoy's grpc_stats filter on the listener: per-method gRPC counters on each cluster."""

    stats_for_all_methods: bool | None = None
    method_allowlist: list[GrpcMethod] = Field(
        default_factory=list, min_length=1, max_length=128)
    enable_upstream_stats: bool | None = None

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})  # kgateway: an empty block is rejected

    @model_validator(mode="after")
    def _shape(self) -> GrpcStatsConfig:
        if self.stats_for_all_methods is None and not self.method_allowlist and self.enable_upstream_stats is None:
            raise ValueError("set at least one of statsForAllMethods, methodAllowlist or enableUpstreamStats "
                             "(leave grpcStats out to have no gRPC statistics)")
        if self.stats_for_all_methods is not None and self.method_allowlist:
            raise ValueError("statsForAllMethods and methodAllowlist cannot both be set: list the methods, "
                             "or count every method")
        return self


# --- HTTP settings -----------------------------------------------------------------------


class UpgradeConfig(Model):
    enabled_upgrades: list[str] = Field(default_factory=list, min_length=1)


class EnvoyHealthCheck(Model):
    path: str = Field(min_length=2, max_length=2048, pattern=r"^/[-a-zA-Z0-9@:%.+~#?&/=_]+$")


class ListenerHTTP2ProtocolOptions(Model):
    initial_stream_window_size: int | str | None = None
    initial_connection_window_size: int | str | None = None
    max_concurrent_streams: int | None = Field(None, ge=1, le=2147483647)
    # RFC 8441 extended CONNECT: WebSocket over HTTP/2 (Envoy turns it into a websocket upgrade,
    # which the listener's upgradeConfig or a route's httpUpgrade must still allow).
    allow_connect: bool | None = None


class SetCurrentClientCertDetails(Model):
    subject: bool | None = None
    cert: bool | None = None
    chain: bool | None = None
    dns: bool | None = Field(None, alias="dns")
    uri: bool | None = Field(None, alias="uri")


class ForwardClientCertDetails(Model):
    mode: Literal["Sanitize", "ForwardOnly", "AppendForward", "SanitizeSet", "AlwaysForwardOnly"] | None = None
    details: SetCurrentClientCertDetails | None = None


class UuidRequestIdConfig(Model):
    pack_trace_reason: bool | None = None
    use_request_id_for_trace_sampling: bool | None = None


ServerHeaderTransformation = Literal["Overwrite", "AppendIfAbsent", "PassThrough"]
StripHostPortMode = Literal["MatchingPort", "AnyPort"]
HeadersWithUnderscoresAction = Literal["Allow", "RejectRequest", "DropHeader"]
EscapedSlashesAction = Literal["KeepUnchanged", "RejectRequest", "UnescapeAndRedirect", "UnescapeAndForward"]


class HTTPSettings(Model):
    """What an HTTP listener's connection manager does besides routing."""

    # kgateway's rules; translate/listener_settings.py refuses the same with the field's path.
    RULES = (
        CEL("!has(self.xffTrustedCIDRs) || (has(self.useRemoteAddress) && !self.useRemoteAddress)",
            "useRemoteAddress must be set to false if xffTrustedCIDRs is set", "translate/listener_settings.py"),
        CEL("!has(self.xffNumTrustedHops) || !has(self.xffTrustedCIDRs)",
            "only one of xffNumTrustedHops and xffTrustedCIDRs may be set", "translate/listener_settings.py"),
        CEL("!has(self.forwardClientCertDetails) || !has(self.forwardClientCertDetails.details) || "
            "!has(self.forwardClientCertDetails.mode) || self.forwardClientCertDetails.mode == 'AppendForward' || "
            "self.forwardClientCertDetails.mode == 'SanitizeSet'",
            "forwardClientCertDetails.details requires mode to be AppendForward or SanitizeSet (or unset)",
            "translate/listener_settings.py"),
    )

    access_log: list[AccessLog] = Field(default_factory=list, max_length=16)
    tracing: Tracing | None = None
    upgrade_config: UpgradeConfig | None = None
    use_remote_address: bool | None = None
    preserve_external_request_id: bool | None = None
    generate_request_id: bool | None = None
    xff_num_trusted_hops: int | None = Field(None, ge=0)
    xff_trusted_cidrs: list[str] = Field(default_factory=list, min_length=1, alias="xffTrustedCIDRs")
    skip_xff_append: bool | None = Field(None, alias="skipXFFAppend")
    server_header_transformation: ServerHeaderTransformation | None = None
    server_name: str | None = Field(None, min_length=1)  # the Server header Envoy writes
    # What Envoy does to the Host and path before routing (and forwards as changed).
    strip_host_port_mode: StripHostPortMode | None = None
    strip_trailing_host_dot: bool | None = None
    normalize_path: bool | None = None  # lychgate's default, as kgateway's: true
    merge_slashes: bool | None = None  # lychgate's default, as kgateway's: true
    stream_idle_timeout: str | None = None
    idle_timeout: str | None = None
    max_connection_duration: str | None = Field(None, max_length=32)
    http2_protocol_options: ListenerHTTP2ProtocolOptions | None = None
    health_check: EnvoyHealthCheck | None = None
    preserve_http1_header_case: bool | None = None
    accept_http10: bool | None = None
    default_host_for_http10: str | None = Field(None, min_length=1)
    proxy100_continue: bool | None = None
    early_request_header_modifier: HeaderModifier | None = None
    forward_client_cert_details: ForwardClientCertDetails | None = None
    max_request_headers_kb: int | None = Field(None, ge=1, le=8192)
    uuid_request_id_config: UuidRequestIdConfig | None = None
    # kgateway's bounds; Envoy's proto has no maximum for max_headers_count. 0 requests per
    # connection: no limit (Envoy's meaning of 0). Each has an edge default (docs/edge.md).
    max_headers_count: int | None = Field(None, ge=1, le=2147483647)
    max_requests_per_connection: int | None = Field(None, ge=0, le=2147483647)
    # lychgate's own (kgateway has no such field); each has an edge default (docs/edge.md).
    request_headers_timeout: str | None = None
    headers_with_underscores_action: HeadersWithUnderscoresAction | None = None
    escaped_slashes_action: EscapedSlashesAction | None = None
    local_replies: LocalReplyConfig | None = None
    grpc_stats: GrpcStatsConfig | None = None


class ProxyProtocolConfig(Model):
    """Present: connections start with a PROXY protocol (v1 or v2) header."""

    allow_requests_without_proxy_protocol: bool | None = None


class ListenerConfig(Model):
    proxy_protocol: ProxyProtocolConfig | None = None
    per_connection_buffer_limit_bytes: int | None = Field(None, ge=0)
    # kgateway's shape, loaded so a manifest gets a status; translation refuses it
    # (translate/listener_settings.py says why).
    tcp_keepalive: TCPKeepalive | None = None
    transport_socket_connect_timeout: str | None = None  # the TLS handshake's deadline
    http_settings: HTTPSettings | None = Field(None, alias="httpSettings")


class ListenerDefaultConfig(ListenerConfig):
    # kgateway's per-listener mTLS: only in `default` (kgateway has it nowhere else);
    # it applies to the TLS listeners the policy reaches, whatever their port.
    client_certificate_validation: ClientCertificateValidationConfig | None = None


class ListenerPortConfig(Model):
    port: int = Field(ge=1, le=65535)
    listener: ListenerConfig


def _gateways_only(field: str) -> JsonDict:
    # kgateway's rule; translate/listener_policy.py refuses the other kinds with a status.
    return field_rules(CEL("self.all(r, r.kind == 'Gateway' && (!has(r.group) || r.group == 'gateway.networking.k8s.io'))",
                           f"{field} may only reference Gateway resource", "translate/listener_policy.py"))


class GatewayTargets(Model):
    """`targetRefs` / `targetSelectors`: Gateways of the policy's namespace, optionally one listener."""

    target_refs: list[LocalPolicyTargetReference] = Field(
        default_factory=list, min_length=1, max_length=16, json_schema_extra=_gateways_only("targetRefs"))
    target_selectors: list[LocalPolicyTargetSelector] = Field(
        default_factory=list, max_length=16, json_schema_extra=_gateways_only("targetSelectors"))


class ListenerPolicySpec(GatewayTargets, ListenerConfig):
    """`default` / `perPort[]`, or the listener configuration inline (the other shape)."""

    default: ListenerDefaultConfig | None = None
    per_port: list[ListenerPortConfig] = Field(default_factory=list, max_length=64, json_schema_extra=field_rules(
        CEL("self.all(t1, self.exists_one(t2, t1.port == t2.port))",
            "Port for listener configuration must be unique within the Gateway", "translate/listener_policy.py")))


class ListenerPolicy(Resource):
    """Listener settings of the Gateways it targets (kgateway's ListenerPolicy)."""

    KIND: ClassVar[str] = "ListenerPolicy"
    STATUS: ClassVar[type[Model] | None] = PolicyStatus
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1alpha1",)
    spec: ListenerPolicySpec = Field(default_factory=ListenerPolicySpec)


class HTTPListenerPolicySpec(GatewayTargets, HTTPSettings):
    pass


class HTTPListenerPolicy(Resource):
    """Deprecated in kgateway for ListenerPolicy `httpSettings`; the same settings, inline."""

    KIND: ClassVar[str] = "HTTPListenerPolicy"
    STATUS: ClassVar[type[Model] | None] = PolicyStatus
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1alpha1",)
    spec: HTTPListenerPolicySpec = Field(default_factory=HTTPListenerPolicySpec)

