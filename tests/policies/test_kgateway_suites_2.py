"""kgateway's e2e suites, part 2: cors, basicauth, internalredirect, timeoutretry, csrf, rbac
and apikeyauth, scenario by scenario, against lychgate and a real Envoy.

Same method as test_kgateway_suites.py (whose stack, httpbin and "edge" Gateway this reuses):
our own manifests in kgateway's shapes, kgateway's requests, and the statuses, headers, bodies,
Envoy counters and policy conditions its suites assert. Whatever goes on the edge Gateway is
removed when its test ends.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import httpx
import pytest

from tests.harness import wait_for
from tests.policies.test_kgateway_suites import (
    EDGE,
    Suites,
    ancestor_conditions,
    httpbin_rule,
    on_gateway,
    on_route,
    route,
    tp,
)

# The module's fixtures, on this module's own stack.
from tests.policies.test_kgateway_suites import edge_policy as edge_policy
from tests.policies.test_kgateway_suites import s as s

pytestmark = pytest.mark.e2e

CORS_HEADERS = ("access-control-allow-origin", "access-control-allow-methods", "access-control-allow-headers")


def rules(*parts: tuple[str | None, list[str]], filters: str = "") -> str:
    """Rules to httpbin: each (name, path prefixes); `filters` goes on the first rule."""
    out = []
    for i, (name, prefixes) in enumerate(parts):
        out.append("    - backendRefs: [{name: httpbin, port: 8000}]")
        if name:
            out.append(f"      name: {name}")
        if prefixes:
            out.append("      matches: [" + ", ".join(f"{{path: {{type: PathPrefix, value: {p}}}}}" for p in prefixes) + "]")
        if filters and i == 0:
            out.append(filters)
    return "\n".join(out) + "\n"


def secret(name: str, entries: dict[str, str], labels: str = "") -> str:
    data = ", ".join(f"{k}: {v}" for k, v in entries.items())
    meta = f"{{name: {name}" + (f", labels: {{{labels}}}" if labels else "") + "}"
    return f"apiVersion: v1\nkind: Secret\nmetadata: {meta}\ntype: Opaque\nstringData: {{{data}}}\n"


# --- cors (features/cors) --------------------------------------------------------------------

ROUTE_CORS = """  cors:
    allowOrigins: ['https://notexample.com', 'https://*.a.b', 'https://*.edu']
    allowMethods: [GET, POST, DELETE]
    allowHeaders: [x-custom-header]
"""
GW_CORS = """  cors:
    allowOrigins: ['https://notexample.com']
    allowMethods: [GET, POST]
    allowHeaders: [Content-Type, Authorization]
