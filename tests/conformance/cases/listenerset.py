"""ListenerSet conformance cases (upstream conformance/tests/listenerset-*.go), in upstream's file order."""

from __future__ import annotations

from tests.conformance.cases import case
from tests.conformance.conf1_support import (
    attached_listener_sets,
    condition,
    gateway_routes_accepted,
    listeners_are,
    listeners_have,
    ls_ref,
    route_condition,
    routes_accepted_by,
)
from tests.conformance.features import GATEWAY, HTTPROUTE, LISTENER_SET, REFERENCE_GRANT, TLSROUTE
from tests.conformance.suite import (
    ACCEPTED,
    INFRA,
    LISTENER_READY,
    Cond,
    Exp,
    Listener,
    Parent,
    Ref,
    Suite,
)

V1, V2, V3 = "infra-backend-v1", "infra-backend-v2", "infra-backend-v3"
GATEWAY_ACCEPTED = Cond("Accepted")
ROUTE_KINDS = ("HTTPRoute", "GRPCRoute")  # upstream's generateSupportedRouteKinds
NOT_ALLOWED = (Cond("Accepted", "False", "NotAllowed"), Cond("Programmed", "False", "NotAllowed"))
NOT_VALID = (Cond("Accepted", "False", "ListenersNotValid"), Cond("Programmed", "False", "ListenersNotValid"))
SET_ACCEPTED = (Cond("Accepted", "True", "Accepted"), Cond("Programmed", "True", "Programmed"))


def t(name: str) -> list[str]:
    return [f"tests/{name}.yaml"]


def set_has(s: Suite, ref: Ref, *conds: Cond) -> None:
    for cond in conds:
        condition(s, ref, cond)


def gateway_with_sets(s: Suite, name: str, sets: int, section: str = "") -> str:
    """The Gateway is Accepted with `sets` ListenerSets attached; its address (first listener)."""
    ref = Ref(name, sections=(section,) if section else ())
    address = s.gateway_address(ref)
    condition(s, ref, GATEWAY_ACCEPTED)
    attached_listener_sets(s, ref, sets)
    return address


@case("ListenerSetAllowedNamespaceNone", [GATEWAY, LISTENER_SET], t("listenerset-allowed-namespace-none"))
def allowed_namespace_none(s: Suite) -> None:
    """Listener Sets are not allowed on the Gateway when `allowedListeners` is set to `None`"""
    gw = Ref("gateway-does-not-allow-listenerset")
    condition(s, gw, GATEWAY_ACCEPTED)
    attached_listener_sets(s, gw, 0)
    set_has(s, ls_ref("listenerset-not-allowed"), *NOT_ALLOWED)


@case("ListenerSetAllowedNamespaceSame", [GATEWAY, LISTENER_SET], t("listenerset-allowed-namespace-same"))
def allowed_namespace_same(s: Suite) -> None:
    """ListenerSets in the same namespace as the Gateway are allowed when `allowedListeners` is set to `Same`"""
    gw = Ref("gateway-allows-listenerset-in-same-namespace")
    condition(s, gw, GATEWAY_ACCEPTED)
    attached_listener_sets(s, gw, 1)
    allowed = ls_ref("listenerset-in-same-namespace")
    set_has(s, allowed, *SET_ACCEPTED)
    listeners_have(s, allowed, LISTENER_READY, "listenerset-in-same-namespace-listener")
    set_has(s, ls_ref("listenerset-in-different-namespace", "gateway-api-listenerset-not-allowed-ns"), *NOT_ALLOWED)


@case("ListenerSetAllowedNamespaceSelector", [GATEWAY, LISTENER_SET], t("listenerset-allowed-namespace-selector"))
def allowed_namespace_selector(s: Suite) -> None:
    """ListenerSets in the namespaces that match the labels are allowed when `allowedListeners` is set to `Selector`"""
    gw = Ref("gateway-allows-listenerset-in-selected-namespace")
    condition(s, gw, GATEWAY_ACCEPTED)
    attached_listener_sets(s, gw, 1)
    allowed = ls_ref("listenerset-in-selected-namespace", "gateway-api-listenerset-selector-allowed-ns")
    set_has(s, allowed, *SET_ACCEPTED)
    listeners_have(s, allowed, LISTENER_READY, "listenerset-in-selected-namespace-listener")
    set_has(s, ls_ref("listenerset-not-in-selected-namespace", "gateway-api-listenerset-selector-not-allowed-ns"),
            *NOT_ALLOWED)


@case("ListenerSetAllowedRoutesNamespaces", [GATEWAY, LISTENER_SET, HTTPROUTE, REFERENCE_GRANT],
      t("listenerset-allowed-routes-namespaces"))
