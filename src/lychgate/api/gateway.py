"""Gateway API (gateway.networking.k8s.io) kinds that lychgate reads.

Field names, defaults and enums follow the v1.6 CRDs. A field lychgate cannot honour
is refused by name (on load, or in the status where the object is otherwise valid): the
older experimental `backendTLS` and `tls.frontendValidation`, which v1.6 moved to
`spec.tls.backend` and `spec.tls.frontend`, are unknown fields here as for the v1.6 CRDs.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from lychgate.api.base import Model, Resource
from lychgate.api.headers import HTTPHeaderName

GROUP = "gateway.networking.k8s.io"
X_GROUP = "gateway.networking.x-k8s.io"  # experimental kinds (XListenerSet, ...)


class LocalParametersRef(Model):
    group: str
    kind: str
    name: str
    namespace: str | None = None


class GatewayClassSpec(Model):
    controller_name: str
    parameters_ref: LocalParametersRef | None = None
    description: str | None = None


class GatewayClass(Resource):
    KIND: ClassVar[str] = "GatewayClass"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1", "v1beta1")
    NAMESPACED: ClassVar[bool] = False
    spec: GatewayClassSpec


# --- Gateway ---------------------------------------------------------------


class SecretObjectReference(Model):
    group: str = ""
    kind: str = "Secret"
    name: str
    namespace: str | None = None


class GatewayTLSConfig(Model):
    mode: Literal["Terminate", "Passthrough"] = "Terminate"
    certificate_refs: list[SecretObjectReference] = Field(default_factory=list)
    options: dict[str, str] = Field(default_factory=dict)


class LabelSelector(Model):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class LabelSelectorRequirement(Model):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class RouteNamespaces(Model):
    from_: Literal["All", "Same", "Selector", "None"] = Field("Same", alias="from")
    selector: LabelSelector | None = None


class RouteGroupKind(Model):
    group: str = GROUP
    kind: str


class AllowedRoutes(Model):
    namespaces: RouteNamespaces = Field(default_factory=RouteNamespaces)
    kinds: list[RouteGroupKind] = Field(default_factory=list)


class Listener(Model):
    name: str = Field(min_length=1, max_length=253)
    hostname: str | None = None
    port: int = Field(ge=1, le=65535)
    protocol: str
    tls: GatewayTLSConfig | None = None
    allowed_routes: AllowedRoutes = Field(default_factory=AllowedRoutes)


class GatewayAddress(Model):
    type: str = "IPAddress"
    value: str | None = None


class GatewayInfrastructure(Model):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    parameters_ref: LocalParametersRef | None = None


class ListenerNamespaces(Model):
    from_: Literal["All", "Same", "Selector", "None"] = Field("None", alias="from")
    selector: LabelSelector | None = None


class AllowedListeners(Model):
    namespaces: ListenerNamespaces = Field(default_factory=ListenerNamespaces)


class ObjectRef(Model):
    group: str = ""
    kind: str
    name: str = Field(min_length=1)
    namespace: str | None = None


class FrontendValidation(Model):
    ca_certificate_refs: list[ObjectRef] = Field(default_factory=list, max_length=8)
    mode: Literal["AllowValidOnly", "AllowInsecureFallback"] = "AllowValidOnly"


class FrontendTLSConfig(Model):
    validation: FrontendValidation | None = None


class PerPortFrontendTLS(Model):
    port: int = Field(ge=1, le=65535)
    tls: FrontendTLSConfig


class FrontendTLS(Model):
    default: FrontendTLSConfig | None = None
    per_port: list[PerPortFrontendTLS] = Field(default_factory=list)


class BackendTLSConfig(Model):
    client_certificate_ref: SecretObjectReference | None = None


class GatewayTLS(Model):
    """Gateway-wide TLS: client certificate validation (frontend) and the client
    certificate the gateway presents to backends (backend)."""

    frontend: FrontendTLS | None = None
    backend: BackendTLSConfig | None = None


class GatewaySpec(Model):
    gateway_class_name: str
    listeners: list[Listener] = Field(min_length=1, max_length=64)
    addresses: list[GatewayAddress] = Field(default_factory=list)
    infrastructure: GatewayInfrastructure | None = None
    tls: GatewayTLS | None = None
    allowed_listeners: AllowedListeners = Field(default_factory=AllowedListeners)


class Gateway(Resource):
    KIND: ClassVar[str] = "Gateway"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1", "v1beta1")
    spec: GatewaySpec


# --- ListenerSet -----------------------------------------------------------


class ListenerSetParentRef(Model):
    group: str = GROUP
    kind: str = "Gateway"
    name: str = Field(min_length=1)
    namespace: str | None = None


class ListenerSetSpec(Model):
    parent_ref: ListenerSetParentRef
    listeners: list[Listener] = Field(min_length=1, max_length=64)


class ListenerSet(Resource):
    """Listeners a Gateway admits from other objects (GEP-1713), so teams can add
    their hostnames and certificates without editing the shared Gateway."""

    KIND: ClassVar[str] = "ListenerSet"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1",)
    spec: ListenerSetSpec


# --- HTTPRoute -------------------------------------------------------------


class ParentReference(Model):
    group: str = GROUP
    kind: str = "Gateway"
    namespace: str | None = None
    name: str
    section_name: str | None = None
    port: int | None = Field(None, ge=1, le=65535)


class PathMatch(Model):
    type: Literal["Exact", "PathPrefix", "RegularExpression"] = "PathPrefix"
    value: str = "/"


class HeaderMatch(Model):
    type: Literal["Exact", "RegularExpression"] = "Exact"
    name: HTTPHeaderName  # Gateway API HTTPHeaderMatch / GRPCHeaderMatch: a token
    value: str


class QueryParamMatch(Model):
    type: Literal["Exact", "RegularExpression"] = "Exact"
    name: str = Field(min_length=1)
    value: str


HTTPMethod = Literal["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]


class HTTPRouteMatch(Model):
    path: PathMatch | None = None
    headers: list[HeaderMatch] = Field(default_factory=list)
    query_params: list[QueryParamMatch] = Field(default_factory=list)
    method: HTTPMethod | None = None


# Gateway API HTTPHeader (also kgateway's ListenerPolicy earlyRequestHeaderModifier): a
# token name; a value of 1 to 4096 characters, unconstrained otherwise as in the Gateway
# API (CR, LF and NUL, which Envoy refuses, are refused by translation, naming the field).
class HTTPHeader(Model):
    name: HTTPHeaderName
    value: str = Field(min_length=1, max_length=4096)


class HeaderModifier(Model):
    set: list[HTTPHeader] = Field(default_factory=list)
    add: list[HTTPHeader] = Field(default_factory=list)
    remove: list[str] = Field(default_factory=list)


class PathModifier(Model):
    type: Literal["ReplaceFullPath", "ReplacePrefixMatch"]
    replace_full_path: str | None = None
    replace_prefix_match: str | None = None


class RequestRedirect(Model):
    scheme: Literal["http", "https"] | None = None
    hostname: str | None = None
    path: PathModifier | None = None
    port: int | None = Field(None, ge=1, le=65535)
    status_code: Literal[301, 302, 303, 307, 308] = 302


class URLRewrite(Model):
    hostname: str | None = None
    path: PathModifier | None = None


class LocalObjectReference(Model):
    group: str
    kind: str
    name: str


class BackendObjectReference(Model):
    group: str = ""
    kind: str = "Service"
    name: str = Field(min_length=1)
    namespace: str | None = None
    port: int | None = Field(None, ge=1, le=65535)


class Fraction(Model):
    numerator: int
    denominator: int = 100


class RequestMirror(Model):
    """Ranges and the percent/fraction exclusivity are checked by the translator,
    so a bad value becomes a condition on the route, not a rejected manifest."""

    backend_ref: BackendObjectReference
    percent: int | None = None
    fraction: Fraction | None = None


class ExternalAuthGRPC(Model):
    allowed_headers: list[str] = Field(default_factory=list, max_length=64)


class ExternalAuthHTTP(Model):
    path: str | None = Field(None, max_length=1024)
    allowed_headers: list[str] = Field(default_factory=list, max_length=64)
    allowed_response_headers: list[str] = Field(default_factory=list, max_length=64)


class ExternalAuthForwardBody(Model):
    max_size: int | None = None


class ExternalAuth(Model):
    """The experimental ExternalAuth filter, typed so the CRD validates it; lychgate does not
    serve it (the rule answers 500 naming it): TrafficPolicy `extAuth` is lychgate's way."""

    backend_ref: BackendObjectReference
    protocol: Literal["HTTP", "GRPC"]
    grpc: ExternalAuthGRPC | None = None
    http: ExternalAuthHTTP | None = None
    forward_body: ExternalAuthForwardBody | None = None