"""
FILTER_CORS = """      filters:
      - type: CORS
        cors:
          allowOrigins: ['https://notexample.com', 'https://*.a.b', 'https://*.edu']
          allowMethods: [GET]
          allowHeaders: [x-custom-header]"""
POSITIVE = ("https://notexample.com", "https://c.a.b", "https://test.cors.edu")
NEGATIVE = ("https://notedu.com", "https://api.example.org", "https://edu", "http://c.a.b",
            "https://notexample.org", "https://api.notexample.com", "https:/c.a.b")


def preflight(s: Suites, host: str, path: str, origin: str, edge: bool = False) -> httpx.Response:
    return s.send(host, path, edge=edge, method="OPTIONS",
                  headers={"origin": origin, "access-control-request-method": "GET"})


def cors_of(resp: httpx.Response) -> tuple[str | None, ...]:
    return tuple(resp.headers.get(h) for h in CORS_HEADERS)


def cors_routes(s: Suites, host: str, gateway: str = "gw", filters: str = "") -> list[str]:
    return [route(f"{host}-1", [host], rules((None, ["/path1"]), filters=filters), gateway=gateway),
            route(f"{host}-2", [host], rules(("rule0", ["/path2"]), ("rule1", ["/cors-disabled"])), gateway=gateway)]


def assert_route_cors(s: Suites, host: str, methods: str, edge: bool = False) -> None:
    """TestTrafficPolicyCorsForRoute / TestHttpRouteCorsInRouteRules: positive and negative origins."""
    for origin in POSITIVE:
        resp = preflight(s, host, "/path1", origin, edge)
        assert resp.status_code == 200 and cors_of(resp) == (origin, methods, "x-custom-header"), (origin, resp.headers)
        assert cors_of(preflight(s, host, "/path2", origin, edge)) == (None, None, None)
    for origin in NEGATIVE:
        # kgateway also finds no Allow-Methods/Allow-Headers here: see the xfail test below.
        resp = preflight(s, host, "/path1", origin, edge)
        assert resp.status_code in (200, 204, 403) and cors_of(resp)[0] is None, (origin, resp.headers)
        assert cors_of(preflight(s, host, "/path2", origin, edge)) == (None, None, None)


def test_cors_route_policy(s: Suites) -> None:
    """TestTrafficPolicyCorsForRoute."""
    host = "cors-route.example.com"
    s.stack.write("cors-route.yaml", *cors_routes(s, host), tp("route-cors-policy", on_route(f"{host}-1"), ROUTE_CORS))
    s.until(host, lambda r: r.headers.get("access-control-allow-origin") == "https://notexample.com", "/path1",
            method="OPTIONS", headers={"origin": "https://notexample.com", "access-control-request-method": "GET"})
    assert_route_cors(s, host, "GET, POST, DELETE")


@pytest.mark.xfail(strict=True, reason="the gateway answers a foreign preflight itself (Gateway API conformance "
                   "wants that) and Envoy's cors filter then still sends Allow-Methods/Allow-Headers; kgateway "
                   "forwards it to the backend, which answers without any CORS header")
def test_cors_foreign_preflight_has_no_cors_headers(s: Suites) -> None:
    """TestTrafficPolicyCorsForRoute's negative cases, to the letter."""
    host = "cors-foreign.example.com"
    s.stack.write("cors-foreign.yaml", *cors_routes(s, host), tp("cors-foreign", on_route(f"{host}-1"), ROUTE_CORS))
    s.until(host, lambda r: r.headers.get("access-control-allow-origin") == "https://notexample.com", "/path1",
            method="OPTIONS", headers={"origin": "https://notexample.com", "access-control-request-method": "GET"})
    assert cors_of(preflight(s, host, "/path1", "https://notedu.com")) == (None, None, None)


def test_cors_in_route_rule_filter(s: Suites) -> None:
    """TestHttpRouteCorsInRouteRules: the Gateway API CORS filter, same origins."""
    host = "cors-filter.example.com"
    s.stack.write("cors-filter.yaml", *cors_routes(s, host, filters=FILTER_CORS))
    s.until(host, lambda r: r.headers.get("access-control-allow-origin") == "https://c.a.b", "/path1",
            method="OPTIONS", headers={"origin": "https://c.a.b", "access-control-request-method": "GET"})
    assert_route_cors(s, host, "GET")


GW_EXPECTED = ("https://notexample.com", "GET, POST", "Content-Type, Authorization")


def test_cors_gateway_policy_and_route_overrides(s: Suites, edge_policy: list[str]) -> None:
    """TestTrafficPolicyCorsAtGatewayLevel, then TestTrafficPolicyRouteCorsOverrideGwCors:
    the route policy wins on its route, `disable` on one rule removes CORS there."""
    host = "cors-gw.example.com"
    edge_policy.append("cors-gw.yaml")
    s.stack.write("cors-gw.yaml", *cors_routes(s, host, gateway=EDGE), tp("gw-cors-policy", on_gateway(), GW_CORS))
    for path in ("/path1", "/path2", "/cors-disabled"):
        s.until(host, lambda r: cors_of(r) == GW_EXPECTED, path, edge=True, method="OPTIONS",
                headers={"origin": "https://notexample.com", "access-control-request-method": "GET"})
    s.stack.write("cors-gw.yaml", *cors_routes(s, host, gateway=EDGE), tp("gw-cors-policy", on_gateway(), GW_CORS),
                  tp("route-cors-policy-gw", on_route(f"{host}-1"), ROUTE_CORS),
                  tp("disable-cors", on_route(f"{host}-2", "rule1"), "  cors: {disable: {}}\n"))
    s.until(host, lambda r: cors_of(r) == ("https://notexample.com", "GET, POST, DELETE", "x-custom-header"), "/path1",
            edge=True, method="OPTIONS",
            headers={"origin": "https://notexample.com", "access-control-request-method": "GET"})
    assert cors_of(preflight(s, host, "/path2", "https://notexample.com", edge=True)) == GW_EXPECTED
    s.until(host, lambda r: cors_of(r) == (None, None, None), "/cors-disabled", edge=True, method="OPTIONS",
            headers={"origin": "https://notexample.com", "access-control-request-method": "GET"})