def allowed_routes_namespaces(s: Suite) -> None:
    """ListenerSet listeners allow routes from the specified namespace"""
    address = gateway_with_sets(s, "gateway-with-listener-sets-test-allowed-routes", 2, "gateway-listener")

    # A ListenerSet in the Gateway's namespace: each listener admits routes as its allowedRoutes says.
    same = ls_ref("listenerset-test-allowed-routes-namespaces")
    routes_accepted_by(s, same, "route-in-same-namespace", "gateway-api-routes-allowed-ns/route-in-selected-namespace",
                       "gateway-api-routes-not-allowed-ns/route-not-in-selected-namespace")
    listeners_are(s, same, [Listener("listener-set-listener-allowed-routes-all", ROUTE_KINDS, LISTENER_READY, 3),
                            Listener("listener-set-listener-allowed-routes-same", ROUTE_KINDS, LISTENER_READY, 1),
                            Listener("listener-set-listener-allowed-routes-selector", ROUTE_KINDS, LISTENER_READY, 1)])
    all_, same_, selector = ("listener-set-listener-allowed-routes-all.com", "listener-set-listener-allowed-routes-same.com",
                             "listener-set-listener-allowed-routes-selector.com")
    s.expect(address,
             Exp("/route-in-same-namespace", all_, backend=V1),
             Exp("/route-in-selected-namespace", all_, backend=V2),
             Exp("/route-not-in-selected-namespace", all_, backend=V3),
             Exp("/route-in-same-namespace", same_, backend=V1),
             Exp("/route-in-selected-namespace", same_, status=404),
             Exp("/route-not-in-selected-namespace", same_, status=404),
             Exp("/route-in-same-namespace", selector, status=404),
             Exp("/route-in-selected-namespace", selector, backend=V2),
             Exp("/route-not-in-selected-namespace", selector, status=404))

    # A ListenerSet in another namespace: `Same` means the ListenerSet's namespace, not the Gateway's.
    cross = ls_ref("listenerset-test-allowed-routes-cross-ns", "gateway-api-ls-cross-ns")
    routes_accepted_by(s, cross, "gateway-api-ls-cross-ns/route-in-listenerset-namespace")
    route_condition(s, "route-in-gateway-namespace", cross, Cond("Accepted", "False", "NotAllowedByListeners"))
    listeners_are(s, cross, [Listener("listener-set-listener-allowed-routes-cross-ns-same", ROUTE_KINDS,
                                      LISTENER_READY, 1)])
    host = "listener-set-listener-allowed-routes-cross-ns-same.com"
    s.expect(address, Exp("/route-in-listenerset-namespace", host, backend=V1),
             Exp("/route-in-gateway-namespace", host, status=404))


@case("ListenerSetAllowedRoutesSupportedKinds", [GATEWAY, LISTENER_SET, HTTPROUTE, TLSROUTE],
      t("listenerset-allowed-routes-supported-kinds"))
def allowed_routes_supported_kinds(s: Suite) -> None:
    """ListenerSet listeners allow specific route kinds"""
    condition(s, Ref("gateway-with-listener-sets-test-supported-route-kinds"), GATEWAY_ACCEPTED)
    # A TLS listener that only allows HTTPRoutes allows no kind it can serve.
    listeners_have(s, ls_ref("listenerset-test-allowed-routes-supported-kinds"),
                   (Cond("ResolvedRefs", "False", "InvalidRouteKinds"),),
                   "listener-set-listener-allowed-routes-tls-only")


@case("ListenerSetDefaultNotAllowed", [GATEWAY, LISTENER_SET], t("listenerset-default-not-allowed"))
def default_not_allowed(s: Suite) -> None:
    """Listener Sets are not allowed on the Gateway by default (i.e. when `allowedListeners` is not set)"""
    gw = Ref("gateway-default-does-not-allow-listenerset")
    condition(s, gw, GATEWAY_ACCEPTED)
    attached_listener_sets(s, gw, 0)
    set_has(s, ls_ref("listenerset-default-not-allowed"), *NOT_ALLOWED)


@case("ListenerSetDualParentRefIndependence", [GATEWAY, LISTENER_SET, HTTPROUTE],
      t("listenerset-dual-parentref-independence"))
