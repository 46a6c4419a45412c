"""UDPRoute conformance cases (upstream conformance/tests/udproute-*.go)."""

from __future__ import annotations

import time

from tests.conformance.cases import case
from tests.conformance.conf2_support import (
    ListenerWant,
    backend_of,
    dns_query,
    expect_udp,
    listener_address,
    listeners_match,
    remove_object,
    route_parent_condition,
    routes_accepted,
    udp_echo_once,
    weighted,
    zero_routes,
)
from tests.conformance.features import GATEWAY, REFERENCE_GRANT, TLSROUTE, UDPROUTE
from tests.conformance.suite import APP, INFRA, Cond, Ref, Suite, ensure, eventually

CORE = [GATEWAY, UDPROUTE]
KIND = "UDPRoute"
ACCEPTED = Cond("Accepted", "True", "Accepted")
READY = (Cond("Accepted"), Cond("ResolvedRefs"))


def t(name: str) -> list[str]:
    return [f"tests/{name}.yaml"]


@case("UDPRouteInvalidBackendRefNonexistent", CORE, t("udproute-invalid-backendref-nonexistent"), provisional=True)
def invalid_backendref_nonexistent(s: Suite) -> None:
    """A UDPRoute should set ResolvedRefs=False with reason BackendNotFound when its backendRef points to a Service that does not exist."""
    route_parent_condition(s, KIND, "udp-route-invalid-backend-ref-nonexistent", INFRA, "udp-gateway-invalid-backend",
                           Cond("ResolvedRefs", "False", "BackendNotFound"))


@case("UDPRouteInvalidCrossNamespaceBackendRef", [*CORE, REFERENCE_GRANT],
      t("udproute-invalid-cross-namespace-backend-ref"))
def invalid_cross_namespace_backend_ref(s: Suite) -> None:
    """A UDPRoute with a backendRef in another namespace and no ReferenceGrant should set ResolvedRefs=False with reason RefNotPermitted."""
    gw = "udp-gateway-invalid-cross-namespace-backend-ref"
    routes_accepted(s, KIND, Ref(gw), "udp-route-invalid-cross-namespace-backend-ref")
    route_parent_condition(s, KIND, "udp-route-invalid-cross-namespace-backend-ref", INFRA, gw,
                           Cond("ResolvedRefs", "False", "RefNotPermitted"))


@case("UDPRouteMultipleRoutesAttachment", CORE, t("udproute-multiple-routes-attachment"), provisional=True)
def multiple_routes_attachment(s: Suite) -> None:
    """When two UDPRoutes target the same listener, both are Accepted; only the oldest receives traffic and the listener counts both."""
    gw = "udp-multi-route-attach-gateway"
    address = routes_accepted(s, KIND, Ref(gw, sections=("udp",)), "udproute-attach-older")
    time.sleep(1.0)  # the newer route must have a strictly later creation time (second precision)
    newer = {
        "apiVersion": "gateway.networking.k8s.io/v1alpha2", "kind": KIND,
        "metadata": {"name": "udproute-attach-newer", "namespace": INFRA},
        "spec": {"parentRefs": [{"name": gw, "sectionName": "udp"}],
                 "rules": [{"backendRefs": [{"name": "udp-attach-backend-2", "port": 8080}]}]},
    }
    s.apply("case-UDPRouteMultipleRoutesAttachment-newer", [newer])
    route_parent_condition(s, KIND, "udproute-attach-older", INFRA, gw, ACCEPTED)
    route_parent_condition(s, KIND, "udproute-attach-newer", INFRA, gw, ACCEPTED)
    listeners_match(s, gw, [ListenerWant("udp", (ACCEPTED,), 2, (KIND,))])

    def only_oldest() -> None:
        for i in range(20):
            pod = str(udp_echo_once(address).get("pod", ""))
            ensure(backend_of(pod) == "udp-attach-backend-1",
                   f"probe {i + 1}/20 reached {pod!r}; only udp-attach-backend-1 may answer")
    eventually(only_oldest, "UDP traffic to reach only the oldest route's backend")


