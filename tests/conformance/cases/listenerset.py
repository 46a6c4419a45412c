"""listenerset conformance tests (upstream conformance/tests/listenerset-*.go) not yet written as
lychgate cases: listed with their upstream ShortName, manifests and features, reported as
skipped. Replace a `pending_case` by a `@case` function to make it run."""

from __future__ import annotations

from tests.conformance.cases import pending_case
from tests.conformance.features import GATEWAY, HTTPROUTE, LISTENER_SET, REFERENCE_GRANT

pending_case("ListenerSetAllowedNamespaceNone", [GATEWAY, LISTENER_SET, HTTPROUTE], ["tests/listenerset-allowed-namespace-none.yaml"])
pending_case("ListenerSetAllowedNamespaceSame", [GATEWAY, LISTENER_SET, HTTPROUTE], ["tests/listenerset-allowed-namespace-same.yaml"])
pending_case("ListenerSetAllowedNamespaceSelector", [GATEWAY, LISTENER_SET, HTTPROUTE], ["tests/listenerset-allowed-namespace-selector.yaml"])
pending_case("ListenerSetAllowedRoutesNamespaces", [GATEWAY, LISTENER_SET, HTTPROUTE], ["tests/listenerset-allowed-routes-namespaces.yaml"])
pending_case("ListenerSetAllowedRoutesSupportedKinds", [GATEWAY, LISTENER_SET, HTTPROUTE], ["tests/listenerset-allowed-routes-supported-kinds.yaml"])
pending_case("ListenerSetDefaultNotAllowed", [GATEWAY, LISTENER_SET, HTTPROUTE], ["tests/listenerset-default-not-allowed.yaml"])
pending_case("ListenerSetDualParentRefIndependence", [GATEWAY, LISTENER_SET, HTTPROUTE], ["tests/listenerset-dual-parentref-independence.yaml"])
pending_case("ListenerSetGatewayParentSectionNameNotFound", [GATEWAY, LISTENER_SET, HTTPROUTE], ["tests/listenerset-gateway-parent-section-name-not-found.yaml"])
pending_case("ListenerSetHostnameConflict", [GATEWAY, LISTENER_SET, HTTPROUTE], ["tests/listenerset-hostname-conflict.yaml"])
pending_case("ListenerSetHTTPRouting", [GATEWAY, LISTENER_SET, HTTPROUTE], ["tests/listenerset-http-routing.yaml"])
pending_case("ListenerSetProtocolConflict", [GATEWAY, LISTENER_SET, HTTPROUTE], ["tests/listenerset-protocol-conflict.yaml"])
pending_case("ListenerSetReferenceGrant", [GATEWAY, LISTENER_SET, HTTPROUTE, REFERENCE_GRANT], ["tests/listenerset-reference-grant.yaml"])
pending_case("ListenerSetRouteStatusScopedToParentRef", [GATEWAY, LISTENER_SET, HTTPROUTE], ["tests/listenerset-route-status-scoped-to-parentref.yaml"])
