"""jwtAuth end to end: real Envoy verifying tokens signed with real RSA keys, keys
served by a JWKS server over HTTP, inline, or from a ConfigMap."""

from __future__ import annotations

import json
import time

import pytest

from tests.harness import free_port
from tests.policies.conftest import Stack, condition
from tests.policies.servers import body_of
from tests.policies.test_attachment import policy, ref
from tests.policies.test_fail_closed import assert_closed, own_backend
from tests.policies.tokens import Issuer

pytestmark = pytest.mark.e2e


def jwt_ext(name: str, providers: str, mode: str = "") -> str:
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: {name}}}
spec:
  type: JWT
  jwt:
{f"    validationMode: {mode}" if mode else ""}
    providers:
{providers}"""


def remote(name: str, issuer: str, service: str, port: int, extra: str = "") -> str:
    return f"""      - name: {name}
        issuer: {issuer}
        jwks:
          remote:
            url: http://{service}.default.svc:{port}/keys
            backendRef: {{name: {service}, port: {port}}}
{extra}"""


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def test_remote_jwks_verifies_tokens_and_copies_claims(stack: Stack) -> None:
    idp = Issuer("https://idp.example.com", "k1")
    stranger = Issuer("https://idp.example.com", "k1")  # same kid, another key
    jwks = stack.servers.jwks(idp.jwks())
    stack.service("jwks-remote", jwks.port)
    stack.write("jwt-remote.yaml",
                jwt_ext("jwt-remote", remote("idp", idp.iss, "jwks-remote", jwks.port, """\
        audiences: [shop]
        claimsToHeaders: [{name: sub, header: x-sub}, {name: tier, header: x-tier}]""")),
                stack.route("jwt-remote", "jwt-remote.example.com"),
                policy("jwt-remote", ref("jwt-remote"), "  jwtAuth:\n    extensionRef: {name: jwt-remote}"))
    missing = stack.wait("jwt-remote.example.com", lambda r: r.status_code == 401, what="a token to be required")
    assert "Jwt is missing" in missing.text
    good = idp.token(sub="alice", aud="shop", tier="gold")
    ok = stack.get("jwt-remote.example.com", headers=bearer(good))
    assert ok.status_code == 200
    seen = body_of(ok)["headers"]
    assert (seen["x-sub"], seen["x-tier"]) == ("alice", "gold")
    assert "authorization" not in seen  # forwardToken unset: the token stays at the gateway
    assert jwks.fetches >= 1
    for bad, status, why in (
            (stranger.token(sub="mallory", aud="shop"), 401, "Jwt verification fails"),  # another key
            (idp.token(sub="alice", aud="other"), 403, "Audiences in Jwt are not allowed"),
            (Issuer("https://elsewhere", "k1").token(sub="x", aud="shop"), 401, "Jwt issuer is not configured"),
            (idp.token(sub="alice", aud="shop", exp=1), 401, "Jwt is expired")):
        resp = stack.get("jwt-remote.example.com", headers=bearer(bad))
        assert (resp.status_code, resp.text) == (status, why)
    assert stack.applied("jwt-remote")["status"] == "True"
    ext = stack.status("GatewayExtension", "jwt-remote")
    assert all(c["status"] == "True" for c in ext["conditions"])


def test_inline_jwks_allow_missing_and_query_token(stack: Stack) -> None:
    idp = Issuer("inline-issuer", "inline")
    single_jwk = json.dumps(idp.jwk())  # one JWK, not a set: accepted as kgateway does
    stack.write("jwt-inline.yaml",
                jwt_ext("jwt-inline", f"""      - name: inline
        issuer: inline-issuer
        tokenSource: {{queryParameter: access_token}}
        forwardToken: true
        claimsToHeaders: [{{name: sub, header: x-sub}}]
        jwks:
          local:
            inline: '{single_jwk}'
