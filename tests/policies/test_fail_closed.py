"""Authentication that cannot be applied fails closed: real Envoy, a real ext_authz server.

Each case gives its route a backend of its own, so "never contacted" is what
that backend recorded, not an inference from the status code.
"""

from __future__ import annotations

import pytest

from tests.policies.conftest import Stack, condition
from tests.policies.servers import BodyEcho
from tests.policies.test_attachment import auth_ext, policy, ref

pytestmark = pytest.mark.e2e

AFFECTED = "gateway.lychgate.dev/TrafficPolicyAffected"
GRANT = """
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: allow-extensions, namespace: auth-closed}
spec:
  from: [{group: gateway.lychgate.dev, kind: GatewayExtension, namespace: default}]
  to: [{group: "", kind: Service}]
"""


def own_backend(stack: Stack, name: str) -> tuple[BodyEcho, str]:
    """A backend only this route uses, and the rules that send to it."""
    echo = stack.servers.echo(name)
    stack.service(name, echo.port)
    return echo, f"- backendRefs: [{{name: {name}, port: {echo.port}}}]"


def assert_closed(stack: Stack, name: str, host: str, backend: BodyEcho, reason: str, cause: str) -> None:
    resp = stack.wait(host, lambda r: r.status_code == 500, what="the route to fail closed")
    assert resp.text == ("invalid route configuration detected and replaced with a direct response. "
                         "A policy of this route is invalid; see the TrafficPolicy status.\n")
    assert stack.get(host, headers={"authorization": "Bearer good"}).status_code == 500  # credentials change nothing
    assert backend.hits == {}  # the backend never saw a request
    applied = stack.applied(name)
    assert (applied["status"], applied["reason"]) == ("False", reason)
    assert cause in applied["message"] and "answer 500" in applied["message"]
    affected = condition(stack.status("HTTPRoute", name)["parents"][0]["conditions"], AFFECTED)
    assert f"TrafficPolicy default/{name}: not applied: " in affected["message"]
    assert cause in affected["message"] and "answer 500" in affected["message"]


def test_missing_reference_grant_fails_closed_until_granted(stack: Stack) -> None:
    auth = stack.servers.auth("closed-grant")
    stack.service("closed-grant-auth", auth.port, namespace="auth-closed")
    backend, rules = own_backend(stack, "closed-grant-app")
    stack.write(
        "closed-grant.yaml",
        auth_ext("closed-grant", "closed-grant-auth", auth.port, namespace="auth-closed"),
        stack.route("closed-grant", "closed-grant.example.com", rules),
        policy("closed-grant", ref("closed-grant"), "  extAuth:\n    extensionRef: {name: closed-grant}"),
    )
    assert_closed(stack, "closed-grant", "closed-grant.example.com", backend, "RefNotPermitted",
                  "ReferenceGrant missing for Service auth-closed/closed-grant-auth")
    assert auth.checks == []
    ext = stack.status("GatewayExtension", "closed-grant")
    assert condition(ext["conditions"], "ResolvedRefs")["reason"] == "RefNotPermitted"

    # The grant arrives: the route asks the auth server and serves who it allows.
    stack.write("closed-grant-grant.yaml", GRANT)
    stack.wait("closed-grant.example.com", lambda r: r.status_code == 403, what="the grant to let auth apply")
    ok = stack.get("closed-grant.example.com", headers={"authorization": "Bearer good"})
    assert ok.status_code == 200 and ok.headers["x-backend"] == "closed-grant-app"
    assert auth.checks and sum(backend.hits.values()) == 1  # only the allowed request reached it
    assert stack.applied("closed-grant")["status"] == "True"


def test_extension_not_accepted_fails_closed(stack: Stack) -> None:
    auth = stack.servers.auth("closed-invalid")
    stack.service("closed-invalid-auth", auth.port)
    backend, rules = own_backend(stack, "closed-invalid-app")
    broken = auth_ext("closed-invalid", "closed-invalid-auth", auth.port) + "\n      requestTimeout: never"
    stack.write(
        "closed-invalid.yaml", broken,
        stack.route("closed-invalid", "closed-invalid.example.com", rules),
        policy("closed-invalid", ref("closed-invalid"), "  extAuth:\n    extensionRef: {name: closed-invalid}"),
    )
    assert_closed(stack, "closed-invalid", "closed-invalid.example.com", backend, "ExtensionNotAccepted",
                  "GatewayExtension default/closed-invalid is not accepted: "
                  "spec.extAuth.grpcService.requestTimeout: 'never' is not a duration")
    ext = stack.status("GatewayExtension", "closed-invalid")
    assert condition(ext["conditions"], "Accepted")["status"] == "False"
    assert auth.checks == []


def test_missing_service_fails_closed_and_other_routes_serve(stack: Stack) -> None:
    backend, rules = own_backend(stack, "closed-nosvc-app")
    stack.write(
        "closed-nosvc.yaml",
        auth_ext("closed-nosvc", "no-such-auth", 9000),
        stack.route("closed-nosvc", "closed-nosvc.example.com", rules),
        stack.route("closed-nosvc-neighbour", "closed-nosvc-neighbour.example.com"),
        policy("closed-nosvc", ref("closed-nosvc"), "  extAuth:\n    extensionRef: {name: closed-nosvc}"),
    )
    assert_closed(stack, "closed-nosvc", "closed-nosvc.example.com", backend, "BackendNotFound",
                  "Service default/no-such-auth not found")
    assert stack.get("closed-nosvc-neighbour.example.com").status_code == 200
