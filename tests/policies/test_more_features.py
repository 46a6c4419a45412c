"""The rest of TrafficPolicy end to end: compression negotiated with
Accept-Encoding, gzip request bodies, urlRewrite by regex, autoHostRewrite to a
Backend's host name, a local rate limit in shadow mode, internal redirects and
injected faults."""

from __future__ import annotations

import gzip
import http.client
import json
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web

from tests.harness import wait_for
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


def test_http_upgrade_lets_websocket_reach_the_backend_of_one_route(stack: Stack) -> None:
    """kgateway's TrafficPolicy httpUpgrade: Envoy refuses upgrades (403) unless the route
    (or its listener) accepts them; with the policy the upgrade request reaches the backend,
    on that route only. Beside a buffer (which would hold the stream) it is refused."""
    websocket = {"connection": "upgrade", "upgrade": "websocket", "sec-websocket-version": "13",
                 "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="}
    stack.write("upgrade.yaml", stack.route("upgrade", "upgrade.example.com"),
                stack.route("no-upgrade", "no-upgrade.example.com"),
                policy("upgrade", "upgrade", "  httpUpgrade: [{type: websocket}]"))
    resp = stack.wait("upgrade.example.com", lambda r: r.status_code == 200, path="/ws", headers=websocket,
                      what="the upgrade to reach the backend")
    assert resp.headers.get("x-backend") == "app"
    assert stack.get("no-upgrade.example.com", "/ws", headers=websocket).status_code == 403

    stack.write("upgrade.yaml", stack.route("upgrade", "upgrade.example.com"),
                stack.route("no-upgrade", "no-upgrade.example.com"),
                policy("upgrade", "upgrade", "  httpUpgrade: [{type: websocket}]\n  buffer: {maxRequestSize: 1Ki}"))
    stack.wait("upgrade.example.com", lambda r: r.status_code == 500, path="/ws",
               what="the invalid policy to fail its route closed")
    accepted = stack.condition_when("TrafficPolicy", "upgrade", "Accepted", lambda c: c["status"] == "False")
    assert accepted["message"] == ("invalid field spec.httpUpgrade: cannot be used together with buffer "
                                   "(it would hold the upgraded stream)")


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


@dataclass
class Redirector:
    """Answers /start with a 302 to /final on the same host; /final with who asked."""

    port: int = 0
    runner: Any = None

    def app(self) -> web.Application:
        async def start(request: web.Request) -> web.Response:
            raise web.HTTPFound(f"http://{request.host}/final", headers={"x-trace": "t-1"})

        async def final(request: web.Request) -> web.Response:
            return web.json_response({"path": request.path, "trace": request.headers.get("x-trace")})

        app = web.Application()
        app.router.add_get("/start", start)
        app.router.add_get("/final", final)
        return app


def test_internal_redirect_is_followed_by_the_gateway(stack: Stack) -> None:
    redirector = Redirector()
    stack.servers.http(redirector)  # type: ignore[arg-type]  # any object with app(), port, runner
    stack.service("redirector", redirector.port)
    rules = f"- backendRefs: [{{name: redirector, port: {redirector.port}}}]"
    stack.write("redirect.yaml", stack.route("follows", "follows.example.com", rules),
                stack.route("passes", "passes.example.com", rules),
                policy("follows", "follows", "  internalRedirect: {responseHeadersToCopy: [x-trace]}"))
    resp = stack.wait("follows.example.com", lambda r: r.status_code == 200, path="/start",
                      what="the redirect to be followed", follow_redirects=False)
    assert resp.json() == {"path": "/final", "trace": "t-1"}  # one answer, and the copied header reached /final
    passed = stack.get("passes.example.com", "/start", follow_redirects=False)
    assert passed.status_code == 302  # without the policy the client gets the redirect


def test_fault_injection_aborts_and_disable_turns_it_off(stack: Stack) -> None:
    stack.write("faults.yaml", stack.route("faulty", "faulty.example.com"),
                stack.route("healthy", "healthy.example.com"),
                policy("faulty", "faulty", "  faultInjection: {abort: {httpStatus: 418}}"))
    resp = stack.wait("faulty.example.com", lambda r: r.status_code == 418, what="the abort to be injected")
    assert resp.text == "fault filter abort"
    assert stack.get("healthy.example.com").status_code == 200


def creds(token: str) -> str:
    return f"""
apiVersion: v1
kind: Secret
metadata: {{name: upstream-creds}}
stringData: {{token: {token}, x-tenant: acme, x-region: eu}}"""


