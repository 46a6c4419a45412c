"""csrf end to end: real Envoy refusing cross-site POSTs, or only counting them (shadow)."""

from __future__ import annotations

import pytest

from tests.policies.conftest import Stack
from tests.policies.test_attachment import policy, ref

pytestmark = pytest.mark.e2e


def post(stack: Stack, host: str, origin: str) -> int:
    return stack.get(host, "/form", method="POST", content=b"x=1", headers={"origin": origin}).status_code


def stat(stack: Stack, name: str) -> int:
    admin = stack.lg.proxies()["default/gw"]["admin"]
    text = stack.lg.client.get(f"http://{admin}/stats?filter=^{name}$").text
    return sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + ":"))


def test_cross_site_posts_are_refused_or_counted(stack: Stack) -> None:
    stack.write("csrf.yaml",
                stack.route("csrf", "csrf.example.com"),
                stack.route("csrf-shadow", "csrf-shadow.example.com"),
                policy("csrf", ref("csrf"), "  csrf:\n    additionalOrigins: [{suffix: .trusted.example}]"),
                policy("csrf-shadow", ref("csrf-shadow"), "  csrf: {percentageShadowed: 100}"))
    refused = stack.wait("csrf.example.com", lambda r: r.status_code == 403, "/form", method="POST",
                         headers={"origin": "http://evil.example"}, content=b"x=1", what="csrf to apply")
    assert refused.text == "Invalid origin"
    assert post(stack, "csrf.example.com", "http://csrf.example.com") == 200  # same origin
    assert post(stack, "csrf.example.com", "https://app.trusted.example") == 200  # additional origin
    assert stack.get("csrf.example.com", "/form", headers={"origin": "http://evil.example"}).status_code == 200  # GET

    before = stat(stack, "http.http-8080.csrf.request_invalid")
    assert post(stack, "csrf-shadow.example.com", "http://evil.example") == 200  # shadow: never refused ...
    assert stat(stack, "http.http-8080.csrf.request_invalid") == before + 1  # ... but counted