""", mode="AllowMissing"),
                stack.route("jwt-inline", "jwt-inline.example.com"),
                policy("jwt-inline", ref("jwt-inline"), "  jwtAuth:\n    extensionRef: {name: jwt-inline}"))
    token = idp.token(sub="bob")
    resp = stack.wait("jwt-inline.example.com", lambda r: r.status_code == 200 and "x-sub" in body_of(r)["headers"],
                      f"/?access_token={token}", what="the query token to be verified")
    assert body_of(resp)["headers"]["x-sub"] == "bob"
    assert token in body_of(resp)["path"]  # forwardToken: true keeps it
    anonymous = stack.get("jwt-inline.example.com")
    assert anonymous.status_code == 200 and "x-sub" not in body_of(anonymous)["headers"]  # AllowMissing
    forged = Issuer("inline-issuer", "inline").token(sub="eve")
    assert stack.get("jwt-inline.example.com", f"/?access_token={forged}").status_code == 401


def test_missing_configmap_fails_closed_until_created(stack: Stack) -> None:
    idp = Issuer("cm-issuer", "cm")
    backend, rules = own_backend(stack, "jwt-cm-app")
    stack.write("jwt-cm.yaml",
                jwt_ext("jwt-cm", """      - name: cm
        issuer: cm-issuer
        jwks: {local: {configMapRef: {name: jwt-cm-keys}}}
"""),
                stack.route("jwt-cm", "jwt-cm.example.com", rules),
                policy("jwt-cm", ref("jwt-cm"), "  jwtAuth:\n    extensionRef: {name: jwt-cm}"))
    assert_closed(stack, "jwt-cm", "jwt-cm.example.com", backend, "ConfigMapNotFound",
                  "ConfigMap default/jwt-cm-keys not found")
    ext = stack.status("GatewayExtension", "jwt-cm")
    assert condition(ext["conditions"], "ResolvedRefs")["reason"] == "ConfigMapNotFound"

    stack.write("jwt-cm-keys.yaml", f"""
apiVersion: v1
kind: ConfigMap
metadata: {{name: jwt-cm-keys}}
data:
  jwks: '{json.dumps(idp.jwks())}'
