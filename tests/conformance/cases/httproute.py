"""HTTPRoute conformance cases (upstream conformance/tests/httproute-*.go)."""

from __future__ import annotations

from tests.conformance.cases import case
from tests.conformance.features import GATEWAY, HTTPROUTE, REFERENCE_GRANT, TLSROUTE
from tests.conformance.suite import (
    APP,
    INFRA,
    WEB,
    Cond,
    Exp,
    Listener,
    Parent,
    Ref,
    Suite,
)

SAME = Ref("same-namespace")
CORE = [GATEWAY, HTTPROUTE]
V1, V2, V3 = "infra-backend-v1", "infra-backend-v2", "infra-backend-v3"


def t(name: str) -> list[str]:
    return [f"tests/{name}.yaml"]


def accepted(s: Suite, *routes: str, ref: Ref = SAME, resolved: bool = True) -> str:
    """The common prologue: Gateway and routes accepted, routes' refs resolved."""
    address = s.routes_accepted(ref, *routes)
    if resolved:
        for route in routes:
            ns, _, name = route.rpartition("/")
            s.resolved_refs(name, ns or INFRA, ref)
    return address


def not_accepted(s: Suite, route: str, ref: Ref, reason: str, namespace: str = INFRA) -> None:
    s.route_condition("HTTPRoute", route, namespace, ref, Cond("Accepted", "False", reason))


# --- core ----------------------------------------------------------------------------


@case("HTTPRouteSimpleSameNamespace", CORE, t("httproute-simple-same-namespace"))
def simple_same_namespace(s: Suite) -> None:
    """A single HTTPRoute in the gateway-conformance-infra namespace attaches to a Gateway in the same namespace"""
    address = accepted(s, "gateway-conformance-infra-test")
    s.expect(address, Exp("/", backend=V1))


@case("HTTPRouteCrossNamespace", CORE, t("httproute-cross-namespace"))
def cross_namespace(s: Suite) -> None:
    """A single HTTPRoute in the gateway-conformance-web-backend namespace should attach to Gateway in another namespace"""
    ref = Ref("backend-namespaces")
    address = s.routes_accepted(ref, f"{WEB}/cross-namespace")
    s.resolved_refs("cross-namespace", WEB, ref)
    s.expect(address, Exp("/", backend="web-backend", namespace=WEB))


@case("HTTPRouteDisallowedKind", [*CORE, TLSROUTE], t("httproute-disallowed-kind"))
def disallowed_kind(s: Suite) -> None:
    """An HTTPRoute fails to attach to a Gateway with no listener that allows the HTTPRoute kind"""
    ref = Ref("tlsroutes-only")
    s.resolved_refs("disallowed-kind", INFRA, ref)
    not_accepted(s, "disallowed-kind", ref, "NotAllowedByListeners")
    s.attached_routes(ref, "tls", 0)


@case("HTTPExactPathMatching", CORE, t("httproute-exact-path-matching"))
def exact_path_matching(s: Suite) -> None:
    """A single HTTPRoute with exact path matching for different backends"""
    address = accepted(s, "exact-matching")
    s.expect(address, Exp("/one", backend=V1), Exp("/two", backend=V2), Exp("/", status=404),
             Exp("/one/example", status=404), Exp("/two/", status=404), Exp("/Two", status=404))


@case("HTTPRouteHeaderMatching", CORE, t("httproute-header-matching"))
def header_matching(s: Suite) -> None:
    """A single HTTPRoute with header matching for different backends"""
    address = accepted(s, "header-matching")
    s.expect(
        address,
        Exp(headers={"Version": "one"}, backend=V1),
        Exp(headers={"Version": "two"}, backend=V2),
        Exp(headers={"Version": "two", "Color": "orange"}, backend=V1),
        Exp(headers={"Version": "two", "Color": "blue"}, backend=V2),
        Exp(headers={"Color": "orange"}, status=404),
        Exp(headers={"Some-Other-Header": "one"}, status=404),
        Exp(headers={"Color": "blue"}, backend=V1),
        Exp(headers={"Color": "green"}, backend=V1),
        Exp(headers={"Color": "red"}, backend=V2),
        Exp(headers={"Color": "yellow"}, backend=V2),
        Exp(headers={"Color": "purple"}, status=404),
    )


