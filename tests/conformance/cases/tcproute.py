"""tcproute conformance tests (upstream conformance/tests/tcproute-*.go) not yet written as
lychgate cases: listed with their upstream ShortName, manifests and features, reported as
skipped. Replace a `pending_case` by a `@case` function to make it run."""

from __future__ import annotations

from tests.conformance.cases import pending_case
from tests.conformance.features import GATEWAY, REFERENCE_GRANT, TCPROUTE

pending_case("TCPRouteInvalidBackendRefNonexistent", [GATEWAY, TCPROUTE], ["tests/tcproute-invalid-backendref-nonexistent.yaml"])
pending_case("TCPRouteInvalidCrossNamespaceBackendRef", [GATEWAY, TCPROUTE], ["tests/tcproute-invalid-cross-namespace-backend-ref.yaml"])
pending_case("TCPRouteInvalidNonTCPListener", [GATEWAY, TCPROUTE], ["tests/tcproute-invalid-non-tcp-listener.yaml"])
pending_case("TCPRouteMultipleRoutesAttachment", [GATEWAY, TCPROUTE], ["tests/tcproute-multiple-routes-attachment.yaml"])
pending_case("TCPRouteParentRefAttachAll", [GATEWAY, TCPROUTE], ["tests/tcproute-parentref-attach-all.yaml"])
pending_case("TCPRouteParentRefPortAndSectionName", [GATEWAY, TCPROUTE], ["tests/tcproute-parentref-port-and-section-name.yaml"])
pending_case("TCPRouteReferenceGrant", [GATEWAY, TCPROUTE, REFERENCE_GRANT], ["tests/tcproute-reference-grant.yaml"])
pending_case("TCPRouteWeightedRouting", [GATEWAY, TCPROUTE], ["tests/tcproute-weighted-routing.yaml"])