""")
    stack.wait("jwt-cm.example.com", lambda r: r.status_code == 401, what="the ConfigMap to let jwtAuth apply")
    ok = stack.get("jwt-cm.example.com", headers=bearer(idp.token(sub="carol")))
    assert ok.status_code == 200 and ok.headers["x-backend"] == "jwt-cm-app"


def test_missing_jwks_service_fails_closed(stack: Stack) -> None:
    backend, rules = own_backend(stack, "jwt-nosvc-app")
    stack.write("jwt-nosvc.yaml",
                jwt_ext("jwt-nosvc", remote("idp", "x", "no-such-jwks", 8080)),
                stack.route("jwt-nosvc", "jwt-nosvc.example.com", rules),
                policy("jwt-nosvc", ref("jwt-nosvc"), "  jwtAuth:\n    extensionRef: {name: jwt-nosvc}"))
    assert_closed(stack, "jwt-nosvc", "jwt-nosvc.example.com", backend, "BackendNotFound",
                  "Service default/no-such-jwks not found")


def test_unreachable_jwks_rejects_every_request(stack: Stack) -> None:
    idp = Issuer("down-issuer", "down")
    dead = free_port()  # nothing listens here
    stack.service("jwks-down", dead)
    backend, rules = own_backend(stack, "jwt-down-app")
    stack.write("jwt-down.yaml",
                jwt_ext("jwt-down", remote("idp", idp.iss, "jwks-down", dead)),
                stack.route("jwt-down", "jwt-down.example.com", rules),
                policy("jwt-down", ref("jwt-down"), "  jwtAuth:\n    extensionRef: {name: jwt-down}"))
    stack.wait("jwt-down.example.com", lambda r: r.status_code == 401, what="jwtAuth to apply")
    resp = stack.get("jwt-down.example.com", headers=bearer(idp.token(sub="dave")))
    assert resp.status_code == 401  # the keys cannot be fetched: no token verifies
    assert backend.hits == {}


def test_remote_jwks_fetch_timeout_and_retries(stack: Stack) -> None:
    idp = Issuer("https://fetch.example.com", "f1")

    def fetching(name: str, fetch: str, delay: float = 0.0, fail_first: int = 0) -> tuple[str, str]:
        jwks = stack.servers.jwks(idp.jwks())
        jwks.delay, jwks.fail_first = delay, fail_first
        stack.service(f"jwks-{name}", jwks.port)
        return (jwt_ext(name, remote("idp", idp.iss, f"jwks-{name}", jwks.port).rstrip("\n") + "\n" + fetch),
                policy(name, "  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: jwt-fetch, "
                             f"sectionName: {name}}}]", f"  jwtAuth:\n    extensionRef: {{name: {name}}}"))

    specs = {  # a JWKS server 0.5 s slow, and ones whose first answer is 503
        "slow-short": fetching("slow-short", "            timeout: 100ms\n", delay=0.5),
        "slow-long": fetching("slow-long", "            timeout: 3s\n", delay=0.5),
        "flaky": fetching("flaky", "", fail_first=1),
        "flaky-retried": fetching("flaky-retried", "            retryPolicy: {numRetries: 2, backOff: "
                                                   "{baseInterval: 10ms, maxInterval: 50ms}}\n", fail_first=1),
    }
    rules = "\n".join(f"- name: {n}\n  matches: [{{path: {{value: /{n}}}}}]\n  backendRefs: [{{name: app, port: 80}}]"
                      for n in specs)
    stack.write("jwt-fetch.yaml", *(doc for pair in specs.values() for doc in pair),
                stack.route("jwt-fetch", "jwt-fetch.example.com", rules))
    for n in specs:
        stack.wait("jwt-fetch.example.com", lambda r: r.status_code == 401, f"/{n}", f"{n} to require a token")
    token = bearer(idp.token(sub="alice"))
    # Fetched on demand (no asyncFetch): the first request waits for the keys.
    assert stack.get("jwt-fetch.example.com", "/slow-short", headers=token).text == "Jwks remote fetch is failed"
    assert stack.get("jwt-fetch.example.com", "/slow-long", headers=token).status_code == 200
    # A failed fetch fails the request that needed it; with a retry policy it is fetched again.
    assert stack.get("jwt-fetch.example.com", "/flaky-retried", headers=token).status_code == 200
    assert stack.get("jwt-fetch.example.com", "/flaky", headers=token).text == "Jwks remote fetch is failed"
    assert stack.get("jwt-fetch.example.com", "/flaky", headers=token).status_code == 200  # the next fetch works


def test_kgateway_older_jwt_shapes_with_rbac_on_a_rule(stack: Stack) -> None:
    """kgateway's jwt-rbac scenario in its oldest shape: a GatewayExtension of `type:
    JWTProviders` with providers by name and a PEM `local.key`, a TrafficPolicy naming it
    under the older `jwt`, put on one rule by an ExtensionRef filter, with RBAC over the
    verified claims. The other rule of the route stays open."""
    from cryptography.hazmat.primitives import serialization

    idp = Issuer("https://dev.example.com", "pem")
    pem = idp.key.public_key().public_bytes(serialization.Encoding.PEM,
                                             serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    key = "\n".join("            " + line for line in pem.strip().splitlines())
    stack.write("jwt-oldest.yaml", f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: jwt-oldest}}
spec:
  type: JWTProviders
  jwtProviders:
    my-example:
      issuer: https://dev.example.com
      claimsToHeaders: [{{name: email, header: x-email}}]
      jwks:
        local:
          key: |
{key}
""", stack.route("jwt-oldest", "jwt-oldest.example.com", """
- matches: [{path: {value: /status/200}}]
  backendRefs: [{name: app, port: 80}]
- matches: [{path: {value: /get}}]
  filters: [{type: ExtensionRef, extensionRef: {group: gateway.lychgate.dev, kind: TrafficPolicy, name: jwt-oldest}}]
  backendRefs: [{name: app, port: 80}]"""), """
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: jwt-oldest}
spec:
  jwt:
    extensionRef: {name: jwt-oldest}
  rbac:
    policy:
      matchExpressions:
        - "metadata.filter_metadata['envoy.filters.http.jwt_authn']['payload']['email'] == 'dev2@kgateway.io'"
""")
    host = "jwt-oldest.example.com"
    stack.wait(host, lambda r: r.status_code == 401, "/get", what="the rule to ask for a token")
    allowed = stack.get(host, "/get", headers=bearer(idp.token(email="dev2@kgateway.io")))
    assert allowed.status_code == 200 and body_of(allowed)["headers"]["x-email"] == "dev2@kgateway.io"
    assert stack.get(host, "/get", headers=bearer(idp.token(email="dev1@kgateway.io"))).status_code == 403
    assert stack.get(host, "/status/200").status_code == 200  # the other rule is not protected
    stack.condition_when("GatewayExtension", "jwt-oldest", "Accepted", lambda c: c["status"] == "True")


def test_allow_missing_or_failed_passes_bad_tokens_without_their_claims(stack: Stack) -> None:
    """kgateway 2.5's AllowMissingOrFailed: a missing, expired or forged token passes (Envoy
    `allow_missing_or_failed` beside the providers), but its claims are neither copied to
    headers nor put in the metadata rbac reads; Strict refuses the same requests."""
    idp = Issuer("https://shadow.example.com", "s1")
    keys = json.dumps(idp.jwks())
    provider = f"""      - name: idp
        issuer: {idp.iss}
        claimsToHeaders: [{{name: sub, header: x-sub}}]
        jwks: {{local: {{inline: '{keys}'}}}}
"""
    sub_is_alice = """
  rbac:
    policy:
      matchExpressions: ["metadata.filter_metadata['envoy.filters.http.jwt_authn']['payload']['sub'] == 'alice'"]"""
    stack.write("jwt-shadow.yaml",
                jwt_ext("jwt-shadow", provider, mode="AllowMissingOrFailed"),
                jwt_ext("jwt-strict", provider, mode="Strict"),
                stack.route("jwt-shadow", "jwt-shadow.example.com"),
                stack.route("jwt-shadow-rbac", "jwt-shadow-rbac.example.com"),
                stack.route("jwt-strict", "jwt-strict.example.com"),
                policy("jwt-shadow", ref("jwt-shadow"), "  jwtAuth:\n    extensionRef: {name: jwt-shadow}"),
                policy("jwt-shadow-rbac", ref("jwt-shadow-rbac"),
                       "  jwtAuth:\n    extensionRef: {name: jwt-shadow}" + sub_is_alice),
                policy("jwt-strict", ref("jwt-strict"), "  jwtAuth:\n    extensionRef: {name: jwt-strict}"))
    stack.wait("jwt-strict.example.com", lambda r: r.status_code == 401, what="Strict to require a token")
    stack.wait("jwt-shadow-rbac.example.com", lambda r: r.status_code == 403, what="rbac to apply")
    good = idp.token(sub="alice")
    expired = idp.token(sub="alice", exp=int(time.time()) - 3600)
    forged = Issuer(idp.iss, "s1").token(sub="alice")  # same issuer and kid, another key
    spoof = {"x-sub": "admin"}  # a client-written claim header must not survive either

    ok = stack.get("jwt-shadow.example.com", headers={**bearer(good), **spoof})
    assert ok.status_code == 200 and body_of(ok)["headers"]["x-sub"] == "alice"
    for token, why in ((expired, "Jwt is expired"), (forged, "Jwt verification fails")):
        strict = stack.get("jwt-strict.example.com", headers=bearer(token))
        assert (strict.status_code, strict.text) == (401, why)
        shadow = stack.get("jwt-shadow.example.com", headers={**bearer(token), **spoof})
        assert shadow.status_code == 200
        assert "x-sub" not in body_of(shadow)["headers"]
        # No claims in the metadata either: rbac on `sub` refuses the forged alice.
        assert stack.get("jwt-shadow-rbac.example.com", headers=bearer(token)).status_code == 403
    anonymous = stack.get("jwt-shadow.example.com", headers=spoof)
    assert anonymous.status_code == 200 and "x-sub" not in body_of(anonymous)["headers"]
    assert stack.get("jwt-strict.example.com").status_code == 401
    assert stack.get("jwt-shadow-rbac.example.com", headers=bearer(good)).status_code == 200


def test_clock_skew_and_token_cache(stack: Stack) -> None:
    """clockSkew is Envoy's clock_skew_seconds: a token that expired 30 s ago still passes
    with 60s and is refused with 1s. cache turns on Envoy's verified-token cache: a token
    seen again is a cache hit (jwt_authn stats), and without cache never is."""
    idp = Issuer("https://skew.example.com", "k1")
    keys = json.dumps(idp.jwks())

    def ext(name: str, extra: str) -> str:
        return jwt_ext(name, f"""      - name: idp
        issuer: {idp.iss}
{extra}
        jwks: {{local: {{inline: '{keys}'}}}}
""")

    stack.write("jwt-skew.yaml",
                ext("jwt-skew-wide", "        clockSkew: 60s\n        cache: {}"),
                ext("jwt-skew-narrow", "        clockSkew: 1s"),
                stack.route("jwt-skew-wide", "jwt-skew-wide.example.com"),
                stack.route("jwt-skew-narrow", "jwt-skew-narrow.example.com"),
                policy("jwt-skew-wide", ref("jwt-skew-wide"), "  jwtAuth:\n    extensionRef: {name: jwt-skew-wide}"),
                policy("jwt-skew-narrow", ref("jwt-skew-narrow"),
                       "  jwtAuth:\n    extensionRef: {name: jwt-skew-narrow}"))
    for host in ("jwt-skew-wide.example.com", "jwt-skew-narrow.example.com"):
        stack.wait(host, lambda r: r.status_code == 401, what="jwtAuth to apply")
    now = int(time.time())
    late = bearer(idp.token(sub="alice", iat=now - 600, exp=now - 30))
    early = bearer(idp.token(sub="alice", nbf=now + 30))
    assert stack.get("jwt-skew-wide.example.com", headers=late).status_code == 200
    narrow = stack.get("jwt-skew-narrow.example.com", headers=late)
    assert (narrow.status_code, narrow.text) == (401, "Jwt is expired")
    assert stack.get("jwt-skew-wide.example.com", headers=early).status_code == 200
    narrow = stack.get("jwt-skew-narrow.example.com", headers=early)
    assert (narrow.status_code, narrow.text) == (401, "Jwt not yet valid")

    # Each Envoy worker has a cache of its own, and each request here is a new connection
    # that any worker may take: over 8 requests some worker sees the token twice.
    fresh = bearer(idp.token(sub="bob"))
    hits = jwt_stat(stack, "jwt_cache_hit")
    for _ in range(8):
        assert stack.get("jwt-skew-narrow.example.com", headers=fresh).status_code == 200
    assert jwt_stat(stack, "jwt_cache_hit") == hits  # no cache there: every request verifies
    for _ in range(8):
        assert stack.get("jwt-skew-wide.example.com", headers=fresh).status_code == 200
    assert jwt_stat(stack, "jwt_cache_hit") > hits


def jwt_stat(stack: Stack, name: str) -> int:
    admin = stack.lg.proxies()["default/gw"]["admin"]
    text = stack.lg.client.get(f"http://{admin}/stats?filter=jwt_authn\\.{name}$").text
    return sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.strip())