@case("HTTPRouteHostnameIntersection", CORE, t("httproute-hostname-intersection"))
def hostname_intersection(s: Suite) -> None:
    """HTTPRoutes attach to listeners only if they have intersecting hostnames, and accept requests only for the intersecting hostnames"""
    ref = Ref("httproute-hostname-intersection")
    routes = ["specific-host-matches-listener-specific-host", "specific-host-matches-listener-wildcard-host",
              "wildcard-host-matches-listener-specific-host", "wildcard-host-matches-listener-wildcard-host"]
    address = accepted(s, *routes, ref=ref)
    s.expect(
        address,
        Exp("/s1", "very.specific.com", backend=V1),
        Exp("/s1", "very.specific.com:1234", backend=V1),
        Exp("/s1", "non.matching.com", status=404),
        Exp("/s1", "foo.nonmatchingwildcard.io", status=404),
        Exp("/s1", "foo.wildcard.io", status=404),
        Exp("/non-matching-prefix", "very.specific.com", status=404),
        Exp("/s2", "foo.wildcard.io", backend=V2),
        Exp("/s2", "bar.wildcard.io", backend=V2),
        Exp("/s2", "foo.bar.wildcard.io", backend=V2),
        Exp("/s2", "non.matching.com", status=404),
        Exp("/s2", "wildcard.io", status=404),
        Exp("/s2", "very.specific.com", status=404),
        Exp("/non-matching-prefix", "foo.wildcard.io", status=404),
        Exp("/s3", "very.specific.com", backend=V3),
        Exp("/s3", "non.matching.com", status=404),
        Exp("/s3", "foo.specific.com", status=404),
        Exp("/s3", "foo.wildcard.io", status=404),
        Exp("/non-matching-prefix", "very.specific.com", status=404),
        Exp("/s4", "foo.anotherwildcard.io", backend=V1),
        Exp("/s4", "bar.anotherwildcard.io", backend=V1),
        Exp("/s4", "foo.bar.anotherwildcard.io", backend=V1),
        Exp("/s4", "anotherwildcard.io", status=404),
        Exp("/s4", "foo.wildcard.io", status=404),
        Exp("/s4", "very.specific.com", status=404),
        Exp("/non-matching-prefix", "foo.anotherwildcard.io", status=404),
    )
    # A route with no intersecting hostname is not accepted, and serves nothing.
    s.route_parents("HTTPRoute", "no-intersecting-hosts", INFRA,
                    [Parent(ref, (Cond("Accepted", "False", "NoMatchingListenerHostname"),))])
    s.expect(address, Exp("/s5", "specific.but.wrong.com", status=404), Exp("/s5", "wildcard.io", status=404))
    # Only accepted routes count in attachedRoutes.
    ready = (Cond("Accepted"), Cond("ResolvedRefs"))
    s.listeners_status(ref, [Listener("listener-1", ("HTTPRoute",), ready, 2),
                             Listener("listener-2", ("HTTPRoute",), ready, 1),
                             Listener("listener-3", ("HTTPRoute",), ready, 1)])
    # A listener without hostname intersects with every route hostname.
    all_ref = Ref("httproute-hostname-intersection-all")
    address = accepted(s, "httproute-hostname-intersection-all", ref=all_ref)
    s.expect(address, Exp("/", "first.com", backend=V2), Exp("/", "sub.first.com", backend=V2),
             Exp("/", "second.com", backend=V2), Exp("/", "sub.second.com", backend=V2),
             Exp("/", "third.com", status=404), Exp("/", "sub.third.com", status=404))


@case("HTTPRouteMatching", CORE, t("httproute-matching"))
def matching(s: Suite) -> None:
    """A single HTTPRoute with path and header matching for different backends"""
    address = accepted(s, "matching")
    s.expect(address, Exp("/", backend=V1), Exp("/example", backend=V1),
             Exp("/", headers={"Version": "one"}, backend=V1), Exp("/v2", backend=V2),
             Exp("/v2/example", backend=V2), Exp("/", headers={"Version": "two"}, backend=V2))


@case("HTTPRouteMatchingAcrossRoutes", CORE, t("httproute-matching-across-routes"))
def matching_across_routes(s: Suite) -> None:
    """Two HTTPRoutes with path matching for different backends"""
    address = accepted(s, "matching-part1", "matching-part2")
    s.expect(
        address,
        Exp("/", "example.com", backend=V1),
        Exp("/example", "example.com", backend=V1),
        Exp("/example", "example.net", backend=V1),
        Exp("/example", "example.com", headers={"Version": "one"}, backend=V1),
        Exp("/v2", "example.com", backend=V2),
        Exp("/v2", "example.net", backend=V1),  # v2 matches are limited to example.com
        Exp("/v2/example", "example.com", backend=V2),
        Exp("/", "example.com", headers={"Version": "two"}, backend=V2),
    )


