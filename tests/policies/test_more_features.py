"""The rest of TrafficPolicy end to end: compression negotiated with
Accept-Encoding, gzip request bodies, urlRewrite by regex, autoHostRewrite to a
Backend's host name, and a local rate limit in shadow mode."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.policies.conftest import Stack, lychgate_object
from tests.policies.conftest import route_policy as policy
from tests.policies.servers import body_of

pytestmark = pytest.mark.e2e


def test_compression_is_negotiated_with_accept_encoding(stack: Stack) -> None:
    stack.write("gzip.yaml", stack.route("gzip", "gzip.example.com"), stack.route("plain", "plain.example.com"),
                policy("gzip", "gzip", "  compression: {responseCompression: {}, requestDecompression: {}}"))
    zipped = stack.wait("gzip.example.com", lambda r: r.headers.get("content-encoding") == "gzip",
                        headers={"accept-encoding": "gzip"}, what="responses to be gzipped")
    assert body_of(zipped)["pod"] == "app"  # httpx undid the gzip: the body is intact
    assert "accept-encoding" in zipped.headers.get("vary", "").lower()
    for accept in ("identity", "br"):  # a client that cannot take gzip gets the body as it is
        resp = stack.get("gzip.example.com", headers={"accept-encoding": accept})
        assert "content-encoding" not in resp.headers and body_of(resp)["pod"] == "app"
    other = stack.get("plain.example.com", headers={"accept-encoding": "gzip"})
    assert "content-encoding" not in other.headers  # the policy's route only
    sent = json.dumps({"order": 42, "items": ["a"] * 50}).encode()
    resp = stack.get("gzip.example.com", method="POST", content=gzip.compress(sent),
                     headers={"content-encoding": "gzip", "content-type": "application/json"})
    assert body_of(resp)["body"] == sent.decode()  # the backend got the request body unzipped


def test_url_rewrite_by_regex(stack: Stack) -> None:
    stack.write("regex.yaml", stack.route("regex", "regex.example.com"), policy("regex", "regex", r"""
  urlRewrite:
    pathRegex: {pattern: "^/v1/([^/]+)/(.*)$", substitution: "/api/\\2/\\1"}"""))
    resp = stack.wait("regex.example.com", lambda r: body_of(r)["path"].startswith("/api/"), path="/v1/users/42",
                      what="the path to be rewritten")
    assert body_of(resp)["path"] == "/api/42/users"
    assert body_of(stack.get("regex.example.com", "/other"))["path"] == "/other"  # no match: unchanged


def test_auto_host_rewrite_to_the_backend_host_name(stack: Stack) -> None:
    outside = stack.servers.echo("outside")
    stack.write("auto-host.yaml",
                lychgate_object("Backend", "named", f"  static:\n    hosts: [{{host: localhost, port: {outside.port}}}]"),
                stack.route("auto-host", "auto-host.example.com",
                            "- backendRefs: [{group: gateway.lychgate.dev, kind: Backend, name: named}]"),
                policy("auto-host", "auto-host", "  autoHostRewrite: true"))
    resp = stack.wait("auto-host.example.com", lambda r: r.status_code == 200 and
                      body_of(r)["headers"].get("host") == "localhost", what="Host to become the backend's name")
    assert body_of(resp)["pod"] == "outside"


def test_local_rate_limit_in_shadow_mode(stack: Stack) -> None:
    stack.write("shadow.yaml", stack.route("shadow", "shadow.example.com"),
                stack.route("enforced", "enforced.example.com"),
                policy("shadow", "shadow", """
  rateLimit:
    local:
      tokenBucket: {maxTokens: 1, fillInterval: 1h}
      percentEnforced: 0"""),
                policy("enforced", "enforced", """
  rateLimit:
    local:
      tokenBucket: {maxTokens: 1, fillInterval: 1h}"""))
    stack.wait("enforced.example.com", lambda r: r.status_code == 429, what="the enforced bucket to run dry")
    assert stack.applied("shadow")["status"] == "True"
    assert all(stack.get("shadow.example.com").status_code == 200 for _ in range(5))  # counted, never refused