def dual_parentref_independence(s: Suite) -> None:
    """A Route with both Gateway and ListenerSet parentRefs has independently evaluated Accepted conditions for each parentRef"""
    gw = Ref("gateway-dual-parentref")
    address = gateway_with_sets(s, gw.name, 1, "gw-dual-parentref-listener")
    ls = ls_ref("ls-dual-parentref")
    listeners_are(s, ls, [Listener("ls-dual-parentref-listener", ROUTE_KINDS, LISTENER_READY, 2)])
    # Both parentRefs valid: both accepted, the route served through both.
    route_condition(s, "route-dual-parentref-both", gw, Cond("Accepted"))
    route_condition(s, "route-dual-parentref-both", ls, Cond("Accepted"))
    s.expect(address, Exp("/dualboth", "gw-dual.com", backend=V1), Exp("/dualboth", "ls-dual.com", backend=V1))
    # The Gateway parentRef names a listener of the ListenerSet: rejected, without touching the other parentRef.
    route_condition(s, "route-dual-parentref-one", gw, Cond("Accepted", "False", "NoMatchingParent"))
    route_condition(s, "route-dual-parentref-one", ls, Cond("Accepted"))
    routes_accepted_by(s, ls, "route-dual-parentref-one")
    s.expect(address, Exp("/dualone", "ls-dual.com", backend=V2), Exp("/dualone", "gw-dual.com", status=404))


@case("ListenerSetGatewayParentSectionNameNotFound", [GATEWAY, LISTENER_SET, HTTPROUTE],
      t("listenerset-gateway-parent-section-name-not-found"))
def gateway_parent_section_name_not_found(s: Suite) -> None:
    """A Route must not be able to find a ListenerSet sectionName using a Gateway parentRef"""
    gw = Ref("gateway-section-name")
    address = gateway_with_sets(s, gw.name, 1, "gw-listener")
    routes_accepted_by(s, ls_ref("listenerset-section-name"), "route-via-listenerset")
    route_condition(s, "route-via-gateway", gw, Cond("Accepted", "False", "NoMatchingParent"))
    s.expect(address, Exp("/goodsection", "ls-section-name.com", backend=V1),
             Exp("/badsection", "gw-section.com", status=404))


def conflict_case(s: Suite, gateway: str, kind: str, reason: str) -> None:
    """Listener precedence (ListenerSetHostnameConflict / ListenerSetProtocolConflict): the
    Gateway's own listeners win, then ListenerSets in creation order; a ListenerSet keeps
    its valid listeners and is not accepted when none is left."""
    conflicted = (Cond("Accepted", "False", reason), Cond("Programmed", "False", reason),
                  Cond("Conflicted", "True", reason))
    gw = Ref(gateway)
    condition(s, gw, GATEWAY_ACCEPTED)
    listeners_have(s, gw, LISTENER_READY, "gateway-listener", f"{kind}-conflict-with-gateway-listener")
    attached_listener_sets(s, gw, 2)
    first = ls_ref(f"listenerset-with-{kind}-conflict-with-gateway-1")
    set_has(s, first, Cond("Accepted"), Cond("Programmed", "True", "Programmed"))
    listeners_have(s, first, LISTENER_READY, "listener-set-1-listener", f"{kind}-conflict-with-listener-set-listener")
    listeners_have(s, first, conflicted, f"{kind}-conflict-with-gateway-listener")
    second = ls_ref(f"listenerset-with-{kind}-conflict-with-gateway-2")
    set_has(s, second, *NOT_VALID)
    listeners_have(s, second, conflicted, f"{kind}-conflict-with-gateway-listener")
    third = ls_ref(f"listenerset-with-{kind}-conflict-with-listener-set-1")
    set_has(s, third, Cond("Accepted"), Cond("Programmed", "True", "Programmed"))
    listeners_have(s, third, LISTENER_READY, "listener-set-2-listener")
    listeners_have(s, third, conflicted, f"{kind}-conflict-with-listener-set-listener")
    fourth = ls_ref(f"listenerset-with-{kind}-conflict-with-listener-set-2")
    set_has(s, fourth, *NOT_VALID)
    listeners_have(s, fourth, conflicted, f"{kind}-conflict-with-listener-set-listener")


@case("ListenerSetHostnameConflict", [GATEWAY, LISTENER_SET], t("listenerset-hostname-conflict"))
def hostname_conflict(s: Suite) -> None:
    """Validate Listener Precedence when a ListenerSet listener has a hostname conflict"""
    conflict_case(s, "gateway-with-listenerset-hostname-conflict", "hostname", "HostnameConflict")