@case("HTTPRouteMethodMatching", [*CORE, "HTTPRouteMethodMatching"], t("httproute-method-matching"))
def method_matching(s: Suite) -> None:
    """A single HTTPRoute with method matching for different backends"""
    address = accepted(s, "method-matching")
    s.expect(
        address,
        Exp("/", method="POST", backend=V1),
        Exp("/", method="GET", backend=V2),
        Exp("/", method="HEAD", status=404),
        Exp("/path1", method="GET", backend=V1),
        Exp("/", method="PUT", headers={"version": "one"}, backend=V2),
        Exp("/path2", method="POST", headers={"version": "two"}, backend=V3),
        Exp("/path3", method="PATCH", backend=V1),
        Exp("/path4", method="DELETE", headers={"version": "three"}, backend=V1),
        Exp("/", method="PUT", status=404),
        Exp("/path4", method="DELETE", status=404),
        Exp("/path5", method="PATCH", backend=V1),
        Exp("/", method="PATCH", headers={"version": "four"}, backend=V2),
    )


@case("HTTPRouteQueryParamMatching", [*CORE, "HTTPRouteQueryParamMatching"], t("httproute-query-param-matching"))
def query_param_matching(s: Suite) -> None:
    """A single HTTPRoute with query param matching for different backends"""
    address = accepted(s, "query-param-matching")
    s.expect(
        address,
        Exp("/?animal=whale", backend=V1),
        Exp("/?animal=dolphin", backend=V2),
        Exp("/?animal=dolphin&color=blue", backend=V3),
        Exp("/?ANIMAL=Whale", backend=V3),
        Exp("/?animal=whale&otherparam=irrelevant", backend=V1),
        Exp("/?animal=dolphin&color=yellow", backend=V2),
        Exp("/?color=blue", status=404),
        Exp("/?animal=dog", status=404),
        Exp("/?animal=whaledolphin", status=404),
        Exp("/", status=404),
        Exp("/path1?animal=whale", backend=V1),
        Exp("/?animal=whale", headers={"version": "one"}, backend=V2),
        Exp("/path2?animal=whale", headers={"version": "two"}, backend=V3),
        Exp("/path3?animal=shark", backend=V1),
        Exp("/path4?animal=kraken", headers={"version": "three"}, backend=V1),
        Exp("/?animal=shark", status=404),
        Exp("/path4?animal=kraken", status=404),
        Exp("/path5?animal=hydra", backend=V1),
        Exp("/?animal=hydra", headers={"version": "four"}, backend=V3),
    )


@case("HTTPRoutePathMatchOrder", CORE, t("httproute-path-match-order"))
def path_match_order(s: Suite) -> None:
    """An HTTPRoute where there are multiple matches routing to any given backend follows match order precedence"""
    address = accepted(s, "path-matching-order")
    s.expect(address, Exp("/match/exact/one", backend=V3), Exp("/match/exact", backend=V2),
             Exp("/match", backend=V1), Exp("/match/prefix/one/any", backend=V2),
             Exp("/match/prefix/any", backend=V1), Exp("/match/any", backend=V3))


@case("HTTPRouteReferenceGrant", [*CORE, REFERENCE_GRANT], t("httproute-reference-grant"))
def reference_grant(s: Suite) -> None:
    """A single HTTPRoute in the gateway-conformance-infra namespace, with a backendRef in the
    gateway-conformance-web-backend namespace, should attach to Gateway and be routed by a ReferenceGrant"""
    address = accepted(s, "reference-grant")
    s.expect(address, Exp("/", backend="web-backend", namespace=WEB))


@case("HTTPRouteInvalidReferenceGrant", [*CORE, REFERENCE_GRANT], t("httproute-invalid-reference-grant"))
def invalid_reference_grant(s: Suite) -> None:
    """An HTTPRoute whose backendRef crosses namespaces without a matching ReferenceGrant has
    ResolvedRefs False with reason RefNotPermitted, and its requests fail with 500"""
    s.route_condition("HTTPRoute", "reference-grant", INFRA, SAME, Cond("ResolvedRefs", "False", "RefNotPermitted"))
    address = s.routes_accepted(SAME, "reference-grant")
    s.expect(address, Exp("/", status=500))


@case("HTTPRoutePartiallyInvalidViaInvalidReferenceGrant", [*CORE, REFERENCE_GRANT],
      t("httproute-partially-invalid-via-invalid-reference-grant"))
def partially_invalid_reference_grant(s: Suite) -> None:
    """An HTTPRoute with one backendRef not permitted by a ReferenceGrant still serves its valid rules"""
    s.route_condition("HTTPRoute", "invalid-reference-grant", INFRA, SAME,
                      Cond("ResolvedRefs", "False", "RefNotPermitted"))
    address = s.routes_accepted(SAME, "invalid-reference-grant")
    s.expect(address, Exp("/", backend=V1), Exp("/v2", status=500))


@case("HTTPRouteInvalidNonExistentBackendRef", CORE, t("httproute-invalid-nonexistent-backendref"))
def invalid_nonexistent_backendref(s: Suite) -> None:
    """An HTTPRoute with a backendRef to a Service that does not exist has ResolvedRefs False
    (BackendNotFound) and answers 500"""
    s.route_condition("HTTPRoute", "invalid-nonexistent-backend-ref", INFRA, SAME,
                      Cond("ResolvedRefs", "False", "BackendNotFound"))
    address = s.routes_accepted(SAME, "invalid-nonexistent-backend-ref")
    s.expect(address, Exp("/", status=500))


