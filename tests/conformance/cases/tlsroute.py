"""TLSRoute conformance cases (upstream conformance/tests/tlsroute-*.go)."""

from __future__ import annotations

from typing import Any

from tests.conformance.cases import case
from tests.conformance.conf2_support import (
    ListenerWant,
    expect_tcp,
    expect_tls_refused,
    listeners_match,
    no_accepted_parents,
    route_parent_condition,
    routes_accepted,
    zero_routes,
)
from tests.conformance.features import GATEWAY, REFERENCE_GRANT, TLSROUTE
from tests.conformance.suite import INFRA, Cond, Exp, Ref, Suite

CORE = [GATEWAY, TLSROUTE]
KIND = "TLSRoute"
TERMINATE = "TLSRouteModeTerminate"
MIXED = "TLSRouteModeMixed"
ACCEPTED = Cond("Accepted", "True", "Accepted")
RESOLVED = Cond("ResolvedRefs", "True", "ResolvedRefs")


def t(name: str) -> list[str]:
    return [f"tests/{name}.yaml"]


def terminate_certificate(s: Suite) -> list[dict[str, Any]]:
    """The Secret the Terminate listeners of these manifests reference (upstream's suite
    creates it with the CA whose ConfigMap tls-checks-ca-certificate the client trusts)."""
    return [s.certs.issue(INFRA, "tls-terminate-checks-certificate",
                          ["tls.example.com", "terminate.example.com"])]


def https_via(s: Suite, address: str, host: str, backend: str) -> None:
    """Upstream's MakeTLSRequestAndExpectEventuallyConsistentResponse to a passthrough
    listener: an HTTPS request with SNI `host`, answered by the TLS echo `backend`."""
    s.expect(address, Exp("/", host, scheme="https", sni=host, backend=backend))


@case("TLSRouteHostnameIntersection", CORE, t("tlsroute-hostname-intersection"))
def hostname_intersection(s: Suite) -> None:
    """TLSRoutes should attach to listeners only if they have intersecting hostnames, and should accept requests only for the intersecting hostnames"""
    # Exact listener hostname: only the intersection (abc.example.com) is served.
    gw = "gw-tlsroute-exact-hostname-x-1"
    address = routes_accepted(s, KIND, Ref(gw), "tlsroute-more-specific-wc-hostname-x-1")
    route_parent_condition(s, KIND, "tlsroute-more-specific-wc-hostname-x-1", INFRA, gw, RESOLVED)
    https_via(s, address, "abc.example.com", "tls-backend")
    expect_tls_refused(address, "non.matching.com")
    # Wildcard listener hostnames (more specific, less specific) and no listener hostname.
    for gw, routes, unmatched in (
        ("gw-tlsroute-more-specific-wc-hostname-x-2",
         ("tlsroute-exact-hostname-x-2", "tlsroute-less-specific-wc-hostname-x-2"), "non.matching.com"),
        ("gw-tlsroute-less-specific-wc-hostname-x-3",
         ("tlsroute-exact-hostname-x-3", "tlsroute-more-specific-wc-hostname-x-3"), "non.matching.com"),
        ("gw-tlsroute-empty-hostname-x-4",
         ("tlsroute-exact-hostname-x-4", "tlsroute-less-specific-wc-hostname-x-4"), "non.matching.org"),
    ):
        address = routes_accepted(s, KIND, Ref(gw), *routes)
        for route in routes:
            route_parent_condition(s, KIND, route, INFRA, gw, RESOLVED)
        https_via(s, address, "abc.example.com", "tls-backend")
        https_via(s, address, "other.example.com", "tls-backend-2")
        expect_tls_refused(address, unmatched)


@case("TLSRouteInvalidBackendRefNonexistent", CORE, t("tlsroute-invalid-backendref-nonexistent"))
def invalid_backendref_nonexistent(s: Suite) -> None:
    """A TLSRoute whose only backendRef is a Service that does not exist is Accepted with ResolvedRefs False (BackendNotFound)."""
    gw = "gateway-tlsroute-invalid-backend-ref-nonexistent"
    routes_accepted(s, KIND, Ref(gw), "invalid-backend-ref-nonexistent")
    route_parent_condition(s, KIND, "invalid-backend-ref-nonexistent", INFRA, gw,
                           Cond("ResolvedRefs", "False", "BackendNotFound"))


