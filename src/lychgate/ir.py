"""The intermediate representation between Gateway API semantics and Envoy.

Translation resolves everything Kubernetes-shaped (parentRefs, hostnames,
ReferenceGrants, Services) into these plain values; the xDS layer turns them
into Envoy protos without looking at a single Kubernetes object. All values are
frozen and hashable so unchanged parts can be cached by identity.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from lychgate import ir_listener

F = TypeVar("F")

PathType = Literal["Exact", "PathPrefix", "RegularExpression"]
MatchType = Literal["Exact", "RegularExpression"]


@dataclass(frozen=True, slots=True)
class StringMatch:
    name: str
    type: MatchType
    value: str


@dataclass(frozen=True, slots=True)
class Match:
    path_type: PathType = "PathPrefix"
    path: str = "/"
    headers: tuple[StringMatch, ...] = ()
    query_params: tuple[StringMatch, ...] = ()
    method: str | None = None


@dataclass(frozen=True, slots=True)
class HeaderOps:
    set: tuple[tuple[str, str], ...] = ()
    add: tuple[tuple[str, str], ...] = ()
    remove: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.set or self.add or self.remove)


# No header changes: one object for the thousands of rules and backends without any.
NO_HEADERS = HeaderOps()


@dataclass(frozen=True, slots=True)
class WeightedCluster:
    """One backend of a rule. cluster=None means the backend is invalid: its
    share of traffic gets HTTP 500, as the Gateway API requires."""

    cluster: str | None
    weight: int
    request_headers: HeaderOps = HeaderOps()
    response_headers: HeaderOps = HeaderOps()
    picker: EndpointPicker | None = None  # the backend is an InferencePool


@dataclass(frozen=True, slots=True)
class Mirror:
    """A copy of each request (or of `numerator` in `denominator` of them) goes
    to `cluster`; its answer is ignored."""

    cluster: str
    numerator: int = 1
    denominator: int = 1


@dataclass(frozen=True)
class EndpointPicker:
    """The endpoint picker (EPP) of an InferencePool: an ext_proc service that
    names, per request, the pool endpoint to use (see translate/inference.py)."""

    pool: str  # "namespace/name" of the InferencePool
    cluster: str  # the EPP Service's cluster
    fail_open: bool  # picker unreachable: any ready endpoint (True) or 503 (False)


@dataclass(frozen=True)
class AwsLambda:
    """An AWS Lambda function a Backend names: Envoy's aws_lambda filter invokes
    it, signing the request (SigV4) with `credentials` or its default chain."""

    arn: str
    host: str  # the Host the request is signed for
    asynchronous: bool = False
    passthrough: bool = False  # payloadTransformMode None: the body as it is
    credentials: tuple[str, str, str | None] | None = None  # access key, secret key, session token


@dataclass(frozen=True)
class SessionPersistence:
    """A route rule's sticky sessions (xds/translator/stateful_session.py): the
    upstream host rides in a cookie or header named `name`; `ttl_s` is the cookie's
    Max-Age (Permanent) or None (a session cookie)."""

    kind: Literal["Cookie", "Header"]
    name: str
    ttl_s: int | None = None


@dataclass(frozen=True, slots=True, weakref_slot=True)  # weakref: shared_forward
class Forward:
    backends: tuple[WeightedCluster, ...]
    timeout_ms: int | None = None  # None: Envoy's default; 0: no timeout
    per_try_timeout_ms: int | None = None
    mirrors: tuple[Mirror, ...] = ()
    retry: Retry | None = None
    # A backend speaks WebSocket (appProtocol kubernetes.io/ws): allow the upgrade.
    websocket: bool = False
    # Consistent-hashing key of the backends' BackendConfigPolicy (ring hash, maglev).
    hash_policies: tuple[HashPolicy, ...] = ()
    aws_lambda: AwsLambda | None = None  # the backend is a Lambda Backend
    session: SessionPersistence | None = None  # the rule's sessionPersistence
    ai: AIRoute | None = None  # the backend is an AI Backend (xds/translator/ai_gateway.py)
    mcp: bool = False  # a backend is an MCP Backend (xds/translator/mcp_gateway.py)
    gcp: bool = False  # a backend is a GCP Backend: an identity token is fetched (xds/translator/gcp_authn.py)

    @property
    def pickers(self) -> tuple[EndpointPicker, ...]:
        """The endpoint pickers of the InferencePool backends, once each."""
        return tuple(dict.fromkeys(b.picker for b in self.backends if b.picker is not None))


class SharedPool(Generic[F]):
    """Equal frozen values as one object while something holds it: a weak pool keyed by the
    value's fields (not by the value, which the key would keep alive for ever)."""

    __slots__ = ("_fields", "_pool")

    def __init__(self, cls: type[F]) -> None:
        self._pool: weakref.WeakValueDictionary[tuple[Any, ...], F] = weakref.WeakValueDictionary()
        self._fields = operator.attrgetter(*(f.name for f in dataclasses.fields(cls)))  # type: ignore[arg-type]

    def __call__(self, value: F) -> F:
        """`value`, or an equal one something holds already."""
        key = self._fields(value)
        try:
            kept = self._pool.get(key)
        except TypeError:  # a field that cannot be hashed: keep it to itself
            return value
        if kept is None:
            self._pool[key] = kept = value
        return kept

    def __len__(self) -> int:
        return len(self._pool)


