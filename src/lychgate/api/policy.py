"""Policy kinds (gateway.lychgate.dev/v1alpha1): TrafficPolicy and GatewayExtension.

Field names follow kgateway's CRDs (`spec.targetRefs`, `spec.targetSelectors`,
`spec.extAuth.extensionRef`, `spec.transformation.request`, GatewayExtension
`spec.extAuth.grpcService.backendRef`, ...) so manifests written for kgateway
load unchanged. Only the shape is checked here; what a value means (a duration,
a template, a reference) is checked by translation, which reports problems on
the policy's status with the field path instead of rejecting the object.

Every field is typed. The one kgateway field lychgate does not implement yet
(`ai`, api/ai.py, which comes with the AI gateway) loads and is reported as
unsupported on the status, so a policy that uses it never says Accepted while
doing nothing.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator
from pydantic.json_schema import JsonDict

from lychgate.api.ai import AIPolicy
from lychgate.api.auth import (
    ACLPolicy,
    APIKeyAuth,
    Authorization,
    BasicAuthPolicy,
    CSRFPolicy,
    JWTAuth,
    JWTProvider,
    JWTProviders,
    NamedJWTProvider,
    NamespacedObjectReference,
    OAuth2Policy,
    OAuth2Provider,
    PolicyDisable,
)
from lychgate.api.base import Model, Resource, renamed
from lychgate.api.direct_response import DirectResponseSpec
from lychgate.api.gateway import BackendRef
from lychgate.api.headers import EnvoyHeaderName, HTTPHeaderName, HTTPHeaderValue
from lychgate.api.lychgate import GROUP
from lychgate.api.rate_limit import GlobalRateLimitPolicy
from lychgate.api.rules import CEL, at_least_one_of, duration_rules, exactly_one_of, field_rules
from lychgate.api.status import ConditionsStatus, PolicyStatus
from lychgate.api.trace_attributes import CustomAttribute

# --- targets -------------------------------------------------------------------


class LocalPolicyTargetReference(Model):
    """`spec.targetRefs[]`: an object in the policy's namespace, optionally one section."""

    group: str = "gateway.networking.k8s.io"
    kind: str
    name: str = Field(min_length=1)
    section_name: str | None = None


class LocalPolicyTargetSelector(Model):
    """`spec.targetSelectors[]`: objects of a kind in the policy's namespace, by labels."""

    group: str = "gateway.networking.k8s.io"
    kind: str
    match_labels: dict[str, str] = Field(default_factory=dict)
    section_name: str | None = None


class FilterStageSpec(Model):
    """Where in the HTTP filter chain a filter goes: a well-known stage and before, during or after it."""

    stage: Literal["Fault", "AuthN", "AuthZ", "RateLimit", "Route"]
    predicate: Literal["Before", "During", "After"] = "During"
    weight: int = 0


# --- extAuth / extProc (TrafficPolicy side) -------------------------------------------


class ExtAuthBufferSettings(Model):
    max_request_bytes: int = Field(ge=1)
    allow_partial_message: bool = False
    pack_as_bytes: bool = False


class ExtAuthPolicy(Model):
    extension_ref: NamespacedObjectReference | None = None
    with_request_body: ExtAuthBufferSettings | None = None
    context_extensions: dict[str, str] = Field(default_factory=dict)
    disable: PolicyDisable | None = None


HeaderSendMode = Literal["DEFAULT", "SEND", "SKIP"]
BodySendMode = Literal["NONE", "STREAMED", "BUFFERED", "BUFFERED_PARTIAL", "FULL_DUPLEX_STREAMED"]


class ProcessingMode(Model):
    request_header_mode: HeaderSendMode | None = None
    response_header_mode: HeaderSendMode | None = None
    request_body_mode: BodySendMode | None = None
    response_body_mode: BodySendMode | None = None
    request_trailer_mode: HeaderSendMode | None = None
    response_trailer_mode: HeaderSendMode | None = None


class ExtProcPolicy(Model):
    extension_ref: NamespacedObjectReference | None = None
    processing_mode: ProcessingMode | None = None
    disable: PolicyDisable | None = None


# --- transformation ------------------------------------------------------------------


class HeaderTransformation(Model):
    name: EnvoyHeaderName
    value: str = ""  # an Inja template: free, as in kgateway


