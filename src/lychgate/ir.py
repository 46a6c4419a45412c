"""The intermediate representation between Gateway API semantics and Envoy.

Translation resolves everything Kubernetes-shaped (parentRefs, hostnames,
ReferenceGrants, Services) into these plain values; the xDS layer turns them
into Envoy protos without looking at a single Kubernetes object. All values are
frozen and hashable so unchanged parts can be cached by identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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
    picker: EndpointPicker | None = None  # the backend is an InferencePool


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

    @property
    def pickers(self) -> tuple[EndpointPicker, ...]:
        """The endpoint pickers of the InferencePool backends, once each."""
        return tuple(dict.fromkeys(b.picker for b in self.backends if b.picker is not None))


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
    # HTTP authorization services only
    path_prefix: str | None = None
    headers_to_add: tuple[tuple[str, str], ...] = ()
    allowed_upstream_headers: tuple[str, ...] = ()
    allowed_client_headers: tuple[str, ...] = ()


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
    route_cache_action: str = "Default"


@dataclass(frozen=True)
class ExtProcRoute:
    service: ExtProcService
    processing_mode: ProcessingMode | None = None


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
    extensions: tuple[ExtAuthService | ExtProcService, ...] = ()
    # The route-configured policy filters (rate limit, buffer, transformation)
    # are installed, off by default, once any TrafficPolicy exists: from then on
    # policies never change the listener.
    policy_filters: bool = False
    # The endpoint pickers of the InferencePools its routes use: one ext_proc
    # filter each, off by default (translate/inference.py).
    pickers: tuple[EndpointPicker, ...] = ()


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
    # False: encrypted, the certificate not checked (an endpoint picker's self-signed one)
    verify: bool = True
    alpn: tuple[str, ...] = ()  # protocols offered (gRPC servers insist on "h2")


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

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"