# Routes to the same backends with the same settings (most of them) share one Forward:
# 5,000 routes held 1.2 MiB of equal ones.
shared_forward = SharedPool(Forward)


@dataclass(frozen=True)
class AIRoute:
    """A rule forwarding to an AI Backend: one attempt per priority group, each failing
    over to the next on 5xx, 429 or no connection."""

    groups: int


@dataclass(frozen=True, slots=True)
class DirectResponse:
    status: int
    body: str = ""
    # A body Envoy formats (DirectResponse bodyFormat): text, or a JSON object as canonical JSON text.
    text_format: str | None = None
    json_format: str | None = None
    content_type: str | None = None


@dataclass(frozen=True, slots=True)
class Redirect:
    scheme: str | None = None
    hostname: str | None = None
    port: int | None = None
    full_path: str | None = None
    prefix_rewrite: str | None = None
    status: int = 302


Action = Forward | DirectResponse | Redirect


@dataclass(frozen=True, slots=True)
class DelegationHop:
    """A parent HTTPRoute rule that handed a rule to a child route, with how its policies
    combine with the child's (kgateway's inherited-policy-priority annotation)."""

    namespace: str
    name: str
    rule: int
    rule_name: str | None
    prefer_parent: bool = False  # the parent's policy fields override the child's
    deep_merge: bool = False  # fields that merge (extAuth, extProc, transformation) combine


@dataclass(frozen=True, slots=True)
class RouteSource:
    """Where a route came from: used for names, status and debugging."""

    kind: str
    namespace: str
    name: str
    rule: int
    match: int
    rule_name: str | None = None
    # The parent HTTPRoute rules that delegated this rule, nearest first (translate/delegation.py)
    delegated_by: tuple[DelegationHop, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.kind.lower()}/{self.namespace}/{self.name}/rule/{self.rule}/match/{self.match}"


# --- policies (TrafficPolicy features resolved for one route) --------------------


@dataclass(frozen=True)
class BodyBuffer:
    """How much of the request body a filter waits for before it decides."""

    max_bytes: int
    allow_partial: bool = False
    pack_as_bytes: bool = False


@dataclass(frozen=True)
class ServiceRetry:
    """Retries of the calls a filter makes to its extension's service."""

    attempts: int
    base_interval_ms: int | None = None
    max_interval_ms: int | None = None


@dataclass(frozen=True)
class ExtAuthService:
    """One GatewayExtension of type ExtAuth: one ext_authz filter in the chain."""

    name: str  # "namespace/name" of the GatewayExtension
    cluster: str
    protocol: Literal["grpc", "http"] = "grpc"
    authority: str | None = None
    timeout_ms: int | None = None
    fail_open: bool = False
    status_on_error: int = 403
    clear_route_cache: bool = False
    headers_to_forward: tuple[str, ...] = ()
    with_request_body: BodyBuffer | None = None
    stat_prefix: str | None = None
    percentage_enabled: int | None = None  # None: every request is checked
    retry: ServiceRetry | None = None
    # HTTP authorization services only
    path_prefix: str | None = None
    headers_to_add: tuple[tuple[str, str], ...] = ()
    allowed_upstream_headers: tuple[str, ...] = ()
    allowed_client_headers: tuple[str, ...] = ()
    allowed_client_headers_on_success: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExtAuthRoute:
    service: ExtAuthService
    context_extensions: tuple[tuple[str, str], ...] = ()
    with_request_body: BodyBuffer | None = None


@dataclass(frozen=True)
class ProcessingMode:
    """ext_proc processing mode; None leaves Envoy's default for that part."""

    request_header: str | None = None
    response_header: str | None = None
    request_body: str | None = None
    response_body: str | None = None
    request_trailer: str | None = None
    response_trailer: str | None = None


@dataclass(frozen=True)
class ExtProcService:
    """One GatewayExtension of type ExtProc: one ext_proc filter in the chain."""

    name: str
    cluster: str
    authority: str | None = None
    timeout_ms: int | None = None
    fail_open: bool = True
    processing_mode: ProcessingMode = ProcessingMode()
    message_timeout_ms: int | None = None
    max_message_timeout_ms: int | None = None
    stat_prefix: str | None = None
    route_cache_action: str = "FromResponse"
    retry: ServiceRetry | None = None
    allow_mode_override: bool = False
    allowed_override_modes: tuple[ProcessingMode, ...] = ()
    forward_typed_metadata: tuple[str, ...] = ()
    forward_untyped_metadata: tuple[str, ...] = ()
    receive_untyped_metadata: tuple[str, ...] = ()
    request_attributes: tuple[str, ...] = ()  # CEL attribute expressions sent with every request
    # filterStage: where its filter sits in the chain (xds/translator/filter_stage.py);
    # kgateway's default is right after authorization.
    stage: tuple[str, str] = ("AuthZ", "After")
    stage_weight: int = 0


@dataclass(frozen=True)
class ExtProcRoute:
    service: ExtProcService
    processing_mode: ProcessingMode | None = None


@dataclass(frozen=True)
class JwksAsyncFetch:
    fast_listener: bool = False
    failed_refetch_ms: int | None = None