class BodyTransformation(Model):
    parse_as: Literal["AsString", "AsJson", "None"] = "AsString"
    value: str | None = None


class DynamicMetadataValue(Model):
    string_value: str = Field(min_length=1)


class DynamicMetadataTransformation(Model):
    namespace: str = Field(min_length=1, max_length=256)
    key: str = Field(min_length=1, max_length=256)
    value: DynamicMetadataValue


class Transform(Model):
    set: list[HeaderTransformation] = Field(default_factory=list, max_length=16)
    add: list[HeaderTransformation] = Field(default_factory=list, max_length=16)
    remove: list[str] = Field(default_factory=list, max_length=16)
    body: BodyTransformation | None = None
    dynamic_metadata: list[DynamicMetadataTransformation] = Field(default_factory=list, max_length=16)


class TransformationPolicy(Model):
    request: Transform | None = None
    response: Transform | None = None


# --- rate limit, CORS, headers, buffer, timeouts, retry ---------------------------------------


class TokenBucket(Model):
    max_tokens: int = Field(ge=1)
    tokens_per_fill: int = Field(1, ge=1)
    fill_interval: str = Field(json_schema_extra=field_rules(
        *duration_rules("translate/policies/rate_limit.py", minimum="50ms")))


class LocalRateLimitPolicy(Model):
    token_bucket: TokenBucket | None = None
    # Of the requests, how many the filter counts (enabled) and how many over the limit
    # it refuses (enforced); percentEnforced 0 is shadow mode: counted, never refused.
    percent_enabled: int | None = Field(None, ge=0, le=100)
    percent_enforced: int | None = Field(None, ge=0, le=100)
    # kgateway: the bucket is the Gateway's, divided evenly among its proxy replicas
    # (Envoy's local_cluster_rate_limit over the local cluster, xds/replicas.py).
    share_across_gateway: bool | None = None


class RateLimitQuotaBucketEntry(Model):
    """One part of a quota bucket's id: a fixed value (Generic) or a request header's (Header)."""

    key: str = Field(min_length=1)
    type: Literal["Generic", "Header"]
    value: str | None = Field(None, min_length=1)
    header: str | None = Field(None, min_length=1)


class RateLimitQuotaExpiredAssignmentBehavior(Model):
    strategy: Literal["Allow", "Deny", "ReuseLast"] = "Allow"
    timeout: str


class RateLimitQuotaPolicy(Model):
    """`rateLimit.quota`: buckets whose quota a RateLimitQuota GatewayExtension's server assigns
    (Envoy's rate_limit_quota filter speaking envoy.service.rate_limit_quota.v3)."""

    extension_ref: NamespacedObjectReference
    bucket: list[RateLimitQuotaBucketEntry] = Field(min_length=1, max_length=16)
    reporting_interval: str | None = None
    no_assignment_behavior: Literal["Allow", "Deny"] | None = None
    expired_assignment_behavior: RateLimitQuotaExpiredAssignmentBehavior | None = None
    deny_status: int | None = Field(None, ge=400, le=599)


class RateLimit(Model):
    local: LocalRateLimitPolicy | None = None
    global_: GlobalRateLimitPolicy | None = Field(None, alias="global")
    quota: RateLimitQuotaPolicy | None = None


class CorsPolicy(Model):
    """The Gateway API HTTPCORSFilter fields, plus `disable`."""

    allow_origins: list[str] = Field(default_factory=list, max_length=64)
    allow_credentials: bool | None = None
    allow_methods: list[str] = Field(default_factory=list, max_length=9)
    allow_headers: list[HTTPHeaderName] = Field(default_factory=list, max_length=64)
    expose_headers: list[HTTPHeaderName] = Field(default_factory=list, max_length=64)
    max_age: int | None = Field(None, ge=1)
    disable: PolicyDisable | None = None