class CORS(Model):
    allow_origins: list[str] = Field(default_factory=list, max_length=64)
    allow_methods: list[str] = Field(default_factory=list, max_length=9)
    allow_headers: list[HTTPHeaderName] = Field(default_factory=list, max_length=64)
    expose_headers: list[HTTPHeaderName] = Field(default_factory=list, max_length=64)
    allow_credentials: bool | None = None
    max_age: int = 5


class HTTPRouteFilter(Model):
    type: Literal[
        "RequestHeaderModifier",
        "ResponseHeaderModifier",
        "RequestMirror",
        "RequestRedirect",
        "URLRewrite",
        "ExtensionRef",
        "CORS",
        "ExternalAuth",
    ]
    request_header_modifier: HeaderModifier | None = None
    response_header_modifier: HeaderModifier | None = None
    request_mirror: RequestMirror | None = None
    request_redirect: RequestRedirect | None = None
    url_rewrite: URLRewrite | None = None
    extension_ref: LocalObjectReference | None = None
    cors: CORS | None = None
    external_auth: ExternalAuth | None = None


class BackendRef(BackendObjectReference):
    weight: int = Field(1, ge=0, le=1_000_000)
    filters: list[HTTPRouteFilter] = Field(default_factory=list)


class HTTPRouteTimeouts(Model):
    request: str | None = None
    backend_request: str | None = None