@dataclass(frozen=True)
class JwtProvider:
    """One provider of a JWT GatewayExtension (kgateway `jwt.providers[]`)."""

    name: str  # "<extension namespace>/<extension name>/<provider>": unique in a listener
    issuer: str = ""
    audiences: tuple[str, ...] = ()
    header: str | None = None  # where the token is; neither: Authorization: Bearer
    prefix: str | None = None
    query: str | None = None
    claims_to_headers: tuple[tuple[str, str], ...] = ()  # (claim, header)
    forward: bool = False
    local_jwks: str | None = None  # inline JWKS (or PEM)
    remote_url: str | None = None
    remote_cluster: str | None = None
    cache_ms: int | None = None
    fetch_timeout_ms: int | None = None  # remote.timeout (Envoy: 5 s)
    # remote.asyncFetch: keys fetched at start and on a timer (None: on demand)
    async_fetch: JwksAsyncFetch | None = None
    fetch_retry: ServiceRetry | None = None  # remote.retryPolicy: attempts, backoff
    clock_skew_s: int | None = None  # clockSkew (Envoy: 60 s)
    # cache: verified tokens kept, (size, maxTokenSize), None in either: Envoy's default;
    # None: no cache
    cache: tuple[int | None, int | None] | None = None


@dataclass(frozen=True)
class JwtService:
    """One GatewayExtension of type JWT: its providers (OR-ed) and validation mode."""

    name: str  # "namespace/name" of the GatewayExtension
    providers: tuple[JwtProvider, ...]
    allow_missing: bool = False  # AllowMissing: no token passes, a bad one does not
    allow_failed: bool = False  # AllowMissingOrFailed: no token or a bad one passes


@dataclass(frozen=True)
class JwtAuthRoute:
    service: JwtService


@dataclass(frozen=True)
class OAuth2Service:
    """One GatewayExtension of type OAuth2: one oauth2 filter in the chain."""

    name: str  # "namespace/name" of the GatewayExtension
    cluster: str  # where the token endpoint is
    token_endpoint: str
    authorization_endpoint: str
    client_id: str
    client_secret: str = field(repr=False)
    hmac_secret: str = field(repr=False)  # signs the cookies; derived from the client secret
    redirect_uri: str = "%REQ(x-forwarded-proto)%://%REQ(:authority)%/oauth2/redirect"
    redirect_path: str = "/oauth2/redirect"
    logout_path: str = "/logout"
    end_session_endpoint: str | None = None
    scopes: tuple[str, ...] = ("user",)
    forward_access_token: bool = False
    cookie_domain: str | None = None
    access_token_cookie: str | None = None
    id_token_cookie: str | None = None
    same_site: str = "Lax"
    disable_access_token_cookie: bool = False
    disable_id_token_cookie: bool = False
    disable_refresh_token_cookie: bool = False
    deny_redirect_headers: tuple[tuple[str, str, str], ...] = ()  # (name, Exact|RegularExpression, value)
    jwt: OAuth2Jwt | None = None  # `jwt`: the tokens it keeps verified on every request


@dataclass(frozen=True)
class OAuth2Token:
    """How one retrieved token (access or ID) is checked: its cookie, audiences, claims to headers."""

    cookie: str
    audiences: tuple[str, ...] = ()
    claims_to_headers: tuple[tuple[str, str], ...] = ()  # (claim, header)


@dataclass(frozen=True)
class OAuth2Jwt:
    jwks_uri: str
    jwks_cluster: str
    access_token: OAuth2Token | None = None
    id_token: OAuth2Token | None = None


@dataclass(frozen=True)
class OAuth2Route:
    service: OAuth2Service


@dataclass(frozen=True)
class BasicAuth:
    htpasswd: str  # "user:{SHA}base64" lines


@dataclass(frozen=True)
class ApiKeySource:
    header: str | None = None
    query: str | None = None
    cookie: str | None = None


@dataclass(frozen=True)
class ApiKeyAuth:
    credentials: tuple[tuple[str, str], ...]  # (key, client id)
    sources: tuple[ApiKeySource, ...]
    client_id_header: str | None = None
    forward_credential: bool = False


@dataclass(frozen=True)
class Rbac:
    """Allow (or deny) requests that match any expression, within allowed CIDRs;
    blocked CIDRs are denied first."""

    action: Literal["Allow", "Deny"]
    expressions: tuple[str, ...] = ()  # CEL, as the user wrote them
    allowed_cidrs: tuple[str, ...] = ()
    blocked_cidrs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Acl:
    """Client address rules, most specific prefix first (the first match decides)."""

    rules: tuple[tuple[str, bool, str], ...]  # (cidr, allow?, rule name)
    default_allow: bool
    deny_status: int = 403
    deny_headers: tuple[tuple[str, str], ...] = ()
    blocked_by_header: str | None = None  # carries the deciding rule's name on a deny


@dataclass(frozen=True)
class RequestMirror:
    """TrafficPolicy requestMirror: the Host of the copies the route's RequestMirror filters send."""

    keep_host: bool | None = None  # True: no "-shadow" suffix (Envoy's default appends it)
    host: str | None = None  # the copies' Host, replacing the request's