@case("ListenerSetHTTPRouting", [GATEWAY, LISTENER_SET, HTTPROUTE], t("listenerset-http-routing"))
def http_routing(s: Suite) -> None:
    """HTTP Routing works as expected with ListenerSets"""
    gw = Ref("gateway-with-listener-sets-http-routing")
    address = gateway_routes_accepted(s, gw, "attaches-to-all-listeners", "gateway-route", "gateway-section-route")
    attached_listener_sets(s, gw, 2)
    first, second = ls_ref("listener-set-http-routing-1"), ls_ref("listener-set-http-routing-2")
    routes_accepted_by(s, first, "attaches-to-all-listeners", "listener-set-http-routing-1-route",
                       "listener-set-http-routing-1-section-route")
    listeners_are(s, first, [Listener("listener-set-http-routing-1-listener-1", ROUTE_KINDS, LISTENER_READY, 3),
                             Listener("listener-set-http-routing-1-listener-2", ROUTE_KINDS, LISTENER_READY, 2)])
    routes_accepted_by(s, second, "attaches-to-all-listeners", "listener-set-http-routing-2-route")
    listeners_are(s, second, [Listener("listener-set-http-routing-2-listener-1", ROUTE_KINDS, LISTENER_READY, 2),
                              Listener("listener-set-http-routing-2-listener-2", ROUTE_KINDS, LISTENER_READY, 2)])
    hosts = {
        "gw1": "gateway-listener-1.com", "gw2": "gateway-listener-2.com",
        "ls1a": "listener-set-http-routing-1-listener-1.com", "ls1b": "listener-set-http-routing-1-listener-2.com",
        "ls2a": "listener-set-http-routing-2-listener-1.com", "ls2b": "listener-set-http-routing-2-listener-2.com",
    }
    # Each path, the listeners that serve it and its backend.
    served = {
        "/route": (set(hosts), V1),
        "/gateway-route": ({"gw1", "gw2"}, V2),
        "/gateway-section-route": ({"gw1"}, V3),
        "/listener-set-http-routing-1-route": ({"ls1a", "ls1b"}, V2),
        "/listener-set-http-routing-1-section-route": ({"ls1a"}, V3),
        "/listener-set-http-routing-2-route": ({"ls2a", "ls2b"}, V2),
    }
    s.expect(address, *[Exp(path, host, backend=backend) if key in where else Exp(path, host, status=404)
                        for path, (where, backend) in served.items() for key, host in hosts.items()])


@case("ListenerSetProtocolConflict", [GATEWAY, LISTENER_SET], t("listenerset-protocol-conflict"))
def protocol_conflict(s: Suite) -> None:
    """Validate Listener Precedence when a ListenerSet listener has a protocol conflict"""
    conflict_case(s, "gateway-with-listenerset-protocol-conflict", "protocol", "ProtocolConflict")


@case("ListenerSetReferenceGrant", [GATEWAY, LISTENER_SET, REFERENCE_GRANT], t("listenerset-reference-grant"))
def reference_grant(s: Suite) -> None:
    """ListenerSet with reference grant support"""
    condition(s, Ref("gateway-with-listener-sets-test-reference-grant"), GATEWAY_ACCEPTED)
    granted = ls_ref("listenerset-with-reference-grant")
    set_has(s, granted, Cond("Accepted"), Cond("Programmed"))
    listeners_have(s, granted, (Cond("ResolvedRefs"),), "listenerset-with-reference-grant-listener")
    refused = ls_ref("listenerset-without-reference-grant", "gateway-api-listener-sets-test-reference-grant-ns")
    set_has(s, refused, *NOT_VALID)
    listeners_have(s, refused, (Cond("ResolvedRefs", "False", "RefNotPermitted"),),
                   "listenerset-without-reference-grant-listener")


@case("ListenerSetRouteStatusScopedToParentRef", [GATEWAY, LISTENER_SET, HTTPROUTE],
      t("listenerset-route-status-scoped-to-parentref"))
def route_status_scoped_to_parentref(s: Suite) -> None:
    """A Route's status.parents must contain entries only for its explicitly declared parentRefs"""
    gw = Ref("gateway-parentref")
    condition(s, gw, GATEWAY_ACCEPTED)
    attached_listener_sets(s, gw, 1)
    ls = ls_ref("listenerset-parentref")
    listeners_are(s, ls, [Listener("listenerset-parentref-listener", ROUTE_KINDS, LISTENER_READY, 1)])
    # A route names only the Gateway: its status has that parent alone.
    route_condition(s, "route-parentref-gwonly", gw, Cond("Accepted"))
    s.route_parents("HTTPRoute", "route-parentref-gwonly", INFRA, [Parent(gw, (Cond("Accepted"),))])
    # A route names only the ListenerSet: its status has that parent alone, not the Gateway above it.
    routes_accepted_by(s, ls, "route-parentref-lsonly")
    s.route_parents("HTTPRoute", "route-parentref-lsonly", INFRA, [Parent(ls, (ACCEPTED,))])
