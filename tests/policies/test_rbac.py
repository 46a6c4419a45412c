"""rbac end to end: real Envoy allowing and denying by header, path, client CIDR and
the claims of a JWT it verified (keys from a JWKS server, tokens signed with RSA)."""

from __future__ import annotations

import json

import pytest

from tests.policies.conftest import Stack, condition
from tests.policies.test_attachment import policy, ref
from tests.policies.test_jwt_auth import bearer, jwt_ext
from tests.policies.tokens import Issuer

pytestmark = pytest.mark.e2e
DENIED = "RBAC: access denied"


def rbac(body: str) -> str:
    return "  rbac:\n" + body


def test_allow_by_header_and_deny_by_path(stack: Stack) -> None:
    stack.write("rbac-hp.yaml",
                stack.route("rbac-header", "rbac-header.example.com"),
                stack.route("rbac-path", "rbac-path.example.com"),
                policy("rbac-header", ref("rbac-header"), rbac(
                    "    policy:\n      matchExpressions: [\"request.headers['x-role'] == 'admin'\"]")),
                policy("rbac-path", ref("rbac-path"), rbac(
                    "    action: Deny\n    policy:\n      matchExpressions:\n"
                    "        - \"request.path.startsWith('/secret')\"\n"
                    "        - \"request.method == 'DELETE'\"")))
    denied = stack.wait("rbac-header.example.com", lambda r: r.status_code == 403, what="rbac to apply")
    assert denied.text == DENIED
    assert stack.get("rbac-header.example.com", headers={"x-role": "user"}).status_code == 403
    assert stack.get("rbac-header.example.com", headers={"x-role": "admin"}).status_code == 200

    stack.wait("rbac-path.example.com", lambda r: r.status_code == 403, "/secret/plans", what="deny to apply")
    assert stack.get("rbac-path.example.com", "/public").status_code == 200
    assert stack.get("rbac-path.example.com", "/public", method="DELETE").status_code == 403  # either expression


def test_client_cidrs(stack: Stack) -> None:
    # Envoy sees this test's requests coming from 127.0.0.1.
    stack.write("rbac-cidr.yaml",
                stack.route("rbac-local", "rbac-local.example.com"),
                stack.route("rbac-remote", "rbac-remote.example.com"),
                stack.route("rbac-blocked", "rbac-blocked.example.com"),
                policy("rbac-local", ref("rbac-local"), rbac("    policy: {allowedCIDRs: [127.0.0.0/8]}")),
                policy("rbac-remote", ref("rbac-remote"), rbac("    policy: {allowedCIDRs: [10.0.0.0/8, 192.168.1.7]}")),
                policy("rbac-blocked", ref("rbac-blocked"), rbac(
                    "    policy:\n      allowedCIDRs: [0.0.0.0/0]\n      blockedCIDRs: [127.0.0.1]\n"
                    "      matchExpressions: ['true']")))
    stack.wait("rbac-remote.example.com", lambda r: r.status_code == 403, what="rbac to apply")
    assert stack.get("rbac-local.example.com").status_code == 200
    blocked = stack.get("rbac-blocked.example.com")
    assert (blocked.status_code, blocked.text) == (403, DENIED)  # blocked wins over allowed


def test_jwt_claim_decides(stack: Stack) -> None:
    idp = Issuer("rbac-issuer", "rbac")
    stack.write("rbac-jwt.yaml",
                jwt_ext("rbac-jwt", f"""      - name: idp
        issuer: rbac-issuer
        jwks: {{local: {{inline: '{json.dumps(idp.jwks())}'}}}}
"""),
                stack.route("rbac-jwt", "rbac-jwt.example.com"),
                policy("rbac-jwt", ref("rbac-jwt"), "  jwtAuth: {extensionRef: {name: rbac-jwt}}\n" + rbac(
                    "    policy:\n      matchExpressions:\n"
                    "        - \"metadata.filter_metadata['envoy.filters.http.jwt_authn']['payload']['role'] == 'admin'\"")))
    stack.wait("rbac-jwt.example.com", lambda r: r.status_code == 401, what="jwtAuth and rbac to apply")
    assert stack.get("rbac-jwt.example.com", headers=bearer(idp.token(sub="u", role="admin"))).status_code == 200
    user = stack.get("rbac-jwt.example.com", headers=bearer(idp.token(sub="u", role="user")))
    assert (user.status_code, user.text) == (403, DENIED)


def test_invalid_expression_is_named_and_fails_closed(stack: Stack) -> None:
    stack.write("rbac-bad.yaml", stack.route("rbac-bad", "rbac-bad.example.com"),
                policy("rbac-bad", ref("rbac-bad"), rbac("    policy:\n      matchExpressions: [\"request.path ==\"]")))
    stack.wait("rbac-bad.example.com", lambda r: r.status_code == 500, what="the invalid policy to fail closed")
    accepted = condition(stack.status("TrafficPolicy", "rbac-bad")["conditions"], "Accepted")
    assert accepted["status"] == "False"
    assert accepted["message"].startswith(
        "invalid field spec.rbac.policy.matchExpressions[0]: 'request.path ==' is not valid CEL")