@dataclass(frozen=True)
class OriginMatch:
    kind: Literal["exact", "prefix", "suffix", "contains", "safe_regex"]
    value: str
    ignore_case: bool = False


@dataclass(frozen=True)
class Csrf:
    enabled_percent: int  # requests whose origin is enforced
    shadow_percent: int  # requests whose origin is only checked and counted
    additional_origins: tuple[OriginMatch, ...] = ()


# A template is text with placeholders, compiled to parts:
# ("text", s), ("header", name), ("request_header", name), ("path", ""),
# ("method", ""), ("query", name), ("body", ""), ("field", "a.b.0").
# A compiled transformation template: nested tuples of str/int/float/bool
# (translate/policies/templates.py describes the nodes).
Template = tuple[Any, ...]


@dataclass(frozen=True)
class MessageTransform:
    set: tuple[tuple[str, Template], ...] = ()
    add: tuple[tuple[str, Template], ...] = ()
    remove: tuple[str, ...] = ()
    body: Template | None = None
    parse_as: str = "AsString"  # AsString, AsJson or None (never buffer the body)
    # (namespace, key, template): Envoy dynamic metadata set from a template
    dynamic_metadata: tuple[tuple[str, str, Template], ...] = ()


@dataclass(frozen=True)
class Transformation:
    request: MessageTransform | None = None
    response: MessageTransform | None = None


@dataclass(frozen=True)
class TokenBucket:
    max_tokens: int
    tokens_per_fill: int
    fill_interval_ms: int
    percent_enabled: int = 100
    percent_enforced: int = 100
    # Each proxy holds 1/N of the bucket, N the Gateway's proxies (xds/replicas.py).
    share_across_gateway: bool = False


@dataclass(frozen=True)
class Cors:
    allow_origins: tuple[str, ...] = ()
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age_s: int | None = None
    allow_credentials: bool | None = None


@dataclass(frozen=True)
class Retry:
    retry_on: tuple[str, ...] = ()
    attempts: int = 1
    per_try_timeout_ms: int | None = None
    status_codes: tuple[int, ...] = ()
    backoff_base_ms: int | None = None
    host_predicates: tuple[str, ...] = ()  # "PreviousHosts", "OmitCanaryHosts"
    # On envoy-ratelimited: back off as these response headers say ((name, "Seconds" | "UnixTimestamp")...).
    rate_limited_reset_headers: tuple[tuple[str, str], ...] = ()
    rate_limited_max_interval_ms: int | None = None


@dataclass(frozen=True)
class ResponseCompression:
    libraries: tuple[str, ...] = ("Gzip",)  # offered codecs, negotiated with Accept-Encoding
    min_content_length: int | None = None  # None: Envoy's 30 bytes
    content_types: tuple[str, ...] = ()  # (): the default textual types


@dataclass(frozen=True)
class FaultInjection:
    """Envoy's fault filter for a route; percentages are of requests."""

    delay_ms: int | None = None
    delay_percent: int = 100
    abort_http_status: int | None = None
    abort_grpc_status: int | None = None
    abort_percent: int = 100
    response_kbps: int | None = None
    response_percent: int = 100
    max_active_faults: int | None = None


@dataclass(frozen=True)
class InternalRedirect:
    response_codes: tuple[int, ...] = (302,)
    allow_cross_scheme: bool = False
    headers_to_copy: tuple[str, ...] = ()
    max_redirects: int = 1


@dataclass(frozen=True)
class RateLimitService:
    """One GatewayExtension of type RateLimit: one ratelimit filter in the chain."""

    name: str  # "namespace/name" of the GatewayExtension
    cluster: str
    domain: str
    authority: str | None = None
    timeout_ms: int = 100
    fail_open: bool = True
    x_ratelimit_headers: bool = False
    percent_enabled: int | None = None  # None: Envoy's default, every request
    percent_enforced: int | None = None


@dataclass(frozen=True)
class RateLimitQuotaService:
    """One GatewayExtension of type RateLimitQuota: one rate_limit_quota filter in the chains
    whose routes use it."""

    name: str  # "namespace/name" of the GatewayExtension
    cluster: str
    domain: str
    authority: str | None = None
    timeout_ms: int | None = None
    retry: ServiceRetry | None = None


ExtensionService = (ExtAuthService | ExtProcService | JwtService | OAuth2Service | RateLimitService
                    | RateLimitQuotaService)


# A descriptor entry: ("generic", key, value), ("header", name, ""),
# ("remote_address", "", "") or ("path", "", "").
DescriptorEntry = tuple[str, str, str]


@dataclass(frozen=True)
class GlobalRateLimit:
    service: RateLimitService
    descriptors: tuple[tuple[DescriptorEntry, ...], ...]


@dataclass(frozen=True)
class RouteTracing:
    """TrafficPolicy `tracing`: sampling percentages and span attributes for a route
    (None: the listener's); `disabled` samples nothing."""

    client_sampling: int | None = None
    random_sampling: int | None = None
    overall_sampling: int | None = None
    tags: tuple[ir_listener.TraceTag, ...] = ()
    disabled: bool = False


