"""httproute conformance tests (upstream conformance/tests/httproute-*.go) not yet written as
lychgate cases: listed with their upstream ShortName, manifests and features, reported as
skipped. Replace a `pending_case` by a `@case` function to make it run."""

from __future__ import annotations

from tests.conformance.cases import pending_case
from tests.conformance.features import GATEWAY, HTTPROUTE

pending_case("HTTPRouteBackendProtocolH2C", [GATEWAY, HTTPROUTE, "HTTPRouteBackendProtocolH2C"], ["tests/httproute-backend-protocol-h2c.yaml"])
pending_case("HTTPRouteCORS", [GATEWAY, HTTPROUTE, "HTTPRouteCORS"], ["tests/httproute-cors.yaml"])
pending_case("HTTPRouteHTTPSListenerDetectMisdirectedRequests", [GATEWAY, HTTPROUTE], ["tests/httproute-https-listener-detect-misdirected-requests.yaml"])
pending_case("HTTPRouteRequestHeaderModifierBackendWeights", [GATEWAY, HTTPROUTE, "HTTPRouteBackendRequestHeaderModification"], ["tests/httproute-request-header-modifier-backend-weights.yaml"])
pending_case("HTTPRouteRequestMirror", [GATEWAY, HTTPROUTE, "HTTPRouteRequestMirror"], ["tests/httproute-request-mirror.yaml"])
pending_case("HTTPRouteRequestMultipleMirrors", [GATEWAY, HTTPROUTE, "HTTPRouteRequestMultipleMirrors"], ["tests/httproute-request-multiple-mirrors.yaml"])
pending_case("HTTPRouteRequestPercentageMirror", [GATEWAY, HTTPROUTE, "HTTPRouteRequestPercentageMirror"], ["tests/httproute-request-percentage-mirror.yaml"])
pending_case("HTTPRouteRetry", [GATEWAY, HTTPROUTE, "HTTPRouteRetry"], ["tests/httproute-retry.yaml"])
