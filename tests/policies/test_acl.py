"""acl end to end: real Envoy deciding by the client address, longest prefix first.
Envoy sees this test's requests coming from 127.0.0.1."""

from __future__ import annotations

import pytest

from tests.policies.conftest import Stack, condition
from tests.policies.test_attachment import policy, ref

pytestmark = pytest.mark.e2e


def acl(body: str) -> str:
    return "  acl:\n" + body


def test_longest_prefix_decides_whatever_the_order(stack: Stack) -> None:
    stack.write("acl.yaml",
                stack.route("acl-narrow-deny", "acl-narrow-deny.example.com"),
                stack.route("acl-narrow-allow", "acl-narrow-allow.example.com"),
                stack.route("acl-default", "acl-default.example.com"),
                # /32 deny beats the /8 allow, though it comes second
                policy("acl-narrow-deny", ref("acl-narrow-deny"), acl(
                    "    defaultAction: allow\n    rules:\n"
                    "      - {name: loopback, cidrs: [127.0.0.0/8], action: allow}\n"
                    "      - {name: me, cidrs: [127.0.0.1], action: deny}")),
                # /32 allow beats the /8 deny, though it comes second
                policy("acl-narrow-allow", ref("acl-narrow-allow"), acl(
                    "    defaultAction: deny\n    rules:\n"
                    "      - {cidrs: [127.0.0.0/8], action: deny}\n"
                    "      - {cidrs: [127.0.0.1/32, '::1'], action: allow}")),
                # no rule names this client: the default decides
                policy("acl-default", ref("acl-default"), acl(
                    "    defaultAction: deny\n    rules: [{cidrs: [10.0.0.0/8], action: allow}]")))
    denied = stack.wait("acl-narrow-deny.example.com", lambda r: r.status_code == 403, what="the ACL to apply")
    assert denied.text == "RBAC: access denied"
    assert stack.get("acl-narrow-allow.example.com").status_code == 200
    assert stack.get("acl-default.example.com").status_code == 403


def test_custom_deny_response_is_reported(stack: Stack) -> None:
    stack.write("acl-custom.yaml", stack.route("acl-custom", "acl-custom.example.com"),
                policy("acl-custom", ref("acl-custom"), acl(
                    "    defaultAction: deny\n    denyResponse: {statusCode: 451}")))
    stack.wait("acl-custom.example.com", lambda r: r.status_code == 500, what="the unsupported ACL to fail closed")
    accepted = condition(stack.status("TrafficPolicy", "acl-custom")["conditions"], "Accepted")
    assert accepted["message"] == ("invalid field spec.acl.denyResponse: a custom deny response is not supported "
                                   "by lychgate yet (denied requests get 403)")