@dataclass(frozen=True)
class RateLimitQuota:
    """rateLimit.quota: the bucket a route's requests fall in, and how it behaves until
    (and after) the quota server assigns it a quota."""

    service: RateLimitQuotaService
    # (key, "generic", value) or (key, "header", header name), in the policy's order
    bucket: tuple[tuple[str, str, str], ...]
    reporting_interval_ms: int = 5000
    no_assignment: str | None = None  # "Allow" | "Deny"; None: Envoy's default (allow)
    expired: tuple[str, int] | None = None  # (strategy "Allow" | "Deny" | "ReuseLast", timeout ms)
    deny_status: int | None = None  # None: Envoy's 429


@dataclass(frozen=True, slots=True, weakref_slot=True)  # weakref: shared_policy
class RoutePolicy:
    """What the TrafficPolicies attached to a route make of it (None: not set). Slotted: one
    per distinct set of policies, and its 38 fields held a dict of 1.2 KiB each."""

    ext_auth: ExtAuthRoute | None = None
    # One per ExtProc GatewayExtension enabled on the route, each its own filter: several
    # only with policyMerge DeepMerge for extProc (translate/policies/ext_proc.py).
    ext_proc: tuple[ExtProcRoute, ...] = ()
    jwt_auth: JwtAuthRoute | None = None
    oauth2: OAuth2Route | None = None
    basic_auth: BasicAuth | None = None
    api_key_auth: ApiKeyAuth | None = None
    rbac: Rbac | None = None
    acl: Acl | None = None
    csrf: Csrf | None = None
    transformation: Transformation | None = None
    rate_limit: TokenBucket | None = None
    global_rate_limit: GlobalRateLimit | None = None
    rate_limit_quota: RateLimitQuota | None = None
    cors: Cors | None = None
    request_headers: HeaderOps = HeaderOps()
    response_headers: HeaderOps = HeaderOps()
    buffer_max_bytes: int | None = None
    timeout_ms: int | None = None
    stream_idle_timeout_ms: int | None = None
    retry: Retry | None = None
    response_compression: ResponseCompression | None = None  # compression (xds/translator/compression.py)
    request_decompression: tuple[str, ...] = ()  # the codecs ("Gzip", "Brotli", "Zstd") to decompress
    path_regex_rewrite: tuple[str, str] | None = None  # urlRewrite.pathRegex: pattern, substitution
    auto_host_rewrite: bool | None = None
    fault_injection: FaultInjection | None = None  # xds/translator/fault.py
    # headerModifiers.filterStage: the header ops run in a header_mutation filter at
    # (stage, predicate) instead of on the route (xds/translator/header_stage.py).
    header_stage: tuple[str, str] | None = None
    # buffer.filterStage: where the listener's one buffer filter sits (the earliest any
    # route asks for; xds/translator/buffer.py).
    buffer_stage: tuple[str, str] | None = None
    internal_redirect: InternalRedirect | None = None
    # httpUpgrade: (upgrade type, terminate CONNECT) the routes accept (xds/translator/http_upgrade.py)
    http_upgrades: tuple[tuple[str, bool], ...] = ()
    tracing: RouteTracing | None = None  # xds/translator/route_stats.py
    # statPrefix: Envoy's per-route stats prefix; {{ route_name }}, {{ route_namespace }},
    # {{ rule_name }} are filled in per route (xds/translator/route_stats.py).
    stat_prefix: str | None = None
    direct_response: DirectResponse | None = None  # answered instead of forwarding
    request_mirror: RequestMirror | None = None  # xds/translator/request_mirror.py
    ai: str | None = None  # TrafficPolicy `ai`: its settings' id for the AI extension (lychgate.ai.config)


# The route rules under equal policies share one RoutePolicy. A change to any policy resolves
# the rules rebuilt anew: under churn each rule a policy had reached kept its own equal copy.
shared_policy = SharedPool(RoutePolicy)


@dataclass(frozen=True, slots=True)
class Route:
    source: RouteSource
    match: Match
    action: Action
    request_headers: HeaderOps = HeaderOps()
    response_headers: HeaderOps = HeaderOps()
    url_rewrite_host: str | None = None
    url_rewrite_path_full: str | None = None
    url_rewrite_path_prefix: str | None = None
    # The HTTPRoute's own CORS filter; it wins over a TrafficPolicy's.
    cors: Cors | None = None
    # Why the route answers 500 instead of forwarding (standard validation).
    replaced_because: str | None = None
    policy: RoutePolicy | None = None
    # kgateway's route-weight annotation: higher weights sort first in a virtual host.
    weight: int = 0


# Each listener-wide question asked of virtual hosts (xds/translator/host_flags.py) has a
# bit: a host keeps its answers as two small ints instead of a dict of them.
_QUESTION_BITS: dict[Callable[[VirtualHost], bool], int] = {}


class _HostMemo:
    """What a virtual host computes once about itself, in slots beside its fields: not
    dataclass fields, so never compared, hashed, copied by `replace` or shown by `asdict`.
    (A dict per host for these held 550 bytes of each of 5,000 hosts.)"""

    __slots__ = ("_asked", "_policies", "_yes")
    _asked: int  # a bit per question asked
    _yes: int  # a bit per question answered yes
    _policies: tuple[RoutePolicy, ...]