@case("TLSRouteInvalidBackendRefUnknownKind", CORE, t("tlsroute-invalid-backendref-unknown-kind"))
def invalid_backendref_unknown_kind(s: Suite) -> None:
    """A TLSRoute with a backendRef of an unknown Kind is Accepted with ResolvedRefs False (InvalidKind)."""
    gw = "gateway-tlsroute-invalid-backend-ref-unknown-kind"
    routes_accepted(s, KIND, Ref(gw), "invalid-backend-ref-unknown-kind")
    route_parent_condition(s, KIND, "invalid-backend-ref-unknown-kind", INFRA, gw,
                           Cond("ResolvedRefs", "False", "InvalidKind"))


@case("TLSRouteInvalidNoMatchingListenerHostname", CORE, t("tlsroute-invalid-no-matching-listener-hostname"))
def invalid_no_matching_listener_hostname(s: Suite) -> None:
    """A TLSRoute with a hostname that does not match the Gateway listener hostname should set Accepted=False with Reason=NoMatchingListenerHostname"""
    cond = Cond("Accepted", "False", "NoMatchingListenerHostname")
    route_parent_condition(s, KIND, "tlsroute-hostname-mismatch-1", INFRA, "gateway-tls-exact-hostname", cond)
    route_parent_condition(s, KIND, "tlsroute-hostname-mismatch-2", INFRA, "gateway-tls-wildcard-hostname", cond)
    no_accepted_parents(s, KIND, "tlsroute-hostname-mismatch-1")
    no_accepted_parents(s, KIND, "tlsroute-hostname-mismatch-2")
    zero_routes(s, "gateway-tls-exact-hostname")
    zero_routes(s, "gateway-tls-wildcard-hostname")


@case("TLSRouteInvalidNoMatchingListener", CORE, t("tlsroute-invalid-no-matching-listener"))
def invalid_no_matching_listener(s: Suite) -> None:
    """A TLSRoute should set Accepted=False when attaching to a Gateway with no compatible TLS listener"""
    not_allowed = Cond("Accepted", "False", "NotAllowedByListeners")
    route_parent_condition(s, KIND, "tlsroute-not-allowed-protocol-http", INFRA, "gateway-tlsroute-http-only",
                           not_allowed)
    route_parent_condition(s, KIND, "tlsroute-not-allowed-protocol-https", INFRA, "gateway-tlsroute-https-only",
                           not_allowed)
    route_parent_condition(s, KIND, "tlsroute-no-matching-section-name", INFRA, "gateway-tlsroute-tls-passthrough-only",
                           Cond("Accepted", "False", "NoMatchingParent"))
    for route in ("tlsroute-not-allowed-protocol-http", "tlsroute-not-allowed-protocol-https",
                  "tlsroute-no-matching-section-name"):
        no_accepted_parents(s, KIND, route)
    zero_routes(s, "gateway-tlsroute-http-only")
    zero_routes(s, "gateway-tlsroute-https-only")


@case("TLSRouteInvalidReferenceGrant", [*CORE, REFERENCE_GRANT], t("tlsroute-invalid-reference-grant"))
def invalid_reference_grant(s: Suite) -> None:
    """A TLSRoute with a backendRef in another namespace and no valid ReferenceGrant has ResolvedRefs False (RefNotPermitted)"""
    gw = "gateway-tlsroute-referencegrant"
    routes_accepted(s, KIND, Ref(gw), "gateway-conformance-infra-test")
    route_parent_condition(s, KIND, "gateway-conformance-infra-test", INFRA, gw,
                           Cond("ResolvedRefs", "False", "RefNotPermitted"))


@case("TLSRouteListenerMixedTerminationNotSupported", [*CORE, TERMINATE],
      t("tlsroute-listener-mixed-termination-not-supported"), setup=terminate_certificate)
def listener_mixed_termination_not_supported(s: Suite) -> None:
    """Without mixed termination support, TLS listeners of both modes on one port are not Accepted (ProtocolConflict)"""
    if MIXED in s.supported:  # upstream runs nothing then
        return
    conflict = (Cond("Accepted", "False", "ProtocolConflict"),)
    listeners_match(s, "gateway-tlsroute-mixed-termination-not-supported",
                    [ListenerWant("tls-terminate", conflict), ListenerWant("tls-passthrough", conflict)])


