"""extAuth end to end: real Envoy calling real ext_authz servers (gRPC and HTTP)."""

from __future__ import annotations

import httpx
import pytest

from tests.harness import free_port, wait_for
from tests.policies.conftest import Stack, condition
from tests.policies.servers import body_of

pytestmark = pytest.mark.e2e

EXT = """
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: {name}}}
spec:
  type: ExtAuth
  extAuth:
    grpcService:
      backendRef: {{name: {service}, port: {port}}}
{extra}
"""

POLICY = """
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: {name}}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: {kind}, name: {target}{section}}}]
{body}
"""


def ext(name: str, service: str, port: int, extra: str = "") -> str:
    return EXT.format(name=name, service=service, port=port, extra=extra)


def policy(name: str, target: str, body: str, kind: str = "HTTPRoute", section: str | None = None) -> str:
    return POLICY.format(name=name, kind=kind, target=target, body=body,
                         section=f", sectionName: {section}" if section else "")


def test_grpc_ext_auth_allows_denies_and_passes_headers(stack: Stack) -> None:
    auth = stack.servers.auth("alpha")
    stack.service("auth-alpha", auth.port)
    stack.write("auth-basic.yaml", *[
        ext("alpha", "auth-alpha", auth.port),
        stack.route("auth-basic", "auth.example.com"),
        policy("auth-basic", "auth-basic", "  extAuth:\n    extensionRef: {name: alpha}\n"
                                            "    contextExtensions: {tier: gold}\n"
                                            "    withRequestBody: {maxRequestBytes: 1024}\n"),
    ])
    denied = stack.wait("auth.example.com", lambda r: r.status_code == 403, what="requests to be denied")
    assert denied.text == "denied by alpha\n"
    assert denied.headers["x-denied-by"] == "alpha"  # headers the server sets reach the client

    ok = stack.get("auth.example.com", "/hello?x=1", headers={"authorization": "Bearer good"})
    assert ok.status_code == 200
    seen = body_of(ok)["headers"]
    assert seen["x-auth-user"] == "user-of-good"  # headers the server adds reach the backend
    assert seen["x-context-alpha"] == "tier=gold"
    assert "authorization" not in seen  # and the ones it removes do not
    check = auth.checks[-1]
    assert check.path == "/hello?x=1" and check.context == {"tier": "gold"}
    posted = stack.get("auth.example.com", "/upload", method="POST", content=b"the body",
                       headers={"authorization": "Bearer good"})
    assert posted.status_code == 200
    assert auth.checks[-1].body == "the body"  # withRequestBody: the server sees the body

    st = stack.status("TrafficPolicy", "auth-basic")
    assert condition(st["conditions"], "Accepted")["status"] == "True"
    assert condition(st["conditions"], "Applied")["status"] == "True"
    anc = st["ancestors"][0]
    assert anc["ancestorRef"] == {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                                  "namespace": "default", "name": "auth-basic"}
    assert condition(anc["conditions"], "Applied")["message"] == "applied: extAuth"
    ext_status = stack.status("GatewayExtension", "alpha")
    assert condition(ext_status["conditions"], "ResolvedRefs")["status"] == "True"
    route = stack.status("HTTPRoute", "auth-basic")
    affected = condition(route["parents"][0]["conditions"], "gateway.lychgate.dev/TrafficPolicyAffected")
    assert "TrafficPolicy default/auth-basic: applied: extAuth" in affected["message"]


def test_gateway_wide_auth_disabled_on_one_route(stack: Stack) -> None:
    auth = stack.servers.auth("gwide")
    stack.service("auth-gwide", auth.port)
    stack.write("auth-gwide.yaml", *[
        ext("gwide", "auth-gwide", auth.port),
        stack.route("gwide", "gwide.example.com", """
            - name: private
              matches: [{path: {value: /private}}]
              backendRefs: [{name: app, port: 80}]
            - name: public
              matches: [{path: {value: /public}}]
              backendRefs: [{name: app, port: 80}]
        """),
        # The whole route needs auth ...
        policy("gwide-auth", "gwide", "  extAuth:\n    extensionRef: {name: gwide}\n"),
        # ... except the rule named public.
        policy("gwide-public", "gwide", "  extAuth:\n    disable: {}\n", section="public"),
    ])
    stack.wait("gwide.example.com", lambda r: r.status_code == 403, "/private", "the private rule to need auth")
    assert stack.get("gwide.example.com", "/public").status_code == 200
    assert all(c.path == "/private" for c in auth.checks)  # the public rule never calls the server
    gw_policy = condition(stack.ancestors("gwide-auth")[0]["conditions"], "Applied")
    assert gw_policy["status"] == "True"
    assert "on some routes extAuth overridden by policy default/gwide-public" in gw_policy["message"]


def test_http_ext_auth_and_failure_modes(stack: Stack) -> None:
    http = stack.servers.http_auth()
    stack.service("auth-http", http.port)
    dead = free_port()  # nothing listens here
    stack.service("auth-dead", dead)
    stack.write("auth-http.yaml", *[
        f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: http-auth}}
spec:
  extAuth:
    httpService:
      backendRef: {{name: auth-http, port: {http.port}}}
      pathPrefix: /verify
      authorizationResponse:
        headersToBackend: [x-user]
        headersToClient: [www-authenticate]