class SecretRefWithKey(Model):
    name: str = Field(min_length=1)
    key: str | None = Field(None, min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")
    namespace: str | None = None


class PolicyHTTPHeader(Model):
    """A header and its value, written inline or read from a Secret (`secretRef`)."""

    name: HTTPHeaderName | None = None
    value: HTTPHeaderValue | None = None
    secret_ref: SecretRefWithKey | None = None

    RULES = (exactly_one_of("value", "secret_ref"),)

    @model_validator(mode="after")
    def _source(self) -> PolicyHTTPHeader:
        if self.value is not None and self.name is None:
            raise ValueError("name is required when using an inline value")
        return self


class PolicyHeaderFilter(Model):
    set: list[PolicyHTTPHeader] = Field(default_factory=list, max_length=16)
    add: list[PolicyHTTPHeader] = Field(default_factory=list, max_length=16)
    remove: list[str] = Field(default_factory=list, max_length=16)


class SecretObjectRef(Model):
    name: str = Field(min_length=1)
    namespace: str | None = None


class SecretHeaderMapping(Model):
    """One header set from one key of a Secret (kgateway's earlier `*HeadersFromSecret` shape)."""

    secret_ref: SecretObjectRef
    header: HTTPHeaderName
    key: str = Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")


class HeaderModifiers(Model):
    request: PolicyHeaderFilter | None = None
    response: PolicyHeaderFilter | None = None
    # kgateway's earlier shape of a header from a Secret; the same as a `set` entry
    # with a secretRef, which is the newer (and documented) way.
    request_headers_from_secret: list[SecretHeaderMapping] = Field(default_factory=list, max_length=16)
    response_headers_from_secret: list[SecretHeaderMapping] = Field(default_factory=list, max_length=16)
    filter_stage: FilterStageSpec | None = None


class Buffer(Model):
    RULES = (exactly_one_of("max_request_size", "disable", checked_by="translate/policies/buffer.py"),)

    # kgateway's rule: its quantity() needs the API server's quantity library (Kubernetes 1.29+).
    max_request_size: int | str | None = Field(None, json_schema_extra=field_rules(CEL(
        "(type(self) == int && int(self) > 0 && int(self) < 4294967296) || (type(self) == string && "
        "quantity(self).isGreaterThan(quantity('0')) && quantity(self).isLessThan(quantity('4Gi')))",
        "maxRequestSize must be greater than 0 and less than 4Gi", "translate/policies/buffer.py")))
    disable: PolicyDisable | None = None
    filter_stage: FilterStageSpec | None = None


class Timeouts(Model):
    request: str | None = None
    stream_idle: str | None = None


# kgateway's RetryOnCondition enum (retries.go); translate/policies/timeouts.py refuses the others.
RETRY_ON = ["5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "envoy-ratelimited",
            "retriable-4xx", "refused-stream", "retriable-status-codes", "http3-post-connect-failure", "cancelled",
            "deadline-exceeded", "internal", "resource-exhausted", "unavailable"]


class Retry(Model):
    RULES = (CEL("has(self.retryOn) || has(self.statusCodes)", "retryOn or statusCodes must be set.",
                 "translate/policies/timeouts.py"),)

    retry_on: list[str] = Field(default_factory=list, min_length=1, json_schema_extra=field_rules(
        items={"type": "string", "enum": RETRY_ON}))
    attempts: int = Field(1, ge=0)
    per_try_timeout: str | None = None
    status_codes: list[int] = Field(default_factory=list, min_length=1, json_schema_extra=field_rules(
        items={"type": "integer", "minimum": 400, "maximum": 599}))
    backoff_base_interval: str | None = None
    retry_host_predicates: list[Literal["PreviousHosts", "OmitCanaryHosts"]] = Field(default_factory=list)
    rate_limited_back_off: RateLimitedRetryBackOff | None = None


class ResetHeader(Model):
    name: str = Field(min_length=1, max_length=256)
    format: Literal["Seconds", "UnixTimestamp"]


class RateLimitedRetryBackOff(Model):
    """Back-off for retries on `envoy-ratelimited`, read from the response's reset headers."""

    reset_headers: list[ResetHeader] = Field(min_length=1)
    max_interval: str | None = None


class InternalRedirect(Model):
    """Follow the backend's 3xx inside the gateway; the client sees the final answer."""

    redirect_response_codes: list[Literal[301, 302, 303, 307, 308]] = Field(
        default_factory=list, max_length=5)
    allow_cross_scheme_redirect: bool | None = None
    response_headers_to_copy: list[HTTPHeaderName] = Field(default_factory=list, max_length=16)
    max_redirects: int | None = Field(None, ge=1)


class FaultDelay(Model):
    fixed_delay: str = Field(json_schema_extra=field_rules(
        *duration_rules("translate/policies/fault_injection.py", minimum="1ms", maximum="1h")))
    percentage: int = Field(100, ge=0, le=100)


class FaultAbort(Model):
    http_status: int | None = Field(None, ge=200, le=599)
    grpc_status: int | None = Field(None, ge=0, le=16)
    percentage: int = Field(100, ge=0, le=100)

    RULES = (exactly_one_of("http_status", "grpc_status"),)


class FaultResponseRateLimit(Model):
    kbits_per_second: int = Field(ge=1)
    percentage: int = Field(100, ge=0, le=100)


class FaultInjectionPolicy(Model):
    """Delays, aborts and slow responses for resilience testing (Envoy's fault filter)."""

    delay: FaultDelay | None = None
    abort: FaultAbort | None = None
    response_rate_limit: FaultResponseRateLimit | None = None
    max_active_faults: int | None = Field(None, ge=0)
    disable: PolicyDisable | None = None

    RULES = (at_least_one_of("delay", "abort", "response_rate_limit", "disable"),)


class PathRegexRewrite(Model):
    pattern: str = Field(min_length=1, max_length=1024)
    substitution: str = Field(min_length=1, max_length=1024)


class URLRewrite(Model):
    """`urlRewrite`: the path rewritten by a regular expression (RE2)."""

    path_regex: PathRegexRewrite


CompressionLibrary = Literal["Gzip", "Brotli", "Zstd"]


class ResponseCompression(Model):
    libraries: list[CompressionLibrary] = Field(default_factory=list, max_length=3)  # default: [Gzip]
    min_content_length_bytes: int | None = Field(None, ge=0)
    content_types: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        default_factory=list, max_length=50)
    disable: PolicyDisable | None = None