@dataclass(frozen=True, slots=True)
class VirtualHost(_HostMemo):
    name: str
    domains: tuple[str, ...]
    routes: tuple[Route, ...]

    @property
    def policies(self) -> tuple[RoutePolicy, ...]:
        """The distinct policies of its routes (routes under the same policies share one
        object). Kept: most virtual hosts are the same objects pass after pass, so a
        listener's policies are a walk over hosts, not over every route."""
        try:
            return self._policies
        except AttributeError:
            found = tuple({id(p): p for r in self.routes if (p := r.policy) is not None}.values())
            object.__setattr__(self, "_policies", found)
            return found

    def summary(self, question: Callable[[VirtualHost], bool]) -> bool:
        """`question(self)`, computed once per virtual host (for the translator's listener-wide
        questions, such as "does any route invoke a Lambda?"). Questions are module-level
        functions: each gets a bit the first time it is asked."""
        bit = _QUESTION_BITS.get(question)
        if bit is None:
            bit = _QUESTION_BITS[question] = 1 << len(_QUESTION_BITS)
        try:
            asked, yes = self._asked, self._yes
        except AttributeError:
            asked = yes = 0
        if not asked & bit:
            asked |= bit
            if question(self):
                yes |= bit
            object.__setattr__(self, "_asked", asked)
            object.__setattr__(self, "_yes", yes)
        return bool(yes & bit)


@dataclass(frozen=True)
class Certificate:
    """A serving certificate: PEM chain and key, as read from a Secret."""

    chain: str
    key: str


@dataclass(frozen=True)
class TLSParams:
    """Protocol versions ("1.0".."1.3", or "AUTO"; None: Envoy's default) and the cipher suites,
    ECDH curves and signature algorithms offered (empty: Envoy's defaults)."""

    min_version: str | None = None
    max_version: str | None = None
    cipher_suites: tuple[str, ...] = ()
    ecdh_curves: tuple[str, ...] = ()
    signature_algorithms: tuple[str, ...] = ()


@dataclass(frozen=True)
class DownstreamTLS:
    """TLS the proxy terminates: the certificates a filter chain serves."""

    certificates: tuple[Certificate, ...]
    alpn: tuple[str, ...] = ()
    # Client certificates must be signed by this CA bundle (frontend validation);
    # optional: a client without one (or with an untrusted one) is let in.
    client_ca: str | None = None
    client_optional: bool = False
    # A client may present no certificate, but one it presents must be signed by
    # client_ca (a ListenerPolicy's clientCertificateValidation mode Optional).
    client_may_omit: bool = False
    params: TLSParams | None = None
    # A client certificate must carry one of these DNS names / have one of these
    # SHA-256 fingerprints (a listener's verify-* TLS options).
    client_sans: tuple[str, ...] = ()
    client_hashes: tuple[str, ...] = ()


@dataclass(frozen=True)
class HTTPListener:
    """One HTTP connection manager and its RouteConfiguration (named `name`).

    Plain HTTP: every Gateway listener sharing address and port is one of these.
    HTTPS: each Gateway listener is one, a TLS filter chain picked by SNI
    (`server_names`, empty = any name) on the shared port."""

    name: str
    address: str
    port: int
    virtual_hosts: tuple[VirtualHost, ...]
    server_names: tuple[str, ...] = ()
    tls: DownstreamTLS | None = None
    # Once any of its routes has a policy (PolicyIndex.filters_for): every usable ext
    # auth / ext proc GatewayExtension, each a filter in the chain (off by default)
    # whether or not a route uses it yet, so further policies change only routes
    # and never drain the listener's connections.
    extensions: tuple[ExtensionService, ...] = ()
    # Likewise the route-configured policy filters (rate limit, buffer, transformation, ...).
    policy_filters: bool = False
    # The endpoint pickers of the InferencePools its routes use: one ext_proc
    # filter each, off by default (translate/inference.py).
    pickers: tuple[EndpointPicker, ...] = ()
    # What ListenerPolicies set on its connection manager (access logs, tracing, ...).
    settings: ir_listener.HTTPSettings | None = None

    @functools.cached_property
    def route_policies(self) -> tuple[RoutePolicy, ...]:
        """The distinct policies of its routes. Computed once per listener, from each
        virtual host's own (VirtualHost.policies): every policy feature building the
        connection manager asks for it."""
        if not self.policy_filters:
            return ()  # no TrafficPolicy anywhere: no walk at all
        return tuple({id(p): p for vh in self.virtual_hosts for p in vh.policies}.values())


@dataclass(frozen=True)
class TCPListener:
    """A TCP proxy filter chain: TCPRoute, or TLSRoute (passthrough when `tls` is
    None and `server_names` are set; terminated when `tls` is set)."""

    name: str
    address: str
    port: int
    backends: tuple[WeightedCluster, ...]
    server_names: tuple[str, ...] = ()
    tls: DownstreamTLS | None = None
    sni: bool = False  # the port carries TLS: inspect the ClientHello for SNI


@dataclass(frozen=True)
class UDPListener:
    """A UDP proxy: one UDPRoute's backends on a port."""

    name: str
    address: str
    port: int
    backends: tuple[WeightedCluster, ...]


@dataclass(frozen=True, slots=True)
class Endpoint:
    address: str
    port: int
    ready: bool = True
    weight: int = 1


