"""tlsroute conformance tests (upstream conformance/tests/tlsroute-*.go) not yet written as
lychgate cases: listed with their upstream ShortName, manifests and features, reported as
skipped. Replace a `pending_case` by a `@case` function to make it run."""

from __future__ import annotations

from tests.conformance.cases import pending_case
from tests.conformance.features import GATEWAY, REFERENCE_GRANT, TLSROUTE

pending_case("TLSRouteHostnameIntersection", [GATEWAY, TLSROUTE], ["tests/tlsroute-hostname-intersection.yaml"])
pending_case("TLSRouteInvalidBackendRefNonexistent", [GATEWAY, TLSROUTE], ["tests/tlsroute-invalid-backendref-nonexistent.yaml"])
pending_case("TLSRouteInvalidBackendRefUnknownKind", [GATEWAY, TLSROUTE], ["tests/tlsroute-invalid-backendref-unknown-kind.yaml"])
pending_case("TLSRouteInvalidNoMatchingListenerHostname", [GATEWAY, TLSROUTE], ["tests/tlsroute-invalid-no-matching-listener-hostname.yaml"])
pending_case("TLSRouteInvalidNoMatchingListener", [GATEWAY, TLSROUTE], ["tests/tlsroute-invalid-no-matching-listener.yaml"])
pending_case("TLSRouteInvalidReferenceGrant", [GATEWAY, TLSROUTE, REFERENCE_GRANT], ["tests/tlsroute-invalid-reference-grant.yaml"])
pending_case("TLSRouteListenerMixedTerminationNotSupported", [GATEWAY, TLSROUTE], ["tests/tlsroute-listener-mixed-termination-not-supported.yaml"])
pending_case("TLSRouteListenerPassthroughSupportedKinds", [GATEWAY, TLSROUTE], ["tests/tlsroute-listener-passthrough-supported-kinds.yaml"])
pending_case("TLSRouteListenerTerminateNotSupported", [GATEWAY, TLSROUTE], ["tests/tlsroute-listener-terminate-not-supported.yaml"])
pending_case("TLSRouteListenerTerminateSupportedKinds", [GATEWAY, TLSROUTE, "TLSRouteModeTerminate"], ["tests/tlsroute-listener-terminate-supported-kinds.yaml"])
pending_case("TLSRouteMixedTerminationSameNamespace", [GATEWAY, TLSROUTE, "TLSRouteModeMixed"], ["tests/tlsroute-mixed-termination-same-namespace.yaml"])
pending_case("TLSRouteSimpleSameNamespace", [GATEWAY, TLSROUTE], ["tests/tlsroute-simple-same-namespace.yaml"])
pending_case("TLSRouteTerminateSimpleSameNamespace", [GATEWAY, TLSROUTE, "TLSRouteModeTerminate"], ["tests/tlsroute-terminate-simple-same-namespace.yaml"])