class RequestDecompression(Model):
    libraries: list[CompressionLibrary] = Field(default_factory=list, max_length=3)  # default: [Gzip]
    disable: PolicyDisable | None = None


class Compression(Model):
    """`compression`: responses compressed for clients that accept it (gzip, brotli,
    zstd as negotiated), request bodies decompressed."""

    response_compression: ResponseCompression | None = None
    request_decompression: RequestDecompression | None = None

    RULES = (at_least_one_of("response_compression", "request_decompression"),)


class HTTPUpgradeConnect(Model):
    terminate: bool | None = None  # Envoy ends the CONNECT tunnel and sends its payload on


class HTTPUpgrade(Model):
    """`httpUpgrade[]`: an upgrade (websocket, CONNECT, ...) the routes accept."""

    type: str = Field(min_length=1, max_length=64)
    connect: HTTPUpgradeConnect | None = None


class RouteTracing(Model):
    """`tracing`: per-route overrides of the listener's tracing (ListenerPolicy
    `httpSettings.tracing` names the collector; without one these change nothing)."""

    client_sampling: int | None = Field(None, ge=0, le=100)
    random_sampling: int | None = Field(None, ge=0, le=100)
    overall_sampling: int | None = Field(None, ge=0, le=100)
    attributes: list[CustomAttribute] = Field(default_factory=list, max_length=16)
    disable: PolicyDisable | None = None

    @model_validator(mode="after")
    def _disable_alone(self) -> RouteTracing:
        if self.disable is not None and (self.client_sampling is not None or self.random_sampling is not None
                                         or self.overall_sampling is not None or self.attributes):
            raise ValueError("disable is mutually exclusive with other tracing fields")
        return self


# `{{ route_name }}`, `{{ route_namespace }}`, `{{ rule_name }}` and stat-safe characters.
STAT_PREFIX_PATTERN = r"^([a-zA-Z0-9_%.-]|\{\{\s*(route_name|route_namespace|rule_name)\s*\}\})+$"


class RequestMirrorPolicy(Model):
    """`requestMirror`: how the copies of the route's RequestMirror filters carry the Host."""

    disable_shadow_host_suffix_append: bool | None = None
    host_rewrite_literal: str | None = Field(None, min_length=1, max_length=255)

    RULES = (at_least_one_of("disable_shadow_host_suffix_append", "host_rewrite_literal"),)


