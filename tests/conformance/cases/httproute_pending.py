"""HTTPRoute conformance cases of the features added after the runner (upstream
conformance/tests/httproute-*.go): h2c backends, misdirected requests, backend
header modifiers with weights. Those still `pending_case` are listed with their
upstream ShortName, manifests and features, and reported as skipped."""

from __future__ import annotations

import httpx

from tests.conformance.cases import case, pending_case
from tests.conformance.conf2_support import routes_accepted
from tests.conformance.features import GATEWAY, HTTPROUTE, MISDIRECTED_REQUESTS
from tests.conformance.suite import INFRA, Exp, Ref, Suite, ensure, eventually, send

SAME = Ref("same-namespace")
CORE = [GATEWAY, HTTPROUTE]
V1, V2, V3 = "infra-backend-v1", "infra-backend-v2", "infra-backend-v3"


def t(name: str) -> list[str]:
    return [f"tests/{name}.yaml"]


def accepted(s: Suite, *routes: str, ref: Ref = SAME) -> str:
    """Upstream's GatewayAndHTTPRoutesMustBeAccepted (a parent entry per route whatever its
    sectionName, listeners ready) and ResolvedRefs on each route."""
    address = routes_accepted(s, "HTTPRoute", ref, *routes)
    s.listeners_ready(ref)
    for route in routes:
        s.resolved_refs(route, INFRA, ref)
    return address


@case("HTTPRouteBackendProtocolH2C", [*CORE, "HTTPRouteBackendProtocolH2C"], t("httproute-backend-protocol-h2c"))
def backend_protocol_h2c(s: Suite) -> None:
    """A HTTPRoute with a BackendRef that has an appProtocol kubernetes.io/h2c should be functional"""
    address = s.routes_accepted(SAME, "backend-protocol-h2c")

    def h2c_request() -> None:
        # HTTP/2 with prior knowledge (the h2c upgrade is deprecated and not tested upstream).
        with httpx.Client(http1=False, http2=True, timeout=5.0) as client:
            answer = client.get(f"http://{address}/")
        ensure(answer.status_code == 200, f"status {answer.status_code}, want 200")
        ensure(answer.http_version == "HTTP/2", f"answered over {answer.http_version}, want HTTP/2")
        echo = answer.json()
        ensure(echo.get("namespace") == INFRA, f"answered from namespace {echo.get('namespace')!r}")
        ensure(str(echo.get("pod", "")).startswith(V1), f"answered by pod {echo.get('pod')!r}, want {V1}-*")

    eventually(h2c_request, "an HTTP/2 prior-knowledge request through the Gateway", 15)


@case("HTTPRouteHTTPSListenerDetectMisdirectedRequests", [GATEWAY, MISDIRECTED_REQUESTS, HTTPROUTE],
      t("httproute-https-listener-detect-misdirected-requests"))
def https_listener_detect_misdirected_requests(s: Suite) -> None:
    """HTTPS listeners on the same port detect misdirected requests and return HTTP 421 when appropriate"""
    routes = [f"https-listener-detect-misdirected-requests-test-{i}" for i in range(1, 5)]
    address = accepted(s, *routes, ref=Ref("same-namespace-with-https-listener"))
    cases = [
        ("example.org", "example.org", 200, V1),
        ("example.org", "second-example.org", 421, ""),
        ("example.org", "unknown-example.org", 404, ""),
        ("second-example.org", "second-example.org", 200, V2),
        ("second-example.org", "example.org", 421, ""),
        ("second-example.org", "unknown-example.org", 421, ""),
        ("third-example.wildcard.org", "third-example.wildcard.org", 200, V3),
        ("third-example.wildcard.org", "fith-example.wildcard.org", 200, V3),
        ("third-example.wildcard.org", "fourth-example.wildcard.org", 421, ""),
        ("third-example.wildcard.org", "second-example.org", 421, ""),
        ("third-example.wildcard.org", "unknown-example.org", 421, ""),
        # infra-backend-v4 does not exist: the fourth route reuses infra-backend-v1.
        ("fourth-example.wildcard.org", "fourth-example.wildcard.org", 200, V1),
        ("fourth-example.wildcard.org", "fith-example.wildcard.org", 421, ""),
        ("unknown-example.org", "example.org", 200, V1),
        ("unknown-example.org", "unknown-example.org", 404, ""),
    ]
    s.expect(address, *[Exp("/detect-misdirected-requests", host, scheme="https", sni=sni, status=status,
                            backend=backend) for sni, host, status, backend in cases])


@case("HTTPRouteRequestHeaderModifierBackendWeights",
      [GATEWAY, "HTTPRouteBackendRequestHeaderModification", HTTPROUTE],
      t("httproute-request-header-modifier-backend-weights"))
def request_header_modifier_backend_weights(s: Suite) -> None:
    """An HTTPRoute with backend request header modifier filter sends traffic to the correct backends"""
    address = accepted(s, "request-header-modifier-backend-weights")
    s.expect(address, Exp("/", backend="infra-backend-v"))
    for i in range(100):
        answer = send(address, Exp("/"))
        echo = answer.json() or {}
        seen = (echo.get("headers") or {}).get("Backend") or []
        ensure(len(seen) == 1, f"request {i + 1}: want one Backend header set by the backendRef, got {seen}")
        ensure(str(echo.get("pod", "")).startswith(seen[0]),
               f"request {i + 1}: answered by pod {echo.get('pod')!r}, but the backendRef filter set Backend: {seen[0]}")


pending_case("HTTPRouteCORS", [GATEWAY, HTTPROUTE, "HTTPRouteCORS"], ["tests/httproute-cors.yaml"])
pending_case("HTTPRouteRequestMirror", [GATEWAY, HTTPROUTE, "HTTPRouteRequestMirror"], ["tests/httproute-request-mirror.yaml"])
pending_case("HTTPRouteRequestMultipleMirrors", [GATEWAY, HTTPROUTE, "HTTPRouteRequestMultipleMirrors"], ["tests/httproute-request-multiple-mirrors.yaml"])
pending_case("HTTPRouteRequestPercentageMirror", [GATEWAY, HTTPROUTE, "HTTPRouteRequestPercentageMirror"], ["tests/httproute-request-percentage-mirror.yaml"])
pending_case("HTTPRouteRetry", [GATEWAY, HTTPROUTE, "HTTPRouteRetry"], ["tests/httproute-retry.yaml"])