""",
        ext("dead-closed", "auth-dead", dead, "    statusOnError: 503\n"),
        ext("dead-open", "auth-dead", dead, "    failOpen: true\n"),
        stack.route("httpauth", "httpauth.example.com"),
        stack.route("closed", "closed.example.com"),
        stack.route("open", "open.example.com"),
        policy("httpauth", "httpauth", "  extAuth:\n    extensionRef: {name: http-auth}\n"),
        policy("closed", "closed", "  extAuth:\n    extensionRef: {name: dead-closed}\n"),
        policy("open", "open", "  extAuth:\n    extensionRef: {name: dead-open}\n"),
    ])
    denied = stack.wait("httpauth.example.com", lambda r: r.status_code == 401, "/x", "the HTTP auth service to deny")
    assert denied.headers["www-authenticate"] == 'Bearer realm="test"'
    assert "x-not-allowed" not in denied.headers  # only the allowed client headers pass
    ok = stack.get("httpauth.example.com", "/x", headers={"authorization": "Bearer good"})
    assert ok.status_code == 200
    assert body_of(ok)["headers"]["x-user"] == "alice"
    assert "x-not-allowed" not in body_of(ok)["headers"]
    assert http.paths[-1] == "/verify/x"

    # An auth service that cannot be reached: closed answers statusOnError, open lets requests through.
    stack.wait("closed.example.com", lambda r: r.status_code == 503, what="fail-closed auth to refuse")
    stack.wait("open.example.com", lambda r: r.status_code == 200 and body_of(r)["pod"] == "app",
               what="fail-open auth to let requests through")
    ext_status = stack.status("GatewayExtension", "dead-open")
    assert "0 ready endpoint" not in condition(ext_status["conditions"], "ResolvedRefs")["message"]


def test_http_ext_auth_default_timeout_waits_for_a_slow_service(stack: Stack) -> None:
    """Without requestTimeout an HTTP auth service has kgateway's 2 s to answer: one that
    takes half a second still lets requests through (with 200 ms it was a 403 for everyone);
    a requestTimeout shorter than the service fails closed."""
    slow = stack.servers.http_auth()
    slow.delay = 0.5
    stack.service("auth-slow", slow.port)
    service = f"      backendRef: {{name: auth-slow, port: {slow.port}}}\n"
    stack.write("auth-slow.yaml", *[
        "apiVersion: gateway.lychgate.dev/v1alpha1\nkind: GatewayExtension\nmetadata: {name: slow-default}\n"
        "spec:\n  extAuth:\n    httpService:\n" + service,
        "apiVersion: gateway.lychgate.dev/v1alpha1\nkind: GatewayExtension\nmetadata: {name: slow-short}\n"
        "spec:\n  extAuth:\n    httpService:\n" + service + "      requestTimeout: 100ms\n",
        stack.route("slowdefault", "slow-default.example.com"),
        stack.route("slowshort", "slow-short.example.com"),
        policy("slowdefault", "slowdefault", "  extAuth:\n    extensionRef: {name: slow-default}\n"),
        policy("slowshort", "slowshort", "  extAuth:\n    extensionRef: {name: slow-short}\n"),
    ])
    good = {"authorization": "Bearer good"}
    stack.wait("slow-default.example.com", lambda r: r.status_code == 200 and body_of(r)["pod"] == "app",
               what="the slow auth service to allow within the default timeout", headers=good)
    stack.wait("slow-short.example.com", lambda r: r.status_code == 403,
               what="a 100 ms requestTimeout to fail closed", headers=good)


def test_policy_attached_later_protects_open_connections(stack: Stack) -> None:
    """Once a listener has any policy, the ext_authz filter of every extension is in
    it before a policy uses it, so attaching the policy changes only routes: a
    keep-alive client's open connection is protected from its next request, not
    after the listener drains (docs/policies.md, "Filters in the chain")."""
    auth = stack.servers.auth("late")
    stack.service("auth-late", auth.port)
    stack.write("auth-late-ext.yaml", ext("late", "auth-late", auth.port), stack.route("late", "late.example.com"),
                stack.route("late-other", "late-other.example.com"),
                policy("late-other", "late-other", "  timeouts:\n    request: 10s\n"))
    admin = stack.lg.proxies()["default/gw"]["admin"]

    def listener_has_filter() -> bool:
        dump = stack.lg.client.get(f"http://{admin}/config_dump?resource=dynamic_listeners").text
        return "envoy.filters.http.ext_authz/default/late" in dump and "warming_state" not in dump


    wait_for(listener_has_filter, 10, "the extension's filter to be in the listener")
    stack.wait("late.example.com", lambda r: r.status_code == 200)
    with httpx.Client(timeout=5) as client:  # one keep-alive connection
        url = f"http://{stack.addr}:8080/"

        def local_port(resp: httpx.Response) -> int:
            return int(resp.extensions["network_stream"].get_extra_info("client_addr")[1])

        first = client.get(url, headers={"host": "late.example.com"})
        assert first.status_code == 200
        stack.write("auth-late-policy.yaml", policy("late", "late", "  extAuth:\n    extensionRef: {name: late}\n"))
        denied = wait_for(lambda: (r := client.get(url, headers={"host": "late.example.com"})).status_code == 403 and r,
                          5, "the open connection to be denied")
        assert local_port(denied) == local_port(first)  # the same connection