# Fields kgateway renamed: (newer, older). Both are accepted (read as the newer); both at once is refused.
RENAMED_FIELDS = (("api_key_auth", "api_key_authentication"), ("acl", "http_acl"), ("jwt_auth", "jwt"))


def _target_kinds(field: str) -> JsonDict:
    # kgateway's rule; translate/policies/attachment.py refuses the other kinds with a status.
    return field_rules(CEL("self.all(r, (r.kind == 'Gateway' || r.kind == 'HTTPRoute' || r.kind == 'GRPCRoute' "
                           "|| r.kind.endsWith('ListenerSet')))",
                           f"{field} may only reference Gateway, HTTPRoute, GRPCRoute, or ListenerSet resources",
                           "translate/policies/attachment.py"))


def _only_with(field: str, *kinds: str) -> CEL:
    """kgateway's rule: `field` only in a policy whose targets are all of `kinds`;
    translate/policies/attachment.py refuses the others (each field's target_kinds)."""
    kind = " || ".join(f"r.kind == '{k}'" for k in kinds)
    return CEL(f"!has(self.{field}) || ((!has(self.targetRefs) || self.targetRefs.all(r, {kind})) && "
               f"(!has(self.targetSelectors) || self.targetSelectors.all(r, {kind})))",
               f"{field} can only be used when targeting {' or '.join(kinds)} resources",
               "translate/policies/attachment.py")


class TrafficPolicySpec(Model):
    RULES = (
        _only_with("autoHostRewrite", "HTTPRoute"),
        _only_with("urlRewrite", "HTTPRoute"),
        _only_with("tracing", "HTTPRoute", "GRPCRoute"),
        _only_with("statPrefix", "HTTPRoute", "GRPCRoute"),
        CEL("has(self.retry) && has(self.timeouts) ? (has(self.retry.perTryTimeout) && has(self.timeouts.request) ? "
            "duration(self.retry.perTryTimeout) < duration(self.timeouts.request) : true) : true",
            "retry.perTryTimeout must be less than timeouts.request", "translate/policies/timeouts.py"),
    )

    target_refs: list[LocalPolicyTargetReference] = Field(
        default_factory=list, min_length=1, max_length=16, json_schema_extra=_target_kinds("targetRefs"))
    target_selectors: list[LocalPolicyTargetSelector] = Field(
        default_factory=list, max_length=16, json_schema_extra=_target_kinds("targetSelectors"))
    ext_auth: ExtAuthPolicy | None = None
    ext_proc: ExtProcPolicy | None = None
    transformation: TransformationPolicy | None = None
    rate_limit: RateLimit | None = None
    cors: CorsPolicy | None = None
    header_modifiers: HeaderModifiers | None = None
    buffer: Buffer | None = None
    timeouts: Timeouts | None = None
    retry: Retry | None = None
    jwt_auth: JWTAuth | None = None
    jwt: JWTAuth | None = None  # kgateway's older name of jwtAuth
    basic_auth: BasicAuthPolicy | None = None
    api_key_auth: APIKeyAuth | None = None
    api_key_authentication: APIKeyAuth | None = None  # kgateway's older name of apiKeyAuth
    rbac: Authorization | None = None
    csrf: CSRFPolicy | None = None
    acl: ACLPolicy | None = None
    http_acl: ACLPolicy | None = None  # kgateway's other name of acl
    request_mirror: RequestMirrorPolicy | None = None
    oauth2: OAuth2Policy | None = None
    internal_redirect: InternalRedirect | None = None
    fault_injection: FaultInjectionPolicy | None = None
    url_rewrite: URLRewrite | None = None
    compression: Compression | None = None
    auto_host_rewrite: bool | None = None
    http_upgrade: list[HTTPUpgrade] | None = Field(None, max_length=16)
    tracing: RouteTracing | None = None
    stat_prefix: str | None = Field(None, min_length=1, max_length=256, pattern=STAT_PREFIX_PATTERN)
    direct_response: DirectResponseSpec | None = None
    # kgateway's AI policy: refused as unsupported until the AI gateway is wired in.
    ai: AIPolicy | None = None

    @model_validator(mode="after")
    def _one_name(self) -> TrafficPolicySpec:
        spec = self
        for new, old in RENAMED_FIELDS:
            spec = renamed(spec, new, old)
        return spec


