"""TCPRoute conformance cases (upstream conformance/tests/tcproute-*.go)."""

from __future__ import annotations

import time

from tests.conformance.cases import case
from tests.conformance.conf2_support import (
    ListenerWant,
    expect_tcp,
    listener_address,
    listeners_match,
    remove_object,
    route_parent_condition,
    routes_accepted,
    tcp_pod_once,
    weighted,
    zero_routes,
)
from tests.conformance.features import GATEWAY, REFERENCE_GRANT, TCPROUTE
from tests.conformance.suite import INFRA, WEB, Cond, Ref, Suite, ensure

CORE = [GATEWAY, TCPROUTE]
KIND = "TCPRoute"
ACCEPTED = Cond("Accepted", "True", "Accepted")


def t(name: str) -> list[str]:
    return [f"tests/{name}.yaml"]


@case("TCPRouteInvalidBackendRefNonexistent", CORE, t("tcproute-invalid-backendref-nonexistent"))
def invalid_backendref_nonexistent(s: Suite) -> None:
    """A TCPRoute should set ResolvedRefs=False with reason BackendNotFound when its backendRef points to a Service that does not exist."""
    route_parent_condition(s, KIND, "tcp-route-invalid-backend-ref-nonexistent", INFRA, "tcp-gateway-invalid-backend",
                           Cond("ResolvedRefs", "False", "BackendNotFound"))


@case("TCPRouteInvalidCrossNamespaceBackendRef", [*CORE, REFERENCE_GRANT],
      t("tcproute-invalid-cross-namespace-backend-ref"), provisional=True)
def invalid_cross_namespace_backend_ref(s: Suite) -> None:
    """A TCPRoute with a backendRef in another namespace and no matching ReferenceGrant should set ResolvedRefs=False with reason RefNotPermitted."""
    gw = "tcp-invalid-cross-namespace-backend-ref-gateway"
    routes_accepted(s, KIND, Ref(gw, sections=("tcp",)), "tcp-invalid-cross-namespace-backend-ref")
    route_parent_condition(s, KIND, "tcp-invalid-cross-namespace-backend-ref", INFRA, gw,
                           Cond("ResolvedRefs", "False", "RefNotPermitted"))


@case("TCPRouteInvalidNonTCPListener", CORE, t("tcproute-invalid-non-tcp-listener"), provisional=True)
def invalid_non_tcp_listener(s: Suite) -> None:
    """A TCPRoute should set Accepted=False with reason NotAllowedByListeners when attaching to a non-TCP listener via sectionName."""
    gw = "tcp-mixed-protocol-gateway"
    route_parent_condition(s, KIND, "tcp-route", INFRA, gw, Cond("Accepted", "False", "NotAllowedByListeners"))
    zero_routes(s, gw)


@case("TCPRouteMultipleRoutesAttachment", CORE, t("tcproute-multiple-routes-attachment"))
def multiple_routes_attachment(s: Suite) -> None:
    """When two TCPRoutes target the same Gateway listener, both are Accepted; only the oldest receives traffic and the listener counts both."""
    gw = "tcp-multi-route-attach-gateway"
    address = routes_accepted(s, KIND, Ref(gw, sections=("tcp",)), "tcproute-attach-older")
    time.sleep(1.0)  # the newer route must have a strictly later creation time (second precision)
    newer = {
        "apiVersion": "gateway.networking.k8s.io/v1alpha2", "kind": KIND,
        "metadata": {"name": "tcproute-attach-newer", "namespace": INFRA},
        "spec": {"parentRefs": [{"name": gw, "sectionName": "tcp"}],
                 "rules": [{"backendRefs": [{"name": "tcp-attach-backend-2", "port": 3000}]}]},
    }
    s.apply("case-TCPRouteMultipleRoutesAttachment-newer", [newer])
    route_parent_condition(s, KIND, "tcproute-attach-older", INFRA, gw, ACCEPTED)
    listeners_match(s, gw, [ListenerWant("tcp", (ACCEPTED,), 2, ("TCPRoute",))])
    expect_tcp(s, address, "tcp-attach-backend-1")
    for i in range(100):
        pod = tcp_pod_once(address)
        ensure(pod.startswith("tcp-attach-backend-1-"),
               f"request {i + 1}/100 reached {pod!r}; only the oldest route's backend may answer")


@case("TCPRouteParentRefAttachAll", CORE, t("tcproute-parentref-attach-all"), provisional=True)
def parentref_attach_all(s: Suite) -> None:
    """A TCPRoute whose parentRef sets neither sectionName nor port attaches to every TCP listener of the Gateway."""
    gw = "tcp-attach-all-gateway"
    route_parent_condition(s, KIND, "tcp-route-attach-all", INFRA, gw, ACCEPTED)
    for listener in ("one", "two", "three", "four"):
        expect_tcp(s, listener_address(s, gw, listener), "tcp-echo-attach-all")


@case("TCPRouteParentRefPortAndSectionName", CORE, t("tcproute-parentref-port-and-section-name"), provisional=True)
def parentref_port_and_section_name(s: Suite) -> None:
    """A TCPRoute attaches to a TCP listener by port, by sectionName, or by both."""
    gw = "tcp-multi-listener-gateway"
    for route, listener, backend in (("tcp-route-by-port", "one", "tcp-echo-one"),
                                     ("tcp-route-by-section", "two", "tcp-echo-two"),
                                     ("tcp-route-by-section-and-port", "three", "tcp-echo-three")):
        route_parent_condition(s, KIND, route, INFRA, gw, ACCEPTED)
        expect_tcp(s, listener_address(s, gw, listener), backend)


@case("TCPRouteReferenceGrant", [*CORE, REFERENCE_GRANT], t("tcproute-reference-grant"))
def reference_grant(s: Suite) -> None:
    """A TCPRoute with a backendRef in another namespace forwards while a ReferenceGrant permits it, and reports RefNotPermitted once the grant is deleted."""
    gw = "tcp-reference-grant-gateway"
    address = routes_accepted(s, KIND, Ref(gw, sections=("tcp",)), "tcp-reference-grant")
    expect_tcp(s, address, "tcp-reference-grant-backend", namespace=WEB)
    remove_object(s, "case-TCPRouteReferenceGrant", "ReferenceGrant", "tcp-reference-grant", WEB)
    route_parent_condition(s, KIND, "tcp-reference-grant", INFRA, gw, Cond("ResolvedRefs", "False", "RefNotPermitted"))


@case("TCPRouteWeightedRouting", CORE, t("tcproute-weighted-routing"), provisional=True)
def weighted_routing(s: Suite) -> None:
    """A TCPRoute with weighted backends distributes connections by weight (70/30/0)."""
    address = routes_accepted(s, KIND, Ref("tcp-weighted-gateway", sections=("tcp",)), "tcp-weighted-route")
    weighted(lambda: tcp_pod_once(address), {"tcp-backend-v1": 0.7, "tcp-backend-v2": 0.3}, tolerance=0.03)
