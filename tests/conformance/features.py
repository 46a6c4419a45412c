"""Gateway API feature names (pkg/features, v1.6.1) and the conformance profiles."""

from __future__ import annotations

from dataclasses import dataclass

GATEWAY = "Gateway"
HTTPROUTE = "HTTPRoute"
GRPCROUTE = "GRPCRoute"
TLSROUTE = "TLSRoute"
TCPROUTE = "TCPRoute"
UDPROUTE = "UDPRoute"
REFERENCE_GRANT = "ReferenceGrant"
MESH = "Mesh"
LISTENER_SET = "ListenerSet"
BACKEND_TLS_POLICY = "BackendTLSPolicy"
MISDIRECTED_REQUESTS = "GatewayHTTPSListenerDetectMisdirectedRequests"

GATEWAY_EXTENDED = (
    "GatewayPort8080", "GatewayStaticAddresses", "GatewayHTTPListenerIsolation",
    "GatewayInfrastructurePropagation", "GatewayAddressEmpty",
    "GatewayFrontendClientCertificateValidation", "GatewayFrontendClientCertificateValidationInsecureFallback",
    "GatewayBackendClientCertificate", LISTENER_SET, MISDIRECTED_REQUESTS,
)
HTTPROUTE_EXTENDED = (
    "HTTPRouteBackendRequestHeaderModification", "HTTPRouteQueryParamMatching", "HTTPRouteMethodMatching",
    "HTTPRouteResponseHeaderModification", "HTTPRoutePortRedirect", "HTTPRouteSchemeRedirect",
    "HTTPRoutePathRedirect", "HTTPRouteHostRewrite", "HTTPRoutePathRewrite", "HTTPRouteRequestMirror",
    "HTTPRouteRequestMultipleMirrors", "HTTPRouteRequestPercentageMirror", "HTTPRouteRequestTimeout",
    "HTTPRouteBackendTimeout", "HTTPRouteParentRefPort", "HTTPRouteBackendProtocolH2C",
    "HTTPRouteBackendProtocolWebSocket", "HTTPRouteDestinationPortMatching", "HTTPRouteNamedRouteRule",
    "HTTPRoute303RedirectStatusCode", "HTTPRoute307RedirectStatusCode", "HTTPRoute308RedirectStatusCode",
    "HTTPRouteCORS", "HTTPRouteRetry", "HTTPRouteRetryBackoff", "HTTPRouteRetryConnectionError",
)
BACKEND_TLS_EXTENDED = (BACKEND_TLS_POLICY, "BackendTLSPolicySANValidation")
TLSROUTE_EXTENDED = ("TLSRouteModeTerminate", "TLSRouteModeMixed")
GRPCROUTE_EXTENDED = ("GRPCRouteNamedRouteRule",)
TCPROUTE_EXTENDED: tuple[str, ...] = ()
UDPROUTE_EXTENDED: tuple[str, ...] = ()


@dataclass(frozen=True)
class Profile:
    name: str
    short: str  # the column of docs/conformance.md
    core: frozenset[str]
    extended: frozenset[str]

    def covers(self, features: tuple[str, ...]) -> bool:
        """A test belongs to a profile when every feature it needs is in it (as upstream)."""
        return all(f in self.core or f in self.extended for f in features)

    def is_core(self, features: tuple[str, ...]) -> bool:
        return all(f in self.core for f in features)


PROFILES = (
    Profile("GATEWAY-HTTP", "HTTP", frozenset({GATEWAY, REFERENCE_GRANT, HTTPROUTE}),
            frozenset(GATEWAY_EXTENDED + HTTPROUTE_EXTENDED + BACKEND_TLS_EXTENDED)),
    Profile("GATEWAY-GRPC", "GRPC", frozenset({GATEWAY, REFERENCE_GRANT, GRPCROUTE}),
            frozenset(GATEWAY_EXTENDED + GRPCROUTE_EXTENDED)),
    Profile("GATEWAY-TLS", "TLS", frozenset({GATEWAY, REFERENCE_GRANT, TLSROUTE}),
            frozenset(GATEWAY_EXTENDED + TLSROUTE_EXTENDED)),
    Profile("GATEWAY-TCP", "TCP", frozenset({GATEWAY, TCPROUTE}), frozenset(GATEWAY_EXTENDED + TCPROUTE_EXTENDED)),
    Profile("GATEWAY-UDP", "UDP", frozenset({GATEWAY, UDPROUTE}), frozenset(GATEWAY_EXTENDED + UDPROUTE_EXTENDED)),
)