@dataclass(frozen=True)
class UpstreamTLS:
    """TLS to a backend (BackendTLSPolicy): the name asked for, the CA bundle that
    must have signed its certificate (None: the system's) and the names it must carry."""

    sni: str
    ca: str | None
    sans: tuple[tuple[str, str], ...]  # ("Hostname" | "URI", value)
    client_certificate: Certificate | None = None  # the Gateway's, from spec.tls.backend
    # False: encrypted, the certificate not checked (an endpoint picker's self-signed one)
    verify: bool = True
    alpn: tuple[str, ...] = ()  # protocols offered (gRPC servers insist on "h2")
    params: TLSParams | None = None
    hashes: tuple[str, ...] = ()  # the certificate's SHA-256 fingerprint must be one of these


@dataclass(frozen=True)
class HashPolicy:
    """One part of a consistent-hashing key (ring hash, maglev): a header, a
    cookie (generated with `cookie_ttl_ms` when absent: session affinity) or the
    client's address."""

    header: str | None = None
    cookie: str | None = None
    cookie_path: str | None = None
    cookie_ttl_ms: int | None = None
    cookie_attributes: tuple[tuple[str, str], ...] = ()  # ("SameSite", "Lax"), ("Secure", "")...
    source_ip: bool = False
    terminal: bool = False


@dataclass(frozen=True)
class SlowStart:
    window_ms: int | None = None
    aggression: float | None = None
    min_weight_percent: int | None = None


@dataclass(frozen=True)
class LoadBalancing:
    algorithm: Literal["least_request", "round_robin", "ring_hash", "maglev", "random"]
    choice_count: int | None = None
    slow_start: SlowStart | None = None
    ring_min: int | None = None
    ring_max: int | None = None
    use_hostname_for_hashing: bool = False
    healthy_panic_threshold: int | None = None
    update_merge_window_ms: int | None = None
    locality_weighted: bool = False
    close_connections_on_host_set_change: bool = False


@dataclass(frozen=True)
class HealthCheck:
    """Active health checking; exactly one of http_path, grpc or tcp is used."""

    timeout_ms: int
    interval_ms: int
    unhealthy_threshold: int
    healthy_threshold: int
    http_path: str | None = None
    http_host: str | None = None
    http_method: str | None = None
    grpc: bool = False
    grpc_service: str | None = None
    grpc_authority: str | None = None
    tcp: bool = False
    tcp_send: str | None = None  # hex
    tcp_receive: tuple[str, ...] = ()


@dataclass(frozen=True)
class OutlierDetection:
    consecutive_5xx: int | None = None
    enforcing_consecutive_5xx: int | None = None
    split_external_local_origin_errors: bool = False
    consecutive_local_origin_failure: int | None = None
    enforcing_consecutive_local_origin_failure: int | None = None
    interval_ms: int | None = None
    base_ejection_time_ms: int | None = None
    max_ejection_percent: int | None = None


@dataclass(frozen=True)
class CircuitBreakers:
    max_connections: int | None = None
    max_pending_requests: int | None = None
    max_requests: int | None = None
    max_retries: int | None = None
    track_remaining: bool = False


@dataclass(frozen=True)
class BackendTLS:
    """TLS origination of a BackendConfigPolicy (a BackendTLSPolicy wins over it)."""

    sni: str | None = None
    ca: str | None = None  # PEM; with neither ca nor ca_file, the system CAs verify unless insecure
    ca_file: str | None = None
    system_ca: bool = False
    insecure: bool = False
    certificate: Certificate | None = None  # client certificate (mTLS)
    certificate_files: tuple[str, str] | None = None
    sans: tuple[str, ...] = ()
    min_version: str | None = None
    max_version: str | None = None
    cipher_suites: tuple[str, ...] = ()
    ecdh_curves: tuple[str, ...] = ()
    signature_algorithms: tuple[str, ...] = ()
    alpn: tuple[str, ...] = ()
    allow_renegotiation: bool = False


@dataclass(frozen=True)
class BackendConfig:
    """A BackendConfigPolicy (or several, merged) resolved for one cluster
    (translate/backend_config.py; xds/translator/cluster_policy.py). None: Envoy's default."""

    connect_timeout_ms: int | None = None
    per_connection_buffer_limit_bytes: int | None = None
    tcp_keepalive: tuple[int | None, int | None, int | None] | None = None  # probes, time s, interval s
    # HttpProtocolOptions.common_http_protocol_options
    idle_timeout_ms: int | None = None
    max_connection_duration_ms: int | None = None
    max_headers_count: int | None = None
    max_stream_duration_ms: int | None = None
    max_requests_per_connection: int | None = None
    # HTTP/1 options
    http1_enable_trailers: bool | None = None
    http1_preserve_case: bool = False
    http1_override_stream_error: bool | None = None
    # HTTP/2 options (only for backends that speak HTTP/2)
    http2: bool = False
    http2_initial_stream_window: int | None = None
    http2_initial_connection_window: int | None = None
    http2_max_concurrent_streams: int | None = None
    http2_override_stream_error: bool | None = None
    http2_keepalive: tuple[int, int | None, int | None] | None = None  # timeout, interval, idle interval (ms)
    tls: BackendTLS | None = None
    load_balancing: LoadBalancing | None = None
    hash_policies: tuple[HashPolicy, ...] = ()
    health_check: HealthCheck | None = None
    outlier_detection: OutlierDetection | None = None
    circuit_breakers: CircuitBreakers | None = None
    dns_refresh_ms: int | None = None
    dns_jitter_ms: int | None = None
    dns_respect_ttl: bool | None = None
    proxy_protocol: Literal["V1", "V2"] | None = None
    tunnel: TunnelConfig | None = None