class HTTPRouteRetry(Model):
    codes: list[int] = Field(default_factory=list)
    attempts: int | None = None
    backoff: str | None = None


class CookieConfig(Model):
    lifetime_type: Literal["Permanent", "Session"] = "Session"


class KgatewayCookie(Model):
    """`cookie: {name, lifetimeType}`, the shape kgateway's own session persistence
    manifests use: read as sessionName and cookieConfig.lifetimeType."""

    name: str | None = Field(None, max_length=128)
    lifetime_type: Literal["Permanent", "Session"] | None = None


class SessionPersistence(Model):
    """GEP-1619 (translate/session_persistence.py)."""

    session_name: str | None = Field(None, max_length=128)
    absolute_timeout: str | None = None
    # In the API before v1.5; Envoy has no idle timeout for a session: refused.
    idle_timeout: str | None = None
    type: Literal["Cookie", "Header"] = "Cookie"
    cookie_config: CookieConfig | None = None
    cookie: KgatewayCookie | None = None

    @model_validator(mode="after")
    def _check(self) -> SessionPersistence:
        if self.cookie_config is not None and self.type != "Cookie":
            raise ValueError("cookieConfig can only be set with type Cookie")
        if self.lifetime == "Permanent" and self.absolute_timeout is None:
            raise ValueError("absoluteTimeout must be specified when cookie lifetimeType is Permanent")
        return self

    @property
    def lifetime(self) -> str:
        if self.cookie_config is not None:
            return self.cookie_config.lifetime_type
        return (self.cookie.lifetime_type if self.cookie else None) or "Session"

    @property
    def name(self) -> str | None:
        return self.session_name or (self.cookie.name if self.cookie else None)


class HTTPRouteRule(Model):
    name: str | None = None
    matches: list[HTTPRouteMatch] = Field(
        default_factory=lambda: [HTTPRouteMatch(path=PathMatch())], max_length=64
    )
    filters: list[HTTPRouteFilter] = Field(default_factory=list)
    backend_refs: list[BackendRef] = Field(default_factory=list)
    timeouts: HTTPRouteTimeouts | None = None
    retry: HTTPRouteRetry | None = None
    session_persistence: SessionPersistence | None = None


class HTTPRouteSpec(Model):
    parent_refs: list[ParentReference] = Field(default_factory=list)
    hostnames: list[str] = Field(default_factory=list)
    rules: list[HTTPRouteRule] = Field(default_factory=lambda: [HTTPRouteRule()], max_length=16)


class HTTPRoute(Resource):
    KIND: ClassVar[str] = "HTTPRoute"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1", "v1beta1")
    spec: HTTPRouteSpec


# --- ReferenceGrant --------------------------------------------------------


class ReferenceGrantFrom(Model):
    group: str
    kind: str
    namespace: str


class ReferenceGrantTo(Model):
    group: str
    kind: str
    name: str | None = None


class ReferenceGrantSpec(Model):
    from_: list[ReferenceGrantFrom] = Field(alias="from", min_length=1)
    to: list[ReferenceGrantTo] = Field(min_length=1)


class ReferenceGrant(Resource):
    KIND: ClassVar[str] = "ReferenceGrant"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1beta1", "v1")
    spec: ReferenceGrantSpec



# --- GRPCRoute -------------------------------------------------------------