@case("HTTPRouteInvalidBackendRefUnknownKind", CORE, t("httproute-invalid-backendref-unknown-kind"))
def invalid_backendref_unknown_kind(s: Suite) -> None:
    """An HTTPRoute with a backendRef of an unknown kind has ResolvedRefs False (InvalidKind) and answers 500"""
    s.route_condition("HTTPRoute", "invalid-backend-ref-unknown-kind", INFRA, SAME,
                      Cond("ResolvedRefs", "False", "InvalidKind"))
    address = s.routes_accepted(SAME, "invalid-backend-ref-unknown-kind")
    s.expect(address, Exp("/", status=500))


@case("HTTPRouteInvalidCrossNamespaceBackendRef", CORE, t("httproute-invalid-cross-namespace-backend-ref"))
def invalid_cross_namespace_backend_ref(s: Suite) -> None:
    """An HTTPRoute with a cross-namespace backendRef and no ReferenceGrant has ResolvedRefs False
    (RefNotPermitted) and answers 500"""
    s.route_condition("HTTPRoute", "invalid-cross-namespace-backend-ref", INFRA, SAME,
                      Cond("ResolvedRefs", "False", "RefNotPermitted"))
    address = s.routes_accepted(SAME, "invalid-cross-namespace-backend-ref")
    s.expect(address, Exp("/", status=500))


@case("HTTPRouteInvalidCrossNamespaceParentRef", CORE, t("httproute-invalid-cross-namespace-parent-ref"))
def invalid_cross_namespace_parent_ref(s: Suite) -> None:
    """An HTTPRoute in another namespace is not accepted by a Gateway that allows Same-namespace routes"""
    not_accepted(s, "invalid-cross-namespace-parent-ref", SAME, "NotAllowedByListeners", namespace=WEB)
    s.attached_routes(SAME, "http", 0)


@case("HTTPRouteInvalidParentRefNotMatchingListenerPort", [*CORE, "HTTPRouteParentRefPort"],
      t("httproute-invalid-parentref-not-matching-listener-port"))
def parentref_not_matching_port(s: Suite) -> None:
    """An HTTPRoute whose parentRef port matches no listener is not accepted (NoMatchingParent)"""
    not_accepted(s, "httproute-listener-not-matching-route-port", SAME, "NoMatchingParent")
    s.attached_routes(SAME, "http", 0)


@case("HTTPRouteInvalidParentRefNotMatchingSectionName", CORE,
      t("httproute-invalid-parentref-not-matching-section-name"))
def parentref_not_matching_section(s: Suite) -> None:
    """An HTTPRoute whose parentRef sectionName matches no listener is not accepted (NoMatchingParent)"""
    not_accepted(s, "httproute-listener-not-matching-section-name", SAME, "NoMatchingParent")
    s.attached_routes(SAME, "http", 0)


@case("HTTPRouteInvalidParentRefSectionNameNotMatchingPort", [*CORE, "HTTPRouteParentRefPort"],
      t("httproute-invalid-parentref-section-name-not-matching-port"))
def parentref_section_not_matching_port(s: Suite) -> None:
    """An HTTPRoute whose parentRef names a listener but another port is not accepted (NoMatchingParent)"""
    ref = Ref("gateway-with-one-not-matching-port-and-section-name-route")
    not_accepted(s, "httproute-listener-section-name-not-matching-port", ref, "NoMatchingParent")
    s.attached_routes(ref, "http", 0)


@case("HTTPRouteListenerHostnameMatching", CORE, t("httproute-listener-hostname-matching"))
def listener_hostname_matching(s: Suite) -> None:
    """Listeners with different hostnames each pick the routes attached to them"""
    gw = "httproute-listener-hostname-matching"
    s.routes_accepted(Ref(gw, sections=("listener-1",)), "backend-v1")
    s.routes_accepted(Ref(gw, sections=("listener-2",)), "backend-v2")
    address = s.routes_accepted(Ref(gw, sections=("listener-3", "listener-4")), "backend-v3")
    s.expect(
        address,
        Exp("/", "bar.com", backend=V1),
        Exp("/", "foo.bar.com", backend=V2),
        Exp("/", "baz.bar.com", backend=V3),
        Exp("/", "boo.bar.com", backend=V3),
        Exp("/", "multiple.prefixes.bar.com", backend=V3),
        Exp("/", "multiple.prefixes.foo.com", backend=V3),
        Exp("/", "foo.com", status=404),
        Exp("/", "no.matching.host", status=404),
    )
