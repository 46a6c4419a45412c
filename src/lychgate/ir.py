"""The intermediate representation between Gateway API semantics and Envoy.

Translation resolves everything Kubernetes-shaped (parentRefs, hostnames,
ReferenceGrants, Services) into these plain values; the xDS layer turns them
into Envoy protos without looking at a single Kubernetes object. All values are
frozen and hashable so unchanged parts can be cached by identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lychgate import ir_listener

PathType = Literal["Exact", "PathPrefix", "RegularExpression"]
MatchType = Literal["Exact", "RegularExpression"]


@dataclass(frozen=True)
class StringMatch:
    name: str
    type: MatchType
    value: str


@dataclass(frozen=True)
class Match:
    path_type: PathType = "PathPrefix"
    path: str = "/"
    headers: tuple[StringMatch, ...] = ()
    query_params: tuple[StringMatch, ...] = ()
    method: str | None = None


@dataclass(frozen=True)
class HeaderOps:
    set: tuple[tuple[str, str], ...] = ()
    add: tuple[tuple[str, str], ...] = ()
    remove: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.set or self.add or self.remove)


@dataclass(frozen=True)
class WeightedCluster:
    """One backend of a rule. cluster=None means the backend is invalid: its
    share of traffic gets HTTP 500, as the Gateway API requires."""

    cluster: str | None
    weight: int
    request_headers: HeaderOps = HeaderOps()
    response_headers: HeaderOps = HeaderOps()


@dataclass(frozen=True)
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
class Forward:
    backends: tuple[WeightedCluster, ...]
    timeout_ms: int | None = None  # None: Envoy's default; 0: no timeout
    per_try_timeout_ms: int | None = None
    mirrors: tuple[Mirror, ...] = ()
    retry: Retry | None = None
    # A backend speaks WebSocket (appProtocol kubernetes.io/ws): allow the upgrade.
    websocket: bool = False
    picker: EndpointPicker | None = None  # a backend is an InferencePool


@dataclass(frozen=True)
class DirectResponse:
    status: int
    body: str = ""


@dataclass(frozen=True)
class Redirect:
    scheme: str | None = None
    hostname: str | None = None
    port: int | None = None
    full_path: str | None = None
    prefix_rewrite: str | None = None
    status: int = 302


Action = Forward | DirectResponse | Redirect


@dataclass(frozen=True)
class RouteSource:
    """Where a route came from: used for names, status and debugging."""

    kind: str
    namespace: str
    name: str
    rule: int
    match: int
    rule_name: str | None = None

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


@dataclass(frozen=True)
class ExtProcRoute:
    service: ExtProcService
    processing_mode: ProcessingMode | None = None


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


@dataclass(frozen=True)
class JwtService:
    """One GatewayExtension of type JWT: its providers (OR-ed) and validation mode."""

    name: str  # "namespace/name" of the GatewayExtension
    providers: tuple[JwtProvider, ...]
    allow_missing: bool = False


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


@dataclass(frozen=True)
class OAuth2Route:
    service: OAuth2Service


ExtensionService = ExtAuthService | ExtProcService | JwtService | OAuth2Service


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
TemplatePart = tuple[str, str]
Template = tuple[TemplatePart, ...]


@dataclass(frozen=True)
class MessageTransform:
    set: tuple[tuple[str, Template], ...] = ()
    add: tuple[tuple[str, Template], ...] = ()
    remove: tuple[str, ...] = ()
    body: Template | None = None
    parse_json: bool = False


@dataclass(frozen=True)
class Transformation:
    request: MessageTransform | None = None
    response: MessageTransform | None = None


@dataclass(frozen=True)
class TokenBucket:
    max_tokens: int
    tokens_per_fill: int
    fill_interval_ms: int


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


@dataclass(frozen=True)
class RoutePolicy:
    """What the TrafficPolicies attached to a route make of it (None: not set)."""

    ext_auth: ExtAuthRoute | None = None
    ext_proc: ExtProcRoute | None = None
    jwt_auth: JwtAuthRoute | None = None
    oauth2: OAuth2Route | None = None
    basic_auth: BasicAuth | None = None
    api_key_auth: ApiKeyAuth | None = None
    rbac: Rbac | None = None
    acl: Acl | None = None
    csrf: Csrf | None = None
    transformation: Transformation | None = None
    rate_limit: TokenBucket | None = None
    cors: Cors | None = None
    request_headers: HeaderOps = HeaderOps()
    response_headers: HeaderOps = HeaderOps()
    buffer_max_bytes: int | None = None
    timeout_ms: int | None = None
    stream_idle_timeout_ms: int | None = None
    retry: Retry | None = None
    # "namespace/name" of every TrafficPolicy that contributed, oldest first.
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class VirtualHost:
    name: str
    domains: tuple[str, ...]
    routes: tuple[Route, ...]


@dataclass(frozen=True)
class Certificate:
    """A serving certificate: PEM chain and key, as read from a Secret."""

    chain: str
    key: str


@dataclass(frozen=True)
class DownstreamTLS:
    """TLS the proxy terminates: the certificates a filter chain serves."""

    certificates: tuple[Certificate, ...]
    alpn: tuple[str, ...] = ()
    # Client certificates must be signed by this CA bundle (frontend validation);
    # optional: a client without one (or with an untrusted one) is let in.
    client_ca: str | None = None
    client_optional: bool = False


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
    # Every usable ext auth / ext proc GatewayExtension: each gets a filter in the
    # chain (off by default) whether or not a route uses it yet, so attaching a
    # policy changes only routes and never drains the listener's connections.
    extensions: tuple[ExtensionService, ...] = ()
    # The route-configured policy filters (rate limit, buffer, transformation)
    # are installed, off by default, once any TrafficPolicy exists: from then on
    # policies never change the listener.
    policy_filters: bool = False
    # The endpoint pickers of the InferencePools its routes use: one ext_proc
    # filter each, off by default (translate/inference.py).
    pickers: tuple[EndpointPicker, ...] = ()
    # What ListenerPolicies set on its connection manager (access logs, tracing, ...).
    settings: ir_listener.HTTPSettings | None = None


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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Cluster:
    name: str
    endpoints: tuple[Endpoint, ...]
    # "ws": HTTP/1.1 that may be upgraded to WebSocket (appProtocol kubernetes.io/ws)
    protocol: Literal["http1", "h2c", "ws"] = "http1"
    connect_timeout_ms: int = 5000
    # An InferencePool: the endpoint its picker names wins over load balancing.
    endpoint_override: bool = False
    tls: UpstreamTLS | None = None


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

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"