@case("UDPRouteNotAllowedByListeners", CORE, t("udproute-not-allowed-by-listeners"), provisional=True)
def not_allowed_by_listeners(s: Suite) -> None:
    """A UDPRoute targeting a listener whose protocol is not UDP is not Accepted (NotAllowedByListeners) and not attached."""
    if TLSROUTE not in s.supported:  # the only non-UDP listener here is TLS; upstream passes then
        return
    gw = "udproute-tls-only-gateway"
    route_parent_condition(s, KIND, "udproute-not-allowed-by-listeners", INFRA, gw,
                           Cond("Accepted", "False", "NotAllowedByListeners"))
    zero_routes(s, gw)


@case("UDPRouteParentRefAttachAllListeners", CORE, t("udproute-parentref-attach-all-listeners"))
def parentref_attach_all_listeners(s: Suite) -> None:
    """A UDPRoute whose parentRef sets neither port nor sectionName attaches to every UDP listener, and each forwards to the backend."""
    gw = "udp-attach-all-listeners-gateway"
    route_parent_condition(s, KIND, "udp-route-attach-all", INFRA, gw, ACCEPTED)
    listeners_match(s, gw, [ListenerWant(name, READY, 1, (KIND,)) for name in ("udp-1", "udp-2", "udp-3")])
    for listener in ("udp-1", "udp-2", "udp-3"):
        expect_udp(listener_address(s, gw, listener), service="udp-echo-attach-all", namespace=INFRA)


@case("UDPRouteParentRefPortAndSectionName", CORE, t("udproute-parentref-port-and-section-name"), provisional=True)
def parentref_port_and_section_name(s: Suite) -> None:
    """A UDPRoute attaches to a UDP listener by port, by sectionName, or by both, and each listener forwards to its route's backend."""
    gw = "udp-multi-listener-gateway"
    for route, listener, backend in (("udp-route-by-port", "by-port", "udp-echo-by-port"),
                                     ("udp-route-by-section", "by-section", "udp-echo-by-section"),
                                     ("udp-route-by-section-and-port", "by-section-and-port",
                                      "udp-echo-by-section-and-port")):
        route_parent_condition(s, KIND, route, INFRA, gw, ACCEPTED)
        expect_udp(listener_address(s, gw, listener), service=backend, namespace=INFRA)


@case("UDPRouteReferenceGrant", [*CORE, REFERENCE_GRANT], t("udproute-reference-grant"), provisional=True)
def reference_grant(s: Suite) -> None:
    """A UDPRoute with a backendRef in another namespace forwards while a ReferenceGrant permits it, and reports RefNotPermitted once the grant is deleted."""
    gw = "udp-gateway-reference-grant"
    address = routes_accepted(s, KIND, Ref(gw), "udp-route-reference-grant")
    route_parent_condition(s, KIND, "udp-route-reference-grant", INFRA, gw, Cond("ResolvedRefs", "True", "ResolvedRefs"))
    expect_udp(address)
    remove_object(s, "case-UDPRouteReferenceGrant", "ReferenceGrant", "udp-reference-grant", APP)
    route_parent_condition(s, KIND, "udp-route-reference-grant", INFRA, gw, Cond("ResolvedRefs", "False", "RefNotPermitted"))


@case("UDPRoute", [UDPROUTE, GATEWAY], t("udproute-simple"))
def simple(s: Suite) -> None:
    """Make sure UDPRoute is working"""
    address = routes_accepted(s, KIND, Ref("udp-gateway"), "udp-coredns")
    eventually(lambda: dns_query(address), f"a DNS answer through {address}")


@case("UDPRouteWeightedRouting", CORE, t("udproute-weighted-routing"))
def weighted_routing(s: Suite) -> None:
    """A UDPRoute with weighted backends distributes UDP traffic by weight; a weight-0 backend gets none."""
    address = routes_accepted(s, KIND, Ref("udp-weighted-gateway", sections=("udp",)), "udp-weighted-route")
    expect_udp(address)
    weighted(lambda: str(udp_echo_once(address, b"gateway-api-conformance-udp-weight\n").get("pod", "")),
             {"udp-backend-v1": 0.7, "udp-backend-v2": 0.3, "udp-backend-v3": 0.0})