def test_header_values_from_secrets(stack: Stack) -> None:
    stack.write("secret-creds.yaml", creds("s3cr3t"))
    stack.write("secret-headers.yaml", stack.route("secret-headers", "secret-headers.example.com"),
                policy("secret-headers", "secret-headers", """
  headerModifiers:
    request:
      set:
        - {name: x-api-key, secretRef: {name: upstream-creds, key: token}}
        - {name: x-tenant, secretRef: {name: upstream-creds}}
        - {name: x-static, value: plain}""" ))
    resp = stack.wait("secret-headers.example.com", lambda r: "x-api-key" in body_of(r)["headers"],
                      what="headers from the Secret")
    seen = body_of(resp)["headers"]
    assert (seen["x-api-key"], seen["x-tenant"], seen["x-static"]) == ("s3cr3t", "acme", "plain")
    assert "x-region" not in seen  # a name picks one key

    # The Secret changes: the header follows, without touching the policy.
    stack.write("secret-creds.yaml", creds("rotated"))
    stack.wait("secret-headers.example.com", lambda r: body_of(r)["headers"].get("x-api-key") == "rotated",
               what="the rotated Secret value")

    stack.write("all-headers.yaml", stack.route("all-headers", "all-headers.example.com"),
                policy("all-headers", "all-headers", """
  headerModifiers:
    request:
      add: [{secretRef: {name: upstream-creds}}]"""))
    seen = body_of(stack.wait("all-headers.example.com", lambda r: "x-region" in body_of(r)["headers"],
                              what="every entry of the Secret"))["headers"]
    assert (seen["token"], seen["x-tenant"], seen["x-region"]) == ("rotated", "acme", "eu")


def test_a_secret_value_is_sent_as_written_not_as_a_format_string(stack: Stack) -> None:
    """Envoy reads added header values as format strings; a Secret's value is data, so
    `%REQ(:PATH)%` in it reaches the backend as written (not the request's path) and a
    lone '%' (which Envoy would NACK as a format string) is sent too, in every shape a
    Secret becomes a header: `set` by name, every entry of the Secret, and the older
    `requestHeadersFromSecret` / `responseHeadersFromSecret`."""
    text = "100% off %REQ(:PATH)%"
    stack.write("percent-creds.yaml", f"""
apiVersion: v1
kind: Secret
metadata: {{name: percent-creds}}
stringData: {{x-offer: "{text}"}}""")
    stack.write("percent.yaml", stack.route("percent", "percent.example.com"), policy("percent", "percent", """
  headerModifiers:
    request:
      set: [{name: x-offer, secretRef: {name: percent-creds}}]
    response:
      add: [{secretRef: {name: percent-creds}}]
    requestHeadersFromSecret: [{secretRef: {name: percent-creds}, header: x-older, key: x-offer}]
    responseHeadersFromSecret: [{secretRef: {name: percent-creds}, header: x-offer-back, key: x-offer}]"""))
    resp = stack.wait("percent.example.com", lambda r: "x-older" in body_of(r)["headers"], path="/deal",
                      what="headers from the Secret")
    seen = body_of(resp)["headers"]
    assert seen["x-offer"] == text and seen["x-older"] == text
    assert resp.headers["x-offer-back"] == text and resp.headers["x-offer"] == text


def test_filter_stage_puts_header_changes_before_authorization(stack: Stack) -> None:
    auth = stack.servers.auth("staged")
    stack.service("auth-staged", auth.port)
    ext = lychgate_object("GatewayExtension", "staged-auth", f"""  type: ExtAuth
  extAuth:
    grpcService: {{backendRef: {{name: auth-staged, port: {auth.port}}}}}""")
    headers = "    request:\n      set: [{name: x-tenant, value: acme}]"
    stack.write("staged-ext.yaml", ext)  # the extension first: its filter joins the listener
    stack.write("staged.yaml", stack.route("staged", "staged.example.com"),
                stack.route("unstaged", "unstaged.example.com"),
                policy("staged", "staged", "  extAuth: {extensionRef: {name: staged-auth}}\n  headerModifiers:\n"
                       "    filterStage: {stage: AuthZ, predicate: Before}\n" + headers),
                policy("unstaged", "unstaged", "  extAuth: {extensionRef: {name: staged-auth}}\n  headerModifiers:\n"
                       + headers))
    good = {"authorization": "Bearer good"}
    for host in ("staged.example.com", "unstaged.example.com"):
        resp = stack.wait(host, lambda r: r.status_code == 200 and "x-tenant" in body_of(r)["headers"],
                          headers=good, what=f"{host} to be authorized with its header")
        assert body_of(resp)["headers"]["x-tenant"] == "acme"  # the backend gets it either way
    seen = {check.headers.get(":authority"): check.headers.get("x-tenant") for check in auth.checks}
    assert seen["staged.example.com"] == "acme"  # set before the authorization service was asked
    assert seen["unstaged.example.com"] is None  # on the route: after it


def test_compression_codec_is_negotiated(stack: Stack) -> None:
    stack.write("codecs.yaml", stack.route("codecs", "codecs.example.com"), policy("codecs", "codecs", """
  compression:
    responseCompression: {libraries: [Brotli, Zstd, Gzip], minContentLengthBytes: 10}"""))

    def encoding(accept: str) -> str | None:
        # Raw bytes: the client must not try to decode a codec it may lack.
        conn = http.client.HTTPConnection(stack.addr, 8080, timeout=5)
        try:
            conn.request("GET", "/", headers={"host": "codecs.example.com", "accept-encoding": accept,
                                              "connection": "close"})
            resp = conn.getresponse()
            resp.read()
            return resp.getheader("content-encoding")
        finally:
            conn.close()

    wait_for(lambda: encoding("br") == "br", 10, "brotli to be offered")
    assert encoding("zstd") == "zstd"
    assert encoding("gzip") == "gzip"
    assert encoding("gzip;q=0.5, zstd;q=0.9") == "zstd"  # the client's preference wins
    assert encoding("deflate") is None  # nothing it accepts: as it is
