"""GRPCRoute conformance cases (upstream conformance/tests/grpcroute-*.go)."""

from __future__ import annotations

import grpc

from tests.conformance.cases import case
from tests.conformance.conf2_support import (
    GrpcExp,
    expect_grpc,
    grpc_check,
    routes_accepted,
    weighted,
)
from tests.conformance.features import GATEWAY, GRPCROUTE
from tests.conformance.suite import Ref, Suite

CORE = [GATEWAY, GRPCROUTE]
KIND = "GRPCRoute"
SAME = Ref("same-namespace")
V1, V2, V3 = "grpc-infra-backend-v1", "grpc-infra-backend-v2", "grpc-infra-backend-v3"
UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED


def t(name: str) -> list[str]:
    return [f"tests/{name}.yaml"]


def accepted(s: Suite, route: str, ref: Ref = SAME) -> str:
    """Upstream's GatewayAndRoutesMustBeAccepted for a GRPCRoute (listeners ready included)."""
    address = routes_accepted(s, KIND, ref, route)
    s.listeners_ready(ref)
    return address


@case("GRPCExactMethodMatching", CORE, t("grpcroute-exact-method-matching"))
def exact_method_matching(s: Suite) -> None:
    """A single GRPCRoute with exact method matching for different backends"""
    address = accepted(s, "exact-matching")
    expect_grpc(address, GrpcExp("Echo", backend=V1), GrpcExp("EchoTwo", backend=V2),
                GrpcExp("EchoThree", code=UNIMPLEMENTED))


@case("GRPCRouteHeaderMatching", CORE, t("grpcroute-header-matching"))
def header_matching(s: Suite) -> None:
    """A single GRPCRoute with header matching for different backends"""
    address = accepted(s, "grpc-header-matching")

    def md(**headers: str) -> dict[str, str]:
        return {k.replace("_", "-"): v for k, v in headers.items()}

    expect_grpc(
        address,
        GrpcExp(metadata=md(Version="one"), backend=V1),
        GrpcExp(metadata=md(Version="two"), backend=V2),
        GrpcExp(metadata=md(Version="two", Color="orange"), backend=V1),
        GrpcExp(metadata=md(Version="two", Color="blue"), backend=V2),
        GrpcExp(metadata=md(Color="orange"), code=UNIMPLEMENTED),
        GrpcExp(metadata=md(Some_Other_Header="one"), code=UNIMPLEMENTED),
        GrpcExp(metadata=md(Color="blue"), backend=V1),
        GrpcExp(metadata=md(Color="green"), backend=V1),
        GrpcExp(metadata=md(Color="red"), backend=V2),
        GrpcExp(metadata=md(Color="yellow"), backend=V2),
        GrpcExp(metadata=md(Color="purple"), code=UNIMPLEMENTED),
    )


@case("GRPCRouteListenerHostnameMatching", CORE, t("grpcroute-listener-hostname-matching"))
def listener_hostname_matching(s: Suite) -> None:
    """Multiple GRPC listeners with the same port and different hostnames, each with a different GRPCRoute"""
    gw = "grpcroute-listener-hostname-matching"
    accepted(s, "backend-v1", Ref(gw, sections=("listener-1",)))
    accepted(s, "backend-v2", Ref(gw, sections=("listener-2",)))
    address = accepted(s, "backend-v3", Ref(gw, sections=("listener-3", "listener-4")))
    expect_grpc(
        address,
        GrpcExp(authority="bar.com", backend=V1),
        GrpcExp(authority="foo.bar.com", backend=V2),
        GrpcExp(authority="baz.bar.com", backend=V3),
        GrpcExp(authority="boo.bar.com", backend=V3),
        GrpcExp(authority="multiple.prefixes.bar.com", backend=V3),
        GrpcExp(authority="multiple.prefixes.foo.com", backend=V3),
        GrpcExp(authority="foo.com", code=UNIMPLEMENTED),
        GrpcExp(authority="no.matching.host", code=UNIMPLEMENTED),
    )


@case("GRPCRouteNamedRule", [*CORE, "GRPCRouteNamedRouteRule"], t("grpcroute-named-rule"), provisional=True)
def named_rule(s: Suite) -> None:
    """A GRPCRoute with a named GRPCRouteRule"""
    address = accepted(s, "grpc-named-rules")
    expect_grpc(address, GrpcExp("Echo", backend=V1), GrpcExp("EchoTwo", backend=V2))


@case("GRPCRouteWeight", CORE, t("grpcroute-weight"))
def weight(s: Suite) -> None:
    """An GRPCRoute with weighted backends"""
    address = accepted(s, "weighted-backends")
    exp = GrpcExp(backend="grpc-infra-backend-v")
    expect_grpc(address, exp)
    weighted(lambda: grpc_check(address, exp), {V1: 0.7, V2: 0.3, V3: 0.0})