@dataclass(frozen=True)
class TunnelConfig:
    """BackendConfigPolicy `tunnel` as the policy says it: which proxy (resolved with the
    backend, translate/references.py) and the CONNECT request's headers."""

    proxy_group: str
    proxy_kind: str
    proxy_namespace: str
    proxy_name: str
    proxy_port: int | None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Tunnel:
    """A cluster reached through an HTTP CONNECT proxy (xds/translator/tunnel.py): Envoy
    connects to an internal listener that opens `CONNECT authority` on `proxy`."""

    proxy: Cluster
    authority: str  # host:port of the destination
    host: str
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Cluster:
    name: str
    endpoints: tuple[Endpoint, ...]
    # "ws": HTTP/1.1 that may be upgraded to WebSocket (appProtocol kubernetes.io/ws)
    protocol: Literal["http1", "h2c", "ws"] = "http1"
    connect_timeout_ms: int = 5000
    # An InferencePool: the endpoint its picker names wins over load balancing.
    endpoint_override: bool = False
    tls: UpstreamTLS | None = None
    config: BackendConfig | None = None  # BackendConfigPolicy
    # Where endpoints come from: EDS (Services), `endpoints` as they are (static
    # addresses), resolved by Envoy's DNS (static host names), or the Host of each
    # request (dynamic forward proxy; `forward_proxy_tls`: TLS to that host), or
    # `priority_groups` (a Backend failing over between other Backends' clusters).
    discovery: Literal["eds", "static", "dns", "forward_proxy", "priority_groups", "ai", "mcp"] = "eds"
    forward_proxy_tls: bool = False
    aws_lambda: AwsLambda | None = None  # a Lambda Backend: routes to it invoke the function
    tunnel: Tunnel | None = None  # BackendConfigPolicy `tunnel`: through a CONNECT proxy
    # Backend `priorityGroups`, first group first; a group's index is its members' priority.
    priority_groups: tuple[tuple[PriorityMember, ...], ...] = ()
    ai_endpoints: tuple[AIEndpoint, ...] = ()  # an AI Backend's providers (discovery "ai")
    # An MCP Backend ("<namespace>/<name>", discovery "mcp"): its one endpoint is the MCP relay.
    mcp_backend: str = ""
    # A GCP Backend: the audience of the identity token its requests carry (translate/gcp.py).
    gcp_audience: str | None = None


@dataclass(frozen=True)
class AIEndpoint:
    """One provider of an AI Backend as Envoy reaches it; its credentials are the AI
    extension's alone (lychgate.ai.config), never in Envoy's configuration."""

    id: str  # the endpoint metadata the extension reads: "<namespace>/<backend>/<provider>"
    host: str
    port: int
    tls: bool
    priority: int  # the priority group


@dataclass(frozen=True)
class PriorityMember:
    """A Backend in a priority group (translate/priority_groups.py): its hosts join the
    group's endpoints, or (`bridged`) one endpoint, an internal listener, forwards to its
    own cluster (xds/translator/priority_groups.py)."""

    cluster: Cluster
    bridged: bool


# --- waypoint (ambient mesh, translate/mesh.py) ------------------------------------


@dataclass(frozen=True)
class WaypointService:
    """One captured Service port: the HBONE CONNECT authorities that reach it, and
    the internal listener (named like the listener's `name`) whose routes apply."""

    authorities: tuple[str, ...]
    listener: HTTPListener


@dataclass(frozen=True)
class Waypoint:
    """The HBONE listener of a waypoint Gateway and the Services it captures."""

    name: str
    address: str
    port: int
    services: tuple[WaypointService, ...] = ()
    tls: DownstreamTLS | None = None  # mTLS: the mesh's certificates, clients checked against its CA


@dataclass(frozen=True)
class GatewayIR:
    """Everything one Gateway's proxy must serve."""

    namespace: str
    name: str
    listeners: tuple[HTTPListener, ...] = ()
    clusters: tuple[Cluster, ...] = field(default=())
    # Layer-4 filter chains; they share Envoy listeners with HTTPS by port.
    streams: tuple[TCPListener | UDPListener, ...] = ()
    waypoint: Waypoint | None = None
    # ListenerPolicy settings of whole Envoy listeners (PROXY protocol, buffer limits), by port.
    ports: tuple[ir_listener.PortSettings, ...] = ()
    # The loopback port of the AI extension its AI Backends' clusters call (lychgate.ai); 0: none.
    ai_extension_port: int = 0
    # The loopback port of the MCP relay its MCP Backends' clusters reach (lychgate.mcp); 0: none.
    mcp_relay_port: int = 0
    # HOST:PORT of the GCE metadata server its GCP Backends' tokens come from; "": none.
    gcp_metadata_server: str = ""

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"
