"""acl end to end: real Envoy deciding by the client address, longest prefix first.

Envoy trusts one X-Forwarded-For hop here (a ListenerPolicy), so a request
stands for any client address by naming it in X-Forwarded-For, as in
kgateway's suite; without the header the client is 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import wait_for
from tests.policies.conftest import Stack
from tests.policies.test_attachment import policy, ref
from tests.policies.test_listener_settings import listener_policy

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def access_log(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    log = tmp_path_factory.mktemp("acl") / "access.log"
    fmt = "%REQ(:AUTHORITY)% %RESPONSE_CODE% %DYNAMIC_METADATA(dev.kgateway.http.acl:blocked-by)%"
    listener_policy(stack, f'accessLog: [{{fileSink: {{path: {log}, stringFormat: "{fmt}"}}}}]\n'
                           "xffNumTrustedHops: 1")
    return log


def acl(body: str) -> str:
    return "  acl:\n" + body


def from_(address: str) -> dict[str, str]:
    return {"x-forwarded-for": address}


def test_longest_prefix_decides_whatever_the_order(stack: Stack, access_log: Path) -> None:
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
    assert denied.text == "access denied\n"
    assert stack.get("acl-narrow-allow.example.com").status_code == 200
    assert stack.get("acl-default.example.com").status_code == 403


def test_hole_punch_with_named_rules(stack: Stack, access_log: Path) -> None:
    """kgateway's TestHttpACLHolePunchNamedRules: deny 10/8, allow 10.1/16, deny 10.1.2.3."""
    host = "acl-holes.example.com"
    stack.write("acl-holes.yaml", stack.route("acl-holes", host),
                policy("acl-holes", ref("acl-holes"), acl("""\
    defaultAction: allow
    rules:
      - {name: block-rogue-host, cidrs: [10.1.2.3], action: deny}
      - {name: block-internal-range, cidrs: [10.0.0.0/8], action: deny}
      - {name: allow-trusted-subnet, cidrs: [10.1.0.0/16], action: allow}""")))
    stack.wait(host, lambda r: r.status_code == 403, headers=from_("10.1.2.3"), what="the ACL to apply")
    assert stack.get(host, headers=from_("10.1.2.4")).status_code == 200
    assert stack.get(host, headers=from_("10.2.0.1")).status_code == 403
    assert stack.get(host, headers=from_("8.8.8.8")).status_code == 200


def test_custom_deny_response_and_blocked_by(stack: Stack, access_log: Path) -> None:
    """kgateway's TestHttpACLCustomDenyResponse, TestHttpACLBlockedByHeader and
    TestHttpACLDynamicMetadata: the status, extra headers, the deciding rule's name
    in a header and in dynamic metadata for the access log."""
    host, older = "acl-custom.example.com", "acl-older.example.com"
    rules = """\
    rules:
      - {name: block-internal-range, cidrs: [10.0.0.0/8], action: deny}
      - {cidrs: [192.168.0.0/16], action: deny}
      - {cidrs: [203.0.113.0/24], action: allow}"""
    stack.write("acl-custom.yaml", stack.route("acl-custom", host), stack.route("acl-older", older),
                policy("acl-custom", ref("acl-custom"), acl(f"""\
    defaultAction: deny
    denyResponse:
      statusCode: 451
      headers: [{{name: X-Blocked-Reason, value: geo-policy}}, {{name: Retry-After, value: "3600"}}]
      blockedByHeaderName: X-Blocked-By
{rules}""")),
                # kgateway's other names: httpAcl, addBlockedByHeader
                policy("acl-older", ref("acl-older"), f"""  httpAcl:
    defaultAction: deny
    denyResponse: {{addBlockedByHeader: X-Blocked-By}}
{rules}"""))
    named = stack.wait(host, lambda r: r.status_code == 451, headers=from_("10.5.5.5"), what="the custom deny")
    assert named.headers["x-blocked-by"] == "block-internal-range"
    assert named.headers["x-blocked-reason"] == "geo-policy" and named.headers["retry-after"] == "3600"
    assert stack.get(host, headers=from_("192.168.1.1")).headers["x-blocked-by"] == "rule"
    assert stack.get(host, headers=from_("8.8.8.8")).headers["x-blocked-by"] == "default"
    allowed = stack.get(host, headers=from_("203.0.113.5"))
    assert allowed.status_code == 200 and "x-blocked-by" not in allowed.headers

    old = stack.wait(older, lambda r: r.status_code == 403, headers=from_("10.5.5.5"), what="httpAcl to apply")
    assert old.headers["x-blocked-by"] == "block-internal-range"

    def logged() -> list[str] | None:
        lines = access_log.read_text().splitlines() if access_log.exists() else []
        return lines if f"{host} 451 default" in lines else None

    lines = wait_for(logged, 10, "the ACL decision in the access log")
    assert f"{host} 451 block-internal-range" in lines and f"{host} 451 rule" in lines
    assert f"{host} 200 -" in lines  # allowed: no decision to report


def test_route_level_replaces_gateway_level_and_same_level_policies_merge(stack: Stack, access_log: Path) -> None:
    host, other = "acl-merge.example.com", "acl-gw-only.example.com"
    gateway = "  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]"
    stack.write("acl-merge.yaml", stack.route("acl-merge", host), stack.route("acl-gw-only", other),
                # Gateway tier: deny 172.16/12 (and everything else is allowed)
                policy("acl-gw", gateway, acl(
                    "    defaultAction: allow\n    rules: [{name: gw-deny, cidrs: [172.16.0.0/12], action: deny}]")),
                # Route tier, two policies: their rules merge; the Gateway's rule is gone here
                policy("acl-route-a", ref("acl-merge"), acl(
                    "    defaultAction: allow\n    rules: [{name: route-a, cidrs: [10.0.0.0/8], action: deny}]")),
                policy("acl-route-b", ref("acl-merge"), acl(
                    "    defaultAction: allow\n    denyResponse: {blockedByHeaderName: x-blocked-by}\n"
                    "    rules: [{name: route-b, cidrs: [192.168.0.0/16], action: deny}]")))
    stack.wait(other, lambda r: r.status_code == 403, headers=from_("172.16.0.9"), what="the Gateway ACL")
    stack.wait(host, lambda r: r.status_code == 403, headers=from_("192.168.0.9"), what="the route ACLs")
    a = stack.get(host, headers=from_("10.0.0.9"))
    assert a.status_code == 403 and a.headers["x-blocked-by"] == "route-a"
    assert stack.get(host, headers=from_("192.168.0.9")).headers["x-blocked-by"] == "route-b"
    assert stack.get(host, headers=from_("172.16.0.9")).status_code == 200  # the route tier replaced it
    assert stack.get(other, headers=from_("10.0.0.9")).status_code == 200


def test_range_with_host_bits_is_refused(stack: Stack, access_log: Path) -> None:
    stack.write("acl-bits.yaml", stack.route("acl-bits", "acl-bits.example.com"),
                policy("acl-bits", ref("acl-bits"), acl(
                    "    defaultAction: allow\n    rules: [{cidrs: [172.18.0.0/12], action: deny}]")))
    stack.wait("acl-bits.example.com", lambda r: r.status_code == 500, what="the invalid ACL to fail closed")
    accepted = stack.condition_when("TrafficPolicy", "acl-bits", "Accepted", lambda c: c["status"] == "False")
    assert accepted["message"] == ("invalid field spec.acl.rules[0].cidrs[0]: '172.18.0.0/12' has host bits set; "
                                   "did you mean 172.16.0.0/12?")
