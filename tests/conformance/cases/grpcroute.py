"""grpcroute conformance tests (upstream conformance/tests/grpcroute-*.go) not yet written as
lychgate cases: listed with their upstream ShortName, manifests and features, reported as
skipped. Replace a `pending_case` by a `@case` function to make it run."""

from __future__ import annotations

from tests.conformance.cases import pending_case
from tests.conformance.features import GATEWAY, GRPCROUTE

pending_case("GRPCRouteExactMethodMatching", [GATEWAY, GRPCROUTE], ["tests/grpcroute-exact-method-matching.yaml"])
pending_case("GRPCRouteHeaderMatching", [GATEWAY, GRPCROUTE], ["tests/grpcroute-header-matching.yaml"])
pending_case("GRPCRouteListenerHostnameMatching", [GATEWAY, GRPCROUTE], ["tests/grpcroute-listener-hostname-matching.yaml"])
pending_case("GRPCRouteNamedRule", [GATEWAY, GRPCROUTE, "GRPCRouteNamedRouteRule"], ["tests/grpcroute-named-rule.yaml"])
pending_case("GRPCRouteWeight", [GATEWAY, GRPCROUTE], ["tests/grpcroute-weight.yaml"])