class TrafficPolicy(Resource):
    KIND: ClassVar[str] = "TrafficPolicy"
    STATUS: ClassVar[type[Model] | None] = PolicyStatus
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1alpha1",)
    spec: TrafficPolicySpec = Field(default_factory=TrafficPolicySpec)


# --- GatewayExtension ----------------------------------------------------------------


EXTENSIONS = "translate/policies/extensions.py"


class RetryBackoff(Model):
    RULES = (CEL("has(self.maxInterval) ? duration(self.maxInterval) >= duration(self.baseInterval) : true",
                 "maxInterval must be greater than or equal to baseInterval", EXTENSIONS),)

    base_interval: str = Field(json_schema_extra=field_rules(
        *duration_rules(EXTENSIONS, minimum="1ms", name="retry.BaseInterval")))
    max_interval: str | None = Field(None, json_schema_extra=field_rules(*duration_rules(EXTENSIONS)))


class ExtSvcRetryPolicy(Model):
    """Retries of the calls to an extension's service (kgateway `ExtSvcRetryPolicy`)."""

    attempts: int = Field(1, ge=0)
    backoff: RetryBackoff | None = None


_timeout = field_rules(*duration_rules(EXTENSIONS, minimum="1ms", name="timeout"))


class ExtGrpcService(Model):
    backend_ref: BackendRef
    authority: str | None = None
    request_timeout: str | None = Field(None, json_schema_extra=_timeout)
    retry: ExtSvcRetryPolicy | None = None


class AuthorizationRequest(Model):
    # header name -> value (Envoy format specifiers allowed), sent to the auth service
    headers_to_add: dict[str, str] = Field(default_factory=dict)


class AuthorizationResponse(Model):
    headers_to_backend: list[str] = Field(default_factory=list)
    headers_to_client: list[str] = Field(default_factory=list)  # on denial
    headers_to_client_on_success: list[str] = Field(default_factory=list)


class ExtHttpService(Model):
    backend_ref: BackendRef
    path_prefix: str | None = None
    request_timeout: str | None = Field(None, json_schema_extra=_timeout)
    authorization_request: AuthorizationRequest | None = None
    authorization_response: AuthorizationResponse | None = None
    retry: ExtSvcRetryPolicy | None = None


class ExtAuthProvider(Model):
    grpc_service: ExtGrpcService | None = None
    http_service: ExtHttpService | None = None
    headers_to_forward: list[str] = Field(default_factory=list)
    fail_open: bool = False
    clear_route_cache: bool = False
    with_request_body: ExtAuthBufferSettings | None = None
    status_on_error: int = Field(403, ge=100, le=511)
    stat_prefix: str | None = Field(None, min_length=1)
    percentage_enabled: int | None = Field(None, ge=0, le=100)


class MetadataNamespaces(Model):
    typed: list[str] = Field(default_factory=list)
    untyped: list[str] = Field(default_factory=list)


class ReceivingNamespaces(Model):
    """Envoy takes only untyped dynamic metadata back from an ext_proc server."""

    untyped: list[str] = Field(default_factory=list)


class MetadataOptions(Model):
    forwarding: MetadataNamespaces | None = None
    receiving: ReceivingNamespaces | None = None


class ExtProcProvider(Model):
    grpc_service: ExtGrpcService
    fail_open: bool = True
    processing_mode: ProcessingMode | None = None
    allow_processing_mode_override: bool = False
    allowed_processing_mode_overrides: list[ProcessingMode] = Field(default_factory=list)
    message_timeout: str | None = None
    max_message_timeout: str | None = None
    stat_prefix: str | None = Field(None, min_length=1)
    route_cache_action: Literal["FromResponse", "Clear", "Retain"] = "FromResponse"
    metadata_options: MetadataOptions | None = None
    request_attributes: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list, max_length=64)
    filter_stage: FilterStageSpec | None = None


