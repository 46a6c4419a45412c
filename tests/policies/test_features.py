"""The smaller TrafficPolicy features end to end: rate limit, CORS, header modifiers,
buffer, timeouts and retry."""

from __future__ import annotations

from typing import Any

import pytest

from tests.policies.conftest import Stack
from tests.policies.conftest import route_policy as policy
from tests.policies.servers import body_of

pytestmark = pytest.mark.e2e


def test_local_rate_limit_token_bucket(stack: Stack) -> None:
    stack.write("limited.yaml", stack.route("limited", "limited.example.com"),
                stack.route("unlimited", "unlimited.example.com"), policy("limited", "limited", """
  rateLimit:
    local:
      tokenBucket: {maxTokens: 3, tokensPerFill: 1, fillInterval: 1h}"""))
    stack.wait("limited.example.com", lambda r: r.status_code == 429, what="the bucket to run dry")
    resp = stack.get("limited.example.com")
    assert resp.status_code == 429
    assert resp.headers["x-ratelimit-limit"] == "3"
    assert resp.headers["x-ratelimit-remaining"] == "0"
    assert all(stack.get("unlimited.example.com").status_code == 200 for _ in range(5))  # other routes are not limited


def test_cors_preflight_and_actual_requests(stack: Stack) -> None:
    stack.write("cors.yaml", stack.route("cors", "cors.example.com"), policy("cors", "cors", """
  cors:
    allowOrigins: ["https://app.example.com", "https://*.trusted.example"]
    allowMethods: [GET, PUT]
    allowHeaders: [x-api-key]
    exposeHeaders: [x-backend]
    maxAge: 600
    allowCredentials: true"""))
    preflight = {"origin": "https://app.example.com", "access-control-request-method": "PUT"}
    resp = stack.wait("cors.example.com", lambda r: "access-control-allow-origin" in r.headers, method="OPTIONS",
                      headers=preflight, what="CORS preflights to be answered")
    assert resp.status_code == 200
    assert resp.headers["access-control-allow-origin"] == "https://app.example.com"
    assert resp.headers["access-control-allow-methods"] == "GET, PUT"
    assert resp.headers["access-control-allow-headers"] == "x-api-key"
    assert resp.headers["access-control-max-age"] == "600"
    assert resp.headers["access-control-allow-credentials"] == "true"
    wildcard = stack.get("cors.example.com", headers={"origin": "https://eu.trusted.example"})
    assert wildcard.headers["access-control-allow-origin"] == "https://eu.trusted.example"
    assert wildcard.headers["access-control-expose-headers"] == "x-backend"
    stranger = stack.get("cors.example.com", headers={"origin": "https://evil.example"})
    assert "access-control-allow-origin" not in stranger.headers


def test_cors_origin_patterns_as_kgateway_writes_them(stack: Stack) -> None:
    """kgateway's cors suite: an exact origin, a wildcard last label (https://a.b.*) and a
    wildcard first label taking several labels (https://*.edu), checked by real preflights."""
    stack.write("cors-patterns.yaml", stack.route("cors-patterns", "cors-patterns.example.com"),
                policy("cors-patterns", "cors-patterns", """
  cors:
    allowOrigins: [https://notexample.com, "https://a.b.*", "https://*.edu"]
    allowMethods: [GET, POST, DELETE]
    allowHeaders: [x-custom-header]"""))

    def preflight(origin: str) -> Any:
        return stack.get("cors-patterns.example.com", method="OPTIONS",
                         headers={"origin": origin, "access-control-request-method": "GET"})

    stack.wait("cors-patterns.example.com", lambda r: "access-control-allow-origin" in r.headers, method="OPTIONS",
               headers={"origin": "https://notexample.com", "access-control-request-method": "GET"},
               what="CORS preflights to be answered")
    for origin in ("https://notexample.com", "https://a.b.c", "https://test.cors.edu"):
        resp = preflight(origin)
        assert resp.status_code == 200 and resp.headers["access-control-allow-origin"] == origin, origin
        assert resp.headers["access-control-allow-methods"] == "GET, POST, DELETE"
    for origin in ("https://notedu.com", "https://edu", "http://a.b.c", "https://notexample.org",
                   "https://api.notexample.com", "https:/a.b.c", "https://a.b.c:8443"):
        assert "access-control-allow-origin" not in preflight(origin).headers, origin


def test_header_modifiers_and_route_filters(stack: Stack) -> None:
    stack.write("headers.yaml", stack.route("headers", "headers.example.com", """
        - filters:
            - type: RequestHeaderModifier
              requestHeaderModifier: {set: [{name: x-owner, value: route}]}
          backendRefs: [{name: app, port: 80}]
    """), policy("headers", "headers", """
  headerModifiers:
    request: {set: [{name: x-owner, value: policy}, {name: x-policy, value: "on"}], remove: [x-internal]}
    response: {add: [{name: x-served-by, value: lychgate}], remove: [x-backend]}"""))
    resp = stack.wait("headers.example.com", lambda r: r.headers.get("x-served-by") == "lychgate",
                      headers={"x-internal": "secret"}, what="header modifiers to apply")
    seen = body_of(resp)["headers"]
    assert seen["x-policy"] == "on" and "x-internal" not in seen
    assert seen["x-owner"] == "route"  # the HTTPRoute's own filter wins over the policy
    assert "x-backend" not in resp.headers


def test_buffer_limits_request_bodies(stack: Stack) -> None:
    stack.write("buffered.yaml", stack.route("buffered", "buffered.example.com"),
                policy("buffered", "buffered", "  buffer: {maxRequestSize: 1Ki}"))
    stack.wait("buffered.example.com", lambda r: r.status_code == 413, method="POST", content=b"x" * 4096,
               what="large bodies to be refused")
    small = stack.get("buffered.example.com", method="POST", content=b"y" * 512)
    assert small.status_code == 200 and body_of(small)["body"] == "y" * 512


def test_timeouts_and_retry(stack: Stack) -> None:
    stack.write("resilient.yaml", stack.route("resilient", "resilient.example.com"), policy("resilient", "resilient", """
  timeouts: {request: 300ms}
  retry: {retryOn: [5xx], attempts: 2, backoffBaseInterval: 10ms}"""))
    stack.wait("resilient.example.com", lambda r: r.status_code == 504, "/delay/1000", "slow answers to time out")
    assert stack.get("resilient.example.com", "/delay/10").status_code == 200
    # /fail/2 fails twice, then answers: two retries make it through.
    resp = stack.get("resilient.example.com", "/fail/2")
    assert resp.status_code == 200
    assert stack.echo.hits["/fail/2"] == 3
    # /fail/5 keeps failing past the two retries.
    assert stack.get("resilient.example.com", "/fail/5").status_code == 503
    assert stack.echo.hits["/fail/5"] == 3