def test_cors_route_filter_with_gateway_policy(s: Suites, edge_policy: list[str]) -> None:
    """TestHttpRouteAndTrafficPolicyCors: the rule's CORS filter on /path1, the Gateway's elsewhere."""
    host = "cors-mix.example.com"
    edge_policy.append("cors-mix.yaml")
    s.stack.write("cors-mix.yaml", *cors_routes(s, host, gateway=EDGE, filters=FILTER_CORS),
                  tp("gw-cors-policy-mix", on_gateway(), GW_CORS))
    s.until(host, lambda r: cors_of(r) == GW_EXPECTED, "/path2", edge=True, method="OPTIONS",
            headers={"origin": "https://notexample.com", "access-control-request-method": "GET"})
    assert cors_of(preflight(s, host, "/path1", "https://notexample.com", edge=True)) == \
        ("https://notexample.com", "GET", "x-custom-header")


# --- basicauth (features/basicauth) ----------------------------------------------------------

def sha(password: str) -> str:
    return "{SHA}" + base64.b64encode(hashlib.sha1(password.encode()).digest()).decode()


def basic(user: str, password: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_basic_auth_route_and_extension_ref(s: Suites) -> None:
    """TestTrafficPolicyBasicAuthForRoute: users on the route; /secrets takes an ExtensionRef
    policy reading a .htpasswd Secret instead; the public route stays open."""
    ext_ref = ("      filters:\n      - type: ExtensionRef\n        extensionRef: "
               "{group: gateway.lychgate.dev, kind: TrafficPolicy, name: route-secret-basicauth}")
    s.stack.write("basicauth.yaml",
                  route("route-public", ["public.example.com"], httpbin_rule()),
                  route("route-secure", ["secure.example.com"], rules((None, [])) + rules((None, ["/secrets"])) + ext_ref + "\n"),
                  secret("basic-auth-credentials", {".htpasswd": f"'user:{sha('userpassword')}'"}),
                  tp("route-basicauth", on_route("route-secure"),
                     f"  basicAuth:\n    users: ['alice:{sha('password')}', 'bob:{sha('password')}']\n"),
                  tp("route-secret-basicauth", "", "  basicAuth:\n    secretRef: {name: basic-auth-credentials}\n"))
    s.until("secure.example.com", lambda r: r.status_code == 200, "/secrets", headers=basic("user", "userpassword"))
    assert s.send("secure.example.com", headers=basic("alice", "password")).status_code == 200
    assert s.send("secure.example.com", headers=basic("bob", "password")).status_code == 200
    assert s.send("secure.example.com", headers=basic("alice", "wrong")).status_code == 401
    assert s.send("secure.example.com", "/secrets", headers=basic("alice", "password")).status_code == 401
    assert s.send("secure.example.com").status_code == 401
    assert s.send("public.example.com").status_code == 200


# --- internalredirect (features/internalredirect) --------------------------------------------

def test_internal_redirect(s: Suites) -> None:
    """TestInternalRedirectFollowed and TestWithoutPolicyRedirectPassedThrough."""
    s.stack.write("redirect.yaml",
                  route("redirect", ["redirect.example.com"], rules(("redirect-with-policy", ["/redirect-to", "/status"]))),
                  route("redirect-no-policy", ["no-policy.example.com"],
                        rules(("redirect-no-policy", ["/redirect-to", "/status"]))),
                  tp("internal-redirect", on_route("redirect", "redirect-with-policy"),
                     "  internalRedirect:\n    redirectResponseCodes: [303]\n"))
    before = s.httpbin.hits.get("/status/200", 0)
    s.until("redirect.example.com", lambda r: r.status_code == 200,
            "/redirect-to?url=http://redirect.example.com/status/200&status_code=303", follow_redirects=False)
    assert s.httpbin.hits["/status/200"] > before  # the gateway fetched the target itself
    passed = s.send("no-policy.example.com", "/redirect-to?url=http://no-policy.example.com/status/200&status_code=303",
                    follow_redirects=False)
    assert passed.status_code == 303 and passed.headers["location"] == "http://no-policy.example.com/status/200"


# --- timeoutretry (features/timeoutretry) ----------------------------------------------------

def test_timeouts_and_retries(s: Suites, edge_policy: list[str]) -> None:
    """TestRouteTimeout and TestRetries: each retried case adds 2 to upstream_rq_retry,
    the last one through a policy on the Gateway's listener. kgateway's per-try timeouts are
    1-2 ms, which a loopback backend does not always beat (the answer is then a 504, not the
    490); 250 ms keeps the statuses certain."""
    host = "retry.example.com"
    edge_policy.append("retry.yaml")
    s.stack.write("retry.yaml",
                  route("retry-test", [host], rules(("timeout", ["/delay/1"]), ("retry", ["/status", "/delay/2"]),
                                                   ("inherit-gateway", ["/status/517"])), gateway=EDGE),
                  tp("timeout", on_route("retry-test", "timeout"), "  timeouts: {request: 1ms}\n"),
                  tp("retry", on_route("retry-test", "retry"),
                     "  retry: {attempts: 2, perTryTimeout: 250ms, retryOn: [5xx], statusCodes: [490]}\n"),
                  tp("retry-listener", on_gateway(section="http"),
                     "  retry: {attempts: 2, perTryTimeout: 250ms, statusCodes: [517]}\n"))
    timed_out = s.until(host, lambda r: r.status_code == 504, "/delay/1", edge=True)
    assert timed_out.text == "upstream request timeout"

    def retries() -> int:
        return s.envoy_stat(".upstream_rq_retry", gateway=f"default/{EDGE}")

    s.until(host, lambda r: r.status_code == 490, "/status/490", edge=True)
    before = retries()
    assert s.send(host, "/status/490", edge=True).status_code == 490
    assert retries() == before + 2
    slow = s.send(host, "/delay/2", edge=True)
    assert (slow.status_code, slow.text) == (504, "upstream request timeout")
    assert retries() == before + 4
    assert s.send(host, "/status/517", edge=True).status_code == 517
    assert retries() == before + 6


# --- csrf (features/csrf) --------------------------------------------------------------------

def csrf_post(s: Suites, path: str, origin: str | None = None) -> int:
    headers = {"origin": origin} if origin else {}
    return s.send("example.com", path, edge=True, method="POST", headers=headers).status_code


CSRF = "  csrf:\n    percentageEnabled: 100\n    additionalOrigins: [{exact: example.org}, {suffix: %s}]\n"


def csrf_routes() -> list[str]:
    return [route("csrf-route-1", ["example.com"], rules((None, ["/path1"])), gateway=EDGE),
            route("csrf-route-2", ["example.com"], rules((None, ["/path2"])), gateway=EDGE)]


def test_csrf_on_a_route(s: Suites, edge_policy: list[str]) -> None:
    """TestRouteLevelCSRF."""
    edge_policy.append("csrf-route.yaml")
    s.stack.write("csrf-route.yaml", *csrf_routes(),
                  tp("csrf-route-policy", on_route("csrf-route-1"), CSRF % "routetest.io"))
    wait_for(lambda: csrf_post(s, "/path1") == 403, 10, "csrf on /path1")
    assert csrf_post(s, "/path2") == 200
    assert csrf_post(s, "/path1", "example.com") == 200
    assert csrf_post(s, "/path1", "notexample.com") == 403
    assert csrf_post(s, "/path1", "example.org") == 200


def test_csrf_on_the_gateway(s: Suites, edge_policy: list[str]) -> None:
    """TestGatewayLevelCSRF."""
    edge_policy.append("csrf-gw.yaml")
    s.stack.write("csrf-gw.yaml", *csrf_routes(), tp("csrf-gw-policy", on_gateway(), CSRF % "gwtest.io"))
    wait_for(lambda: csrf_post(s, "/path2") == 403, 10, "csrf on the Gateway")
    assert csrf_post(s, "/path1") == 403
    assert csrf_post(s, "/path1", "example.com") == 200
    assert csrf_post(s, "/path2", "example.com") == 200


# --- rbac (features/rbac) --------------------------------------------------------------------

CEL = "  rbac:\n    policy:\n      matchExpressions: [\"request.headers['x-my-header'] == 'cool-beans'\"]\n"


@pytest.mark.parametrize("section", ["httpbin-get", None])
def test_rbac_header_authorization(s: Suites, section: str | None) -> None:
    """TestRBACHeaderAuthorization (cel-rbac-section.yaml and cel-rbac.yaml): 403 with Envoy's
    "RBAC: access denied" without the header, 200 with it; a rule the policy skips stays open."""
    host = f"rbac-{'section' if section else 'route'}.example.com"
    name = host.split(".")[0]
    s.stack.write(f"{name}.yaml", route(name, [host], rules((None, ["/status/200"]), ("httpbin-get", ["/get"]))),
                  tp(f"{name}-policy", on_route(name, section), CEL))
    denied = s.until(host, lambda r: r.status_code == 403, "/get")
    assert "RBAC: access denied" in denied.text
    assert s.send(host, "/get", headers={"x-my-header": "cool-beans"}).status_code == 200
    assert s.send(host, "/status/200").status_code == (200 if section else 403)


# --- apikeyauth (features/apikeyauth) --------------------------------------------------------

KEYS = secret("api-keys", {"client1": "k-123", "client2": "k-456"})


def api_key_policy(name: str, targets: str, secret_name: str, sources: str = "[{header: api-key}]",
                   forward: bool = True) -> str:
    return tp(name, targets, f"  apiKeyAuth:\n    keySources: {sources}\n    forwardCredential: {str(forward).lower()}\n"
                             f"    secretRef: {{name: {secret_name}}}\n")


def test_api_key_auth_on_the_route(s: Suites) -> None:
    """TestAPIKeyAuthWithHTTPRouteLevelPolicy: the api-key header, and Authorization: Bearer."""
    host = "apikey.example.com"
    s.stack.write("apikey.yaml", KEYS, route("apikey", [host], rules((None, ["/status/200"]), (None, ["/get"]))),
                  api_key_policy("api-key-auth-policy", on_route("apikey"), "api-keys",
                                 "[{header: api-key}, {header: Authorization}]"))
    s.until(host, lambda r: r.status_code == 401, "/status/200")
    for path in ("/status/200", "/get"):
        assert s.send(host, path, headers={"api-key": "k-123"}).status_code == 200
        assert s.send(host, path, headers={"authorization": "Bearer k-123"}).status_code == 200
    assert s.send(host, "/get").status_code == 401
    assert s.send(host, "/get", headers={"authorization": "Bearer k-456"}).status_code == 200
    assert s.send(host, "/get", headers={"authorization": "Bearer invalid-key"}).status_code == 401


@pytest.mark.parametrize("source", ["header", "query", "cookie"])
def test_api_key_sources_on_one_rule(s: Suites, source: str) -> None:
    """TestAPIKeyAuthWithRouteLevelPolicy, TestAPIKeyAuthWithQueryParameter, TestAPIKeyAuthWithCookie."""
    host = f"apikey-{source}.example.com"
    s.stack.write(f"apikey-{source}.yaml", secret(f"api-keys-{source}", {"client1": "k-123", "client2": "k-456"}),
                  route(f"apikey-{source}", [host], rules((None, ["/status/200"]), ("httpbin-get", ["/get"]))),
                  api_key_policy(f"apikey-{source}", on_route(f"apikey-{source}", "httpbin-get"),
                                 f"api-keys-{source}", f"[{{{source}: api-key}}]"))

    def get(key: str | None) -> int:
        kwargs: dict[str, Any] = {}
        if key and source == "header":
            kwargs["headers"] = {"api-key": key}
        elif key and source == "query":
            kwargs["params"] = {"api-key": key}
        elif key:
            kwargs["headers"] = {"cookie": f"api-key={key}"}
        return s.send(host, "/get", **kwargs).status_code

    wait_for(lambda: get(None) == 401, 10, f"api keys from the {source}")
    assert s.send(host, "/status/200").status_code == 200
    assert get("k-123") == 200
    assert get("invalid-key") == 401


def test_api_key_route_rule_overrides_the_gateway(s: Suites, edge_policy: list[str]) -> None:
    """TestAPIKeyAuthRouteOverrideGateway and TestAPIKeyAuthDisableAtRouteLevel."""
    host = "apikey-override.example.com"
    edge_policy.append("apikey-override.yaml")
    docs = [secret("api-keys-secret", {"client1": "k-123", "client2": "k-456"}),
            secret("api-keys-secret-route", {"client3": "k-789", "client4": "k-999"}),
            route("apikey-override", [host], rules((None, ["/status/200"]), ("rule1", ["/get"])), gateway=EDGE),
            api_key_policy("api-key-auth-gateway", on_gateway(), "api-keys-secret", forward=False)]
    s.stack.write("apikey-override.yaml", *docs,
                  api_key_policy("api-key-auth-route-override", on_route("apikey-override", "rule1"),
                                 "api-keys-secret-route", forward=False))

    def status(path: str, key: str | None = None) -> int:
        return s.send(host, path, edge=True, headers={"api-key": key} if key else {}).status_code

    wait_for(lambda: status("/get", "k-789") == 200 and status("/get", "k-123") == 401, 10, "the rule's keys")
    assert status("/get") == 401 and status("/get", "k-999") == 200 and status("/get", "k-456") == 401
    assert status("/status/200") == 401 and status("/status/200", "k-123") == 200
    assert status("/status/200", "k-456") == 200 and status("/status/200", "k-789") == 401
    # TestAPIKeyAuthDisableAtRouteLevel: the rule opts out of the Gateway's keys.
    s.stack.write("apikey-override.yaml", *docs,
                  tp("api-key-auth-route-disable", on_route("apikey-override", "rule1"), "  apiKeyAuth: {disable: {}}\n"))
    wait_for(lambda: status("/get") == 200, 10, "the rule to opt out")
    assert status("/get", "k-123") == 200
    assert status("/status/200") == 401 and status("/status/200", "k-123") == 200


def test_api_key_duplicate_key_values(s: Suites) -> None:
    """TestAPIKeyAuthDuplicateKeyValues: the same client and key in two Secrets collapse into one;
    two clients sharing a key make the policy Invalid, naming the clients and not the key, and
    the route answer 500; Envoy never rejects an update; removing the clash recovers."""
    host = "apikey-dup.example.com"
    label = "apikey-duplicate-test: 'true'"
    s.stack.write("apikey-dup.yaml", secret("api-keys-duplicate-a", {"client1": "k-dup-111"}, label),
                  secret("api-keys-duplicate-b", {"client1": "k-dup-111"}, label),
                  route("apikey-dup", [host], rules((None, ["/status/200"]))),
                  tp("api-key-auth-policy-duplicate", on_route("apikey-dup"),
                     "  apiKeyAuth:\n    secretSelector: {matchLabels: {apikey-duplicate-test: 'true'}}\n"))

    def rejected() -> int:
        return s.envoy_stat(".update_rejected")

    def status(key: str | None = None) -> int:
        return s.send(host, "/status/200", headers={"api-key": key} if key else {}).status_code

    at_start = rejected()
    wait_for(lambda: status("k-dup-111") == 200, 10, "the collapsed duplicate")
    assert status() == 401
    s.stack.write("apikey-dup-new.yaml", secret("api-keys-duplicate-new-client", {"client2": "k-dup-222"}, label))
    wait_for(lambda: status("k-dup-222") == 200, 10, "a new key next to the duplicate")
    s.stack.write("apikey-dup-clash.yaml", secret("api-keys-duplicate-conflict", {"client3": "k-dup-111"}, label))

    def accepted() -> dict[str, Any] | None:
        conds = ancestor_conditions(s, "api-key-auth-policy-duplicate", lambda ref: True) or []
        return next((c for c in conds if c["type"] == "Accepted" and c["status"] == "False"), None)

    cond = wait_for(accepted, 10, "the clash to be reported")
    assert cond["reason"] == "Invalid"
    assert "client1" in cond["message"] and "client3" in cond["message"] and "k-dup-111" not in cond["message"]
    wait_for(lambda: status("k-dup-111") == 500, 10, "the route to fail closed")
    s.stack.lg.delete("apikey-dup-clash.yaml")
    wait_for(lambda: status("k-dup-111") == 200, 10, "the route to recover")
    assert status() == 401
    assert rejected() == at_start