class RateLimitProvider(Model):
    """A service speaking Envoy's rate limit protocol (envoy.service.ratelimit.v3)."""

    grpc_service: ExtGrpcService
    domain: str = Field(min_length=1)
    fail_open: bool = True
    timeout: str = Field("100ms", max_length=32, pattern=r"^([0-9]{1,5}(h|m|s|ms)){1,4}$")
    x_rate_limit_headers: Literal["Off", "DraftVersion03"] = Field("Off", alias="xRateLimitHeaders")
    # kgateway 2.5: the share of requests that ask the service, and the share of those its
    # "over limit" refuses (shadow mode: enabled 100, enforced 0). Unset: 100.
    percent_enabled: int | None = Field(None, ge=0, le=100)
    percent_enforced: int | None = Field(None, ge=0, le=100)


class RateLimitQuotaProvider(Model):
    """A rate limit quota server (envoy.service.rate_limit_quota.v3.RateLimitQuotaService)."""

    grpc_service: ExtGrpcService
    domain: str = Field(min_length=1)


# The `type` each field goes with (jwtProviders: the oldest shape of jwt).
_TYPED = (("ExtAuth", "extAuth"), ("ExtProc", "extProc"), ("RateLimit", "rateLimit"),
          ("RateLimitQuota", "rateLimitQuota"), ("OAuth2", "oauth2"))


class GatewayExtensionSpec(Model):
    # kgateway's ExactlyOneOf and type rules (its messages), with lychgate's rateLimitQuota and
    # the oldest jwtProviders; translate/policies/extensions.py refuses the same with a status.
    RULES = (
        exactly_one_of("ext_auth", "ext_proc", "rate_limit", "rate_limit_quota", ("jwt", "jwt_providers"), "oauth2",
                       checked_by=EXTENSIONS),
        *(CEL(f"has(self.type) && self.type == '{t}' ? has(self.{f}) : true", f"{f} must be set when type is {t}",
              EXTENSIONS) for t, f in _TYPED),
        CEL("has(self.type) && (self.type == 'JWT' || self.type == 'JWTProviders') ? "
            "(has(self.jwt) || has(self.jwtProviders)) : true", "JWT must be set when type is JWT", EXTENSIONS),
    )

    # JWTProviders: kgateway's older name of the JWT type (with `jwtProviders` below).
    type: Literal["ExtAuth", "ExtProc", "RateLimit", "RateLimitQuota", "JWT", "JWTProviders", "OAuth2"] | None = None
    ext_auth: ExtAuthProvider | None = None
    ext_proc: ExtProcProvider | None = None
    rate_limit: RateLimitProvider | None = None
    rate_limit_quota: RateLimitQuotaProvider | None = None
    jwt: JWTProviders | None = None
    # kgateway's oldest JWT shape: providers by name, beside `type: JWTProviders`; read as `jwt`.
    jwt_providers: dict[str, JWTProvider] | None = None
    oauth2: OAuth2Provider | None = None

    @model_validator(mode="after")
    def _oldest_jwt_shape(self) -> GatewayExtensionSpec:
        if self.jwt_providers is None:
            return self if self.type != "JWTProviders" else self.model_copy(update={"type": "JWT"})
        if self.jwt is not None:
            raise ValueError("jwt and jwtProviders (its oldest shape) cannot both be set; use jwt")
        # The fields as written: a default (audiences: []) passed on would read as an empty list given.
        providers = [NamedJWTProvider(name=name, **{k: getattr(p, k) for k in p.model_fields_set})
                     for name, p in self.jwt_providers.items()]
        return self.model_copy(update={"jwt": JWTProviders(providers=providers), "jwt_providers": None,
                                       "type": "JWT" if self.type in ("JWT", "JWTProviders") else self.type})


class GatewayExtension(Resource):
    KIND: ClassVar[str] = "GatewayExtension"
    STATUS: ClassVar[type[Model] | None] = ConditionsStatus
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1alpha1",)
    spec: GatewayExtensionSpec = Field(default_factory=GatewayExtensionSpec)


# Groups an ExtensionRef filter may name a TrafficPolicy by: ours, and kgateway's so its
# manifests load unchanged.
POLICY_REF_GROUPS = frozenset({GROUP, "gateway.kgateway.dev"})


def is_policy_ref(group: str, kind: str) -> bool:
    """An HTTPRoute / GRPCRoute ExtensionRef filter that puts a TrafficPolicy on its rule."""
    return kind == TrafficPolicy.KIND and group in POLICY_REF_GROUPS