@case("TLSRouteListenerPassthroughSupportedKinds", CORE, t("tlsroute-listener-passthrough-supported-kinds"))
def listener_passthrough_supported_kinds(s: Suite) -> None:
    """A Gateway Listener with TLS mode Passthrough MUST include TLSRoute in SupportedKinds"""
    listeners_match(s, "gateway-tlsroute-passthrough-supported-kind",
                    [ListenerWant("tls-passthrough", (Cond("ResolvedRefs", "False", "InvalidRouteKinds"),), 0,
                                  (KIND,))])


@case("TLSRouteListenerTerminateNotSupported", CORE, t("tlsroute-listener-terminate-not-supported"),
      setup=terminate_certificate)
def listener_terminate_not_supported(s: Suite) -> None:
    """When TLSRoute termination is NOT supported, a Gateway Listener with TLS mode Terminate MUST have Accepted=False with Reason=UnsupportedValue"""
    if TERMINATE in s.supported:  # upstream runs nothing then
        return
    listeners_match(s, "gateway-tlsroute-terminate-unsupported",
                    [ListenerWant("tls-terminate", (Cond("Accepted", "False", "UnsupportedValue"),))])


@case("TLSRouteListenerTerminateSupportedKinds", [*CORE, TERMINATE], t("tlsroute-listener-terminate-supported-kinds"),
      setup=terminate_certificate)
def listener_terminate_supported_kinds(s: Suite) -> None:
    """A Gateway Listener with TLS mode Terminate MUST include TLSRoute in SupportedKinds when termination is supported"""
    listeners_match(s, "gateway-tlsroute-terminate-supported", [ListenerWant("tls-terminate", (ACCEPTED,), 0, (KIND,))])


@case("TLSRouteMixedTerminationSameNamespace", [*CORE, TERMINATE, MIXED], t("tlsroute-mixed-termination-same-namespace"),
      setup=terminate_certificate, provisional=True)
def mixed_termination_same_namespace(s: Suite) -> None:
    """Listeners of both TLS modes on the same port route each TLSRoute correctly"""
    gw = "gateway-tlsroute-mixed-termination"
    address = routes_accepted(s, KIND, Ref(gw), "gateway-conformance-mixed-passthroughroute")
    listeners_match(s, gw, [ListenerWant("tls-terminate", (ACCEPTED,), 1, (KIND,)),
                            ListenerWant("tls-passthrough", (ACCEPTED,), 1, (KIND,))])
    routes_accepted(s, KIND, Ref(gw), "gateway-conformance-mixed-terminateroute")
    expect_tcp(s, address, "tcp-backend", sni="tls.example.com", backend_tls=False)
    expect_tcp(s, address, "tcp-backend", sni="abc.example.com", backend_tls=True, hostname="abc.example.com")


@case("TLSRouteSimpleSameNamespace", CORE, t("tlsroute-simple-same-namespace"))
def simple_same_namespace(s: Suite) -> None:
    """A single TLSRoute in the gateway-conformance-infra namespace attaches to a Gateway in the same namespace"""
    address = routes_accepted(s, KIND, Ref("gateway-tlsroute"), "gateway-conformance-infra-test")
    # Passthrough: the TLS session is the backend's, which sees the client's SNI.
    expect_tcp(s, address, "tcp-backend", sni="abc.example.com", backend_tls=True, hostname="abc.example.com")


@case("TLSRouteTerminateSimpleSameNamespace", [*CORE, TERMINATE], t("tlsroute-terminate-simple-same-namespace"),
      setup=terminate_certificate, provisional=True)
def terminate_simple_same_namespace(s: Suite) -> None:
    """A single TLSRoute in the gateway-conformance-infra namespace attaches to a Gateway using Terminate mode in the same namespace"""
    address = routes_accepted(s, KIND, Ref("gateway-tlsroute-terminate"), "tlsroute-terminated-test")
    # Terminated at the Gateway: the backend speaks plain TCP.
    expect_tcp(s, address, "tcp-backend", sni="tls.example.com", backend_tls=False)