class GRPCMethodMatch(Model):
    type: Literal["Exact", "RegularExpression"] = "Exact"
    service: str | None = Field(None, max_length=1024)
    method: str | None = Field(None, max_length=1024)


class GRPCHeaderMatch(Model):
    type: Literal["Exact", "RegularExpression"] = "Exact"
    name: HTTPHeaderName  # Gateway API GRPCHeaderName: the same token pattern
    value: str


class GRPCRouteMatch(Model):
    method: GRPCMethodMatch | None = None
    headers: list[GRPCHeaderMatch] = Field(default_factory=list)


class GRPCRouteFilter(Model):
    type: Literal["ResponseHeaderModifier", "RequestHeaderModifier", "RequestMirror", "ExtensionRef"]
    request_header_modifier: HeaderModifier | None = None
    response_header_modifier: HeaderModifier | None = None
    request_mirror: RequestMirror | None = None  # refused on GRPCRoute (the rule answers 500)
    extension_ref: LocalObjectReference | None = None


class GRPCBackendRef(BackendRef):
    filters: list[GRPCRouteFilter] = Field(default_factory=list)  # type: ignore[assignment]


class GRPCRouteRule(Model):
    name: str | None = None
    matches: list[GRPCRouteMatch] = Field(default_factory=list, max_length=64)
    filters: list[GRPCRouteFilter] = Field(default_factory=list)
    backend_refs: list[GRPCBackendRef] = Field(default_factory=list)
    session_persistence: SessionPersistence | None = None


class GRPCRouteSpec(Model):
    parent_refs: list[ParentReference] = Field(default_factory=list)
    hostnames: list[str] = Field(default_factory=list)
    rules: list[GRPCRouteRule] = Field(default_factory=lambda: [GRPCRouteRule()], max_length=16)


class GRPCRoute(Resource):
    KIND: ClassVar[str] = "GRPCRoute"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1",)
    spec: GRPCRouteSpec


# --- TLSRoute, TCPRoute, UDPRoute (layer 4) ---------------------------------


class L4BackendRef(BackendObjectReference):
    weight: int = Field(1, ge=0, le=1_000_000)


class L4RouteRule(Model):
    name: str | None = None
    backend_refs: list[L4BackendRef] = Field(default_factory=list, max_length=16)


class TLSRouteSpec(Model):
    parent_refs: list[ParentReference] = Field(default_factory=list)
    hostnames: list[str] = Field(default_factory=list)
    rules: list[L4RouteRule] = Field(min_length=1, max_length=1)


class L4RouteSpec(Model):
    parent_refs: list[ParentReference] = Field(default_factory=list)
    rules: list[L4RouteRule] = Field(min_length=1, max_length=1)


class TLSRoute(Resource):
    KIND: ClassVar[str] = "TLSRoute"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1", "v1alpha3", "v1alpha2")
    spec: TLSRouteSpec


class TCPRoute(Resource):
    KIND: ClassVar[str] = "TCPRoute"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1", "v1alpha2")
    spec: L4RouteSpec


class UDPRoute(Resource):
    KIND: ClassVar[str] = "UDPRoute"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1", "v1alpha2")
    spec: L4RouteSpec


# --- BackendTLSPolicy -------------------------------------------------------


class PolicyTargetRef(Model):
    group: str = ""
    kind: str
    name: str = Field(min_length=1)
    section_name: str | None = None


class SubjectAltName(Model):
    type: Literal["Hostname", "URI"]
    hostname: str | None = None
    uri: str | None = None


class BackendTLSValidation(Model):
    ca_certificate_refs: list[LocalObjectReference] = Field(default_factory=list, max_length=8)
    # The API spells CA in capitals, which the camelCase alias generator would not. Any
    # string: a value other than "System" makes the policy not Accepted (reason Invalid), as
    # the API asks, rather than refusing the manifest.
    well_known_ca_certificates: str | None = Field(None, alias="wellKnownCACertificates")
    hostname: str = Field(min_length=1)
    subject_alt_names: list[SubjectAltName] = Field(default_factory=list, max_length=5)


class BackendTLSPolicySpec(Model):
    target_refs: list[PolicyTargetRef] = Field(min_length=1, max_length=16)
    validation: BackendTLSValidation
    options: dict[str, str] = Field(default_factory=dict)


class BackendTLSPolicy(Resource):
    """How the gateway speaks TLS to a Service: the name it asks for (SNI) and how
    it verifies the certificate the Service presents."""

    KIND: ClassVar[str] = "BackendTLSPolicy"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1", "v1alpha3")
    spec: BackendTLSPolicySpec
