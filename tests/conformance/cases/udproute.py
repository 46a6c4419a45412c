"""udproute conformance tests (upstream conformance/tests/udproute-*.go) not yet written as
lychgate cases: listed with their upstream ShortName, manifests and features, reported as
skipped. Replace a `pending_case` by a `@case` function to make it run."""

from __future__ import annotations

from tests.conformance.cases import pending_case
from tests.conformance.features import GATEWAY, REFERENCE_GRANT, UDPROUTE

pending_case("UDPRouteInvalidBackendRefNonexistent", [GATEWAY, UDPROUTE], ["tests/udproute-invalid-backendref-nonexistent.yaml"])
pending_case("UDPRouteInvalidCrossNamespaceBackendRef", [GATEWAY, UDPROUTE], ["tests/udproute-invalid-cross-namespace-backend-ref.yaml"])
pending_case("UDPRouteMultipleRoutesAttachment", [GATEWAY, UDPROUTE], ["tests/udproute-multiple-routes-attachment.yaml"])
pending_case("UDPRouteNotAllowedByListeners", [GATEWAY, UDPROUTE], ["tests/udproute-not-allowed-by-listeners.yaml"])
pending_case("UDPRouteParentRefAttachAllListeners", [GATEWAY, UDPROUTE], ["tests/udproute-parentref-attach-all-listeners.yaml"])
pending_case("UDPRouteParentRefPortAndSectionName", [GATEWAY, UDPROUTE], ["tests/udproute-parentref-port-and-section-name.yaml"])
pending_case("UDPRouteReferenceGrant", [GATEWAY, UDPROUTE, REFERENCE_GRANT], ["tests/udproute-reference-grant.yaml"])
pending_case("UDPRouteSimple", [GATEWAY, UDPROUTE], ["tests/udproute-simple.yaml"])
pending_case("UDPRouteWeightedRouting", [GATEWAY, UDPROUTE], ["tests/udproute-weighted-routing.yaml"])
