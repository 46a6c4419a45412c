"""HTTPRoute conformance cases (upstream conformance/tests/httproute-*.go)."""

from __future__ import annotations

from tests.conformance.cases import case
from tests.conformance.conf2_support import consistently
from tests.conformance.features import GATEWAY, HTTPROUTE, REFERENCE_GRANT, TLSROUTE
from tests.conformance.suite import (
    APP,
    INFRA,
    WEB,
    CaseFailure,
    Cond,
    Exp,
    Listener,
    Parent,
    Ref,
    Suite,
    ensure,
    eventually,
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
    s.expect(address, Exp("/", backend="app-backend-v1", namespace=APP), Exp("/v2", status=500))


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


# --- filters ---------------------------------------------------------------------------


def redirect(path: str, status: int = 302, scheme: str = "", host: str = "", port: str = "",
             to: str = "", **kw: object) -> Exp:
    """A request answered by a redirect (upstream's RedirectRequest expectation)."""
    return Exp(path, status=status, expects_redirect=True, redirect_scheme=scheme, redirect_host=host,
               redirect_port=port, redirect_path=to, **kw)  # type: ignore[arg-type]


@case("HTTPRoute303Redirect", [*CORE, "HTTPRoute303RedirectStatusCode"], t("httproute-303-redirect"),
      provisional=True)
def redirect_303(s: Suite) -> None:
    """An HTTPRoute with a 303 redirect filter"""
    address = accepted(s, "303-redirect")
    s.expect(address, redirect("/see-other", 303, method="POST", to="/see-other"))


@case("HTTPRoute307Redirect", [*CORE, "HTTPRoute307RedirectStatusCode"], t("httproute-307-redirect"),
      provisional=True)
def redirect_307(s: Suite) -> None:
    """An HTTPRoute with a 307 redirect filter"""
    address = accepted(s, "307-redirect")
    s.expect(address, redirect("/temporary", 307, method="POST", to="/temporary"))


@case("HTTPRoute308Redirect", [*CORE, "HTTPRoute308RedirectStatusCode"], t("httproute-308-redirect"),
      provisional=True)
def redirect_308(s: Suite) -> None:
    """An HTTPRoute with a 308 redirect filter"""
    address = accepted(s, "308-redirect")
    s.expect(address, redirect("/permanent", 308, method="POST", to="/permanent"))


@case("HTTPRouteRedirectHostAndStatus", CORE, t("httproute-redirect-host-and-status"))
def redirect_host_and_status(s: Suite) -> None:
    """An HTTPRoute with hostname and statusCode redirect filters"""
    address = accepted(s, "redirect-host-and-status")
    s.expect(address, redirect("/hostname-redirect", 302, host="example.org"),
             redirect("/host-and-status", 301, host="example.org"))


@case("HTTPRouteRedirectPath", [*CORE, "HTTPRoutePathRedirect"], t("httproute-redirect-path"))
def redirect_path(s: Suite) -> None:
    """An HTTPRoute with path redirect filters"""
    address = accepted(s, "redirect-path")
    s.expect(
        address,
        redirect("/original-prefix/lemon", to="/replacement-prefix/lemon"),
        redirect("/full/path/original", to="/full-path-replacement"),
        redirect("/path-and-host", host="example.org", to="/replacement-prefix"),
        redirect("/path-and-status", 301, to="/replacement-prefix"),
        redirect("/full-path-and-host", host="example.org", to="/replacement-full"),
        redirect("/full-path-and-status", 301, to="/replacement-full"),
    )


@case("HTTPRouteRedirectPort", [*CORE, "HTTPRoutePortRedirect"], t("httproute-redirect-port"))
def redirect_port(s: Suite) -> None:
    """An HTTPRoute with a port redirect filter"""
    address = accepted(s, "redirect-port")
    s.expect(address, redirect("/port", port="8083"), redirect("/port-and-host", host="example.org", port="8083"),
             redirect("/port-and-status", 301, port="8083"),
             redirect("/port-and-host-and-status", host="example.org", port="8083"))


@case("HTTPRouteRedirectScheme", [*CORE, "HTTPRouteSchemeRedirect"], t("httproute-redirect-scheme"))
def redirect_scheme(s: Suite) -> None:
    """An HTTPRoute with a scheme redirect filter"""
    address = accepted(s, "redirect-scheme")
    s.expect(address, redirect("/scheme", scheme="https"),
             redirect("/scheme-and-host", host="example.org", scheme="https"),
             redirect("/scheme-and-status", 301, scheme="https"),
             redirect("/scheme-and-host-and-status", host="example.org", scheme="https"))


@case("HTTPRouteRedirectPortAndScheme",
      [*CORE, "HTTPRoutePortRedirect", "HTTPRouteSchemeRedirect", "GatewayPort8080"],
      t("httproute-redirect-port-and-scheme"))
def redirect_port_and_scheme(s: Suite) -> None:
    """Redirects pick the port from the scheme when it is not set, on HTTP (80, 8080) and HTTPS listeners"""
    org = {"host": "example.org"}
    address = accepted(s, "http-route-for-listener-on-port-80")
    s.expect(address, redirect("/scheme-nil-and-port-nil", **org), redirect("/scheme-nil-and-port-80", **org),
             redirect("/scheme-nil-and-port-8080", port="8080", **org),
             redirect("/scheme-https-and-port-nil", scheme="https", **org),
             redirect("/scheme-https-and-port-443", scheme="https", **org),
             redirect("/scheme-https-and-port-8443", scheme="https", port="8443", **org))
    address = accepted(s, "http-route-for-listener-on-port-8080", ref=Ref("same-namespace-with-http-listener-on-8080"))
    s.expect(address, redirect("/scheme-nil-and-port-nil", port="8080", **org),
             redirect("/scheme-nil-and-port-80", **org),
             redirect("/scheme-https-and-port-nil", scheme="https", **org))
    # On the HTTPS listener the request is https, so an unset scheme redirects to https.
    address = accepted(s, "http-route-for-listener-on-port-443", ref=Ref("same-namespace-with-https-listener"))
    tls = {"host": "example.org", "scheme": "https"}
    s.expect(address,
             Exp("/scheme-nil-and-port-nil", **tls, status=302, expects_redirect=True),
             Exp("/scheme-nil-and-port-443", **tls, status=302, expects_redirect=True),
             Exp("/scheme-nil-and-port-8443", **tls, status=302, expects_redirect=True, redirect_port="8443"),
             Exp("/scheme-http-and-port-nil", **tls, status=302, expects_redirect=True, redirect_scheme="http"),
             Exp("/scheme-http-and-port-80", **tls, status=302, expects_redirect=True, redirect_scheme="http"),
             Exp("/scheme-http-and-port-8080", **tls, status=302, expects_redirect=True, redirect_scheme="http",
                 redirect_port="8080"))


@case("HTTPRouteRewritePath", [*CORE, "HTTPRoutePathRewrite"], t("httproute-rewrite-path"))
def rewrite_path(s: Suite) -> None:
    """An HTTPRoute with path rewrite filter"""
    address = accepted(s, "rewrite-path")
    sent = {"X-Header-Remove": "remove-val", "X-Header-Add-Append": "append-val-1", "X-Header-Set": "set-val"}
    seen = {"X-Header-Add": "header-val-1", "X-Header-Add-Append": "append-val-1,header-val-2",
            "X-Header-Set": "set-overwrites-values"}
    s.expect(
        address,
        Exp("/prefix/one/two", seen_path="/one/two", backend=V1),
        Exp("/full/one/two", seen_path="/one", backend=V1),
        Exp("/full/rewrite-path-and-modify-headers/test", headers=sent, seen_path="/test", seen_headers=seen,
            seen_absent=("X-Header-Remove",), backend=V1),
        Exp("/prefix/rewrite-path-and-modify-headers/one", headers=sent, seen_path="/prefix/one",
            seen_headers=seen, seen_absent=("X-Header-Remove",), backend=V1),
    )


@case("HTTPRouteRewriteHost", [*CORE, "HTTPRouteHostRewrite"], t("httproute-rewrite-host"))
def rewrite_host(s: Suite) -> None:
    """An HTTPRoute with hostname rewrite filter"""
    address = accepted(s, "rewrite-host")
    s.expect(
        address,
        Exp("/one", "rewrite.example", seen_host="one.example.org", backend=V1),
        Exp("/two", "rewrite.example", seen_host="example.org", backend=V2),
        Exp("/rewrite-host-and-modify-headers", "rewrite.example",
            headers={"X-Header-Remove": "remove-val", "X-Header-Add-Append": "append-val-1"},
            seen_host="test.example.org",
            seen_headers={"X-Header-Add": "header-val-1", "X-Header-Add-Append": "append-val-1,header-val-2",
                          "X-Header-Set": "set-overwrites-values"},
            seen_absent=("X-Header-Remove",), backend=V2),
    )


def header_modifier_cases(where: str) -> list[Exp]:
    """The set/add/remove expectations shared by the request and response modifier tests;
    `where` says whether the backend ("request") or the client ("response") must see them."""
    cases = [
        ("/set", {"Some-Other-Header": "val"}, {"Some-Other-Header": "val", "X-Header-Set": "set-overwrites-values"}, ()),
        ("/set", {"Some-Other-Header": "val", "X-Header-Set": "some-other-value"},
         {"Some-Other-Header": "val", "X-Header-Set": "set-overwrites-values"}, ()),
        ("/add", {"Some-Other-Header": "val"}, {"Some-Other-Header": "val", "X-Header-Add": "add-appends-values"}, ()),
        ("/add", {"Some-Other-Header": "val", "X-Header-Add": "some-other-value"},
         {"Some-Other-Header": "val", "X-Header-Add": "some-other-value,add-appends-values"}, ()),
        ("/remove", {"X-Header-Remove": "val"}, {}, ("X-Header-Remove",)),
        ("/multiple", {"X-Header-Set-2": "set-val-2", "X-Header-Add-2": "add-val-2",
                       "X-Header-Remove-2": "remove-val-2", "Another-Header": "another-header-val"},
         {"X-Header-Set-1": "header-set-1", "X-Header-Set-2": "header-set-2", "X-Header-Add-1": "header-add-1",
          "X-Header-Add-2": "add-val-2,header-add-2", "X-Header-Add-3": "header-add-3",
          "Another-Header": "another-header-val"}, ("X-Header-Remove-1", "X-Header-Remove-2")),
        ("/case-insensitivity", {"x-header-set": "original-val-set", "x-header-add": "original-val-add",
                                 "x-header-remove": "original-val-remove", "Another-Header": "another-header-val"},
         {"X-Header-Set": "header-set", "X-Header-Add": "original-val-add,header-add",
          "Another-Header": "another-header-val"}, ("x-header-remove", "X-Header-Remove")),
    ]
    out = []
    for path, sent, wanted, absent in cases:
        if where == "request":
            out.append(Exp(path, headers=sent, seen_headers=wanted, seen_absent=absent, backend=V1))
        else:
            # The echo backend answers with the headers named in X-Echo-Set-Header, so the
            # response carries the request's headers and the filter works on them.
            echo = ",".join(f"{k}:{v}" for k, v in sent.items())
            out.append(Exp(path, headers={"X-Echo-Set-Header": echo}, seen_headers={}, response_headers=wanted,
                           response_absent=absent, backend=V1))
    return out


@case("HTTPRouteRequestHeaderModifier", CORE, t("httproute-request-header-modifier"))
def request_header_modifier(s: Suite) -> None:
    """An HTTPRoute has request header modifier filters applied correctly"""
    address = accepted(s, "request-header-modifier")
    s.expect(address, *header_modifier_cases("request"))


@case("HTTPRouteRequestHeaderModifierBackend", [*CORE, "HTTPRouteBackendRequestHeaderModification"],
      t("httproute-request-header-modifier-backend"))
def request_header_modifier_backend(s: Suite) -> None:
    """An HTTPRoute has request header modifier filters on its backendRefs applied correctly"""
    address = accepted(s, "request-header-modifier")
    s.expect(address, *[e for e in header_modifier_cases("request") if e.path != "/case-insensitivity"])


@case("HTTPRouteResponseHeaderModifier", [*CORE, "HTTPRouteResponseHeaderModification"],
      t("httproute-response-header-modifier"))
def response_header_modifier(s: Suite) -> None:
    """An HTTPRoute has response header modifier filters applied correctly"""
    address = accepted(s, "response-header-modifier")
    s.expect(address, *header_modifier_cases("response"))


@case("HTTPRouteTimeoutRequest", [*CORE, "HTTPRouteRequestTimeout"], t("httproute-timeout-request"))
def timeout_request(s: Suite) -> None:
    """An HTTPRoute with request timeout"""
    address = accepted(s, "request-timeout")
    s.expect(address, Exp("/request-timeout"), Exp("/request-timeout?delay=1s", status=504),
             Exp("/disable-request-timeout?delay=1s"))


@case("HTTPRouteTimeoutBackendRequest", [*CORE, "HTTPRouteBackendTimeout"], t("httproute-timeout-backend-request"))
def timeout_backend_request(s: Suite) -> None:
    """An HTTPRoute with backend request timeout"""
    address = accepted(s, "backend-request-timeout")
    s.expect(address, Exp("/backend-timeout"), Exp("/backend-timeout?delay=1s", status=504))


@case("HTTPRouteNamedRule", [*CORE, "HTTPRouteNamedRouteRule"], t("httproute-named-rule"))
def named_rule(s: Suite) -> None:
    """An HTTPRoute with a named rule routes like one without"""
    address = accepted(s, "http-named-rules")
    s.expect(address, Exp("/named", backend=V1), Exp("/unnamed", backend=V2))


@case("HTTPRouteWeight", CORE, t("httproute-weight"))
def weight(s: Suite) -> None:
    """An HTTPRoute with weighted backends splits traffic by weight (70/30/0)"""
    address = accepted(s, "weighted-backends")
    s.expect(address, Exp("/", backend="infra-backend-v"))
    exp = Exp("/", backend="infra-backend-v")
    counts = s.backend_distribution(address, exp, 500)
    total = sum(counts.values())
    for name, weight_ in ((V1, 0.7), (V2, 0.3), (V3, 0.0)):
        share = counts.get(name, 0) / total
        if abs(share - weight_) > 0.1:
            raise AssertionError(f"{name} answered {share:.0%} of requests, want {weight_:.0%} (+-10%): {counts}")


@case("HTTPRouteOmittedBackendRefs", CORE, t("httproute-omitted-backendrefs"))
def omitted_backendrefs(s: Suite) -> None:
    """A rule without backendRefs answers 500; the route is still Accepted with resolved refs"""
    address = accepted(s, "omitted-backendrefs")
    s.expect(address, Exp("/omitted-no-forward", status=500), Exp("/empty-no-forward", status=500),
             Exp("/", backend=V1))


@case("HTTPRouteObservedGenerationBump", CORE, t("httproute-observed-generation-bump"))
def observed_generation_bump(s: Suite) -> None:
    """An HTTPRoute's conditions follow its generation when its spec changes"""
    accepted(s, "observed-generation-bump")
    before = s.get("HTTPRoute", "observed-generation-bump")["metadata"]["generation"]

    def bump(doc: dict[str, object]) -> None:
        rules = doc["spec"]["rules"]  # type: ignore[index]
        rules[0]["matches"] = [{"path": {"type": "PathPrefix", "value": "/generation-bump"}}]

    s.mutate("case-HTTPRouteObservedGenerationBump", "HTTPRoute", "observed-generation-bump", INFRA, bump)
    eventually(lambda: ensure(s.get("HTTPRoute", "observed-generation-bump")["metadata"]["generation"] > before,
                              "generation unchanged"), "the HTTPRoute generation to change")
    # Conditions of the latest generation (route_parents checks observedGeneration).
    s.route_parents("HTTPRoute", "observed-generation-bump", INFRA,
                    [Parent(SAME, (Cond("Accepted"), Cond("ResolvedRefs")))], namespace_required=False)


@case("HTTPRouteMultipleGateways", CORE, t("httproute-multiple-gateways"))
def multiple_gateways(s: Suite) -> None:
    """A route attached to two Gateways serves from both; dedicated routes only from their own"""
    all_ns = Ref("all-namespaces")
    # The shared route has exactly its two Gateways as parents, each Accepted; a dedicated
    # route exactly its own.
    s.route_parents("HTTPRoute", "multiple-gateways-shared-route", INFRA, [Parent(SAME), Parent(all_ns)],
                    namespace_required=False)
    address = accepted(s, "same-namespace-dedicated-route", resolved=False)
    s.expect(address, Exp("/shared", backend=V1), Exp("/", backend=V2))
    address = s.routes_accepted(all_ns, "all-namespaces-dedicated-route")
    s.expect(address, Exp("/shared", backend=V1), Exp("/", backend=V3))


@case("HTTPRouteListenerPortMatching", [*CORE, "HTTPRouteParentRefPort"], t("httproute-listener-port-matching"))
def listener_port_matching(s: Suite) -> None:
    """Routes attach by parentRef port to every listener on that port"""
    gw = "httproute-listener-port-matching"
    s.route_parents("HTTPRoute", "backend-v1", INFRA, [Parent(Ref(gw, port=80))])
    s.route_parents("HTTPRoute", "backend-v2", INFRA, [Parent(Ref(gw, port=8080))])
    s.route_parents("HTTPRoute", "backend-v3", INFRA, [Parent(Ref(gw, port=8090), section="listener-4")])
    ip = s.gateway_address(Ref(gw)).rpartition(":")[0]
    s.expect(f"{ip}:80", Exp("/", "foo.com", backend=V1))
    s.expect(f"{ip}:8080", Exp("/", "foo.com", backend=V2), Exp("/", "bar.com", backend=V2))
    s.expect(f"{ip}:8090", Exp("/", "foo.com", backend=V3), Exp("/", "bar.com", status=404))


@case("HTTPRouteServiceTypes", CORE, t("httproute-service-types"))
def service_types(s: Suite) -> None:
    """A single HTTPRoute routes to headless Services and Services with manual EndpointSlices"""
    address = accepted(s, "service-types")
    # Upstream fills the manual EndpointSlices with the infra-backend-v1 pods; ours is local.
    w = s.backends.workloads[(INFRA, V1)]
    port = s.backends.port(w, 3000, "TCP")
    for slice_name in ("manual-endpointslices-ip4", "headless-manual-endpointslices-ip4"):
        def point(doc: dict[str, object]) -> None:
            doc["endpoints"] = [{"addresses": [s.pods.host], "conditions": {"ready": True, "serving": True}}]
            doc["ports"] = [{"name": "first-port", "port": port, "protocol": "TCP"}]
        s.mutate("case-HTTPRouteServiceTypes", "EndpointSlice", slice_name, INFRA, point)
    s.expect(address, *[Exp(f"/{p}", backend=V1) for p in
                         ("headless", "manual-endpointslices", "headless-manual-endpointslices")])


@case("HTTPRouteHTTPSListener", CORE, t("httproute-https-listener"))
def https_listener(s: Suite) -> None:
    """HTTPRoute attaches to a Gateway's HTTPS listener in the same namespace"""
    ref = Ref("same-namespace-with-https-listener")
    address = accepted(s, "httproute-https-test", "httproute-https-test-no-hostname", ref=ref)
    s.expect(
        address,
        Exp("/", "example.org", scheme="https", sni="example.org", backend=V1),
        Exp("/", "unknown-example.org", scheme="https", sni="unknown-example.org", status=404),
        Exp("/", "second-example.org", scheme="https", sni="second-example.org", backend=V2),
    )


@case("HTTPRouteBackendProtocolWebSocket", [*CORE, "HTTPRouteBackendProtocolWebSocket"],
      t("httproute-backend-protocol-websocket"))
def backend_protocol_websocket(s: Suite) -> None:
    """A HTTPRoute with a BackendRef that has an appProtocol kubernetes.io/ws should be functional"""
    import websocket

    address = s.routes_accepted(SAME, "backend-protocol-ws")

    def round_trip() -> None:
        try:
            ws = websocket.create_connection(f"ws://{address}/ws", origin="ws://gateway/websocket", timeout=5)
        except websocket.WebSocketException as err:  # e.g. a 503 before the backend is reachable
            raise CaseFailure(f"failed to dial: {err}") from None
        try:
            ws.send("Websocket Support!")
            ensure(ws.recv() == "Websocket Support!", "text frame not echoed")
            ws.send_binary(bytes([1, 2, 3, 4, 5, 6, 7]))
            ensure(ws.recv() == bytes([1, 2, 3, 4, 5, 6, 7]), "binary frame not echoed")
        except websocket.WebSocketException as err:
            raise CaseFailure(f"round trip failed: {err}") from None
        finally:
            ws.close()

    # As upstream: AwaitConvergence, CONSECUTIVE_SUCCESSES round trips in a row.
    consistently(round_trip, "a WebSocket round trip through the Gateway")
