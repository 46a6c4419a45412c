"""Rate limit quota end to end: real Envoy reports bucket usage to a real RLQS
server (envoy.service.rate_limit_quota.v3) and enforces what it assigns."""

from __future__ import annotations

import pytest

from tests.harness import free_port, wait_for
from tests.policies.conftest import Stack, condition, lychgate_object
from tests.policies.rlqs_server import ALLOW_ALL, DENY_ALL, start, token_bucket

pytestmark = pytest.mark.e2e

RULES = """
- name: limited
  matches: [{path: {type: PathPrefix, value: /limited}}]
  backendRefs: [{name: app, port: 80}]
- name: other
  matches: [{path: {type: PathPrefix, value: /other}}]
  backendRefs: [{name: app, port: 80}]
"""


def extension(name: str, port: int) -> str:
    return lychgate_object("GatewayExtension", name, f"""  type: RateLimitQuota
  rateLimitQuota:
    grpcService: {{backendRef: {{name: {name}, port: {port}}}}}
    domain: shop""")


def quota(name: str, route: str, extension_name: str, extra: str = "") -> str:
    return (f"apiVersion: gateway.lychgate.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: {name}}}\n"
            f"spec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: {route}, "
            f"sectionName: limited}}]\n  rateLimit:\n    quota:\n      extensionRef: {{name: {extension_name}}}\n"
            f"      bucket: [{{key: route, type: Generic, value: {route}}}, {{key: tenant, type: Header, header: x-tenant}}]\n"
            f"      reportingInterval: 1s{extra}")


def bucket(route: str, tenant: str) -> frozenset[tuple[str, str]]:
    return frozenset({("route", route), ("tenant", tenant)})


def test_the_server_assigns_allow_deny_and_a_token_bucket(stack: Stack) -> None:
    rlqs = start(stack.servers)
    stack.service("rlqs", rlqs.port)
    host = "quota.example.com"
    stack.write("quota.yaml", extension("rlqs", rlqs.port), stack.route("quota", host, RULES), quota("quota", "quota", "rlqs"))
    assert stack.applied("quota")["status"] == "True"
    a, c = bucket("quota", "a"), bucket("quota", "c")
    # Nothing assigned yet: the default no-assignment behaviour lets requests through,
    # and the request made Envoy report the bucket (the domain is the extension's).
    stack.wait(host, lambda r: r.status_code == 200 and rlqs.reported(a), "/limited", headers={"x-tenant": "a"},
               what="tenant a's bucket to be reported")
    assert ("shop", a) == rlqs.reports[0][:2]
    rlqs.assign[a] = DENY_ALL
    stack.wait(host, lambda r: r.status_code == 429, "/limited", headers={"x-tenant": "a"}, what="deny-all to apply")
    # Other buckets, other rules and requests without the header are not touched.
    assert stack.get(host, "/limited", headers={"x-tenant": "b"}).status_code == 200
    assert stack.get(host, "/other", headers={"x-tenant": "a"}).status_code == 200
    assert stack.get(host, "/limited").status_code == 200  # no bucket id: not limited
    rlqs.assign[a] = ALLOW_ALL
    stack.wait(host, lambda r: r.status_code == 200, "/limited", headers={"x-tenant": "a"}, what="allow-all to apply")
    # A token bucket of 2 per minute: the third request of the minute is refused.
    rlqs.assign[c] = token_bucket(2)
    stack.wait(host, lambda r: rlqs.reported(c), "/limited", headers={"x-tenant": "c"}, what="tenant c reported")
    codes = [stack.wait(host, lambda r: r.status_code == 429, "/limited", headers={"x-tenant": "c"},
                        what="the token bucket to run out").status_code]
    codes += [stack.get(host, "/limited", headers={"x-tenant": "c"}).status_code for _ in range(3)]
    assert codes == [429, 429, 429, 429]
    # The next usage report (1 s) tells the server what Envoy refused.
    wait_for(lambda: any(denied > 0 for _, bk, _, denied in rlqs.reports if bk == c), 5, "a report of denials")
    assert condition(stack.status("GatewayExtension", "rlqs")["conditions"], "Accepted")["status"] == "True"


def test_deny_status_and_no_assignment_deny(stack: Stack) -> None:
    rlqs = start(stack.servers)
    stack.service("rlqs-strict", rlqs.port)
    host = "strict.example.com"
    stack.write("strict.yaml", extension("rlqs-strict", rlqs.port), stack.route("strict", host, RULES),
                quota("strict", "strict", "rlqs-strict", "\n      noAssignmentBehavior: Deny\n      denyStatus: 503"))
    # Until the server assigns a quota, noAssignmentBehavior Deny refuses, with denyStatus.
    resp = stack.wait(host, lambda r: r.status_code == 503, "/limited", headers={"x-tenant": "a"},
                      what="no-assignment deny")
    assert resp.status_code == 503
    rlqs.assign[bucket("strict", "a")] = ALLOW_ALL
    stack.wait(host, lambda r: r.status_code == 200, "/limited", headers={"x-tenant": "a"}, what="allow-all to apply")
    rlqs.assign[bucket("strict", "a")] = DENY_ALL
    stack.wait(host, lambda r: r.status_code == 503, "/limited", headers={"x-tenant": "a"}, what="deny-all as 503")


@pytest.mark.parametrize(("behavior", "expected"), [("Allow", 200), ("Deny", 429)])
def test_a_server_that_is_down_leaves_the_no_assignment_behavior(stack: Stack, behavior: str, expected: int) -> None:
    name, port = f"rlqs-down-{behavior.lower()}", free_port()
    stack.service(name, port)  # nothing listens there
    host = f"{name}.example.com"
    stack.write(f"{name}.yaml", extension(name, port), stack.route(name, host, RULES),
                quota(name, name, name, f"\n      noAssignmentBehavior: {behavior}"))
    assert stack.applied(name)["status"] == "True"
    resp = stack.wait(host, lambda r: r.status_code == expected, "/limited", headers={"x-tenant": "a"},
                      what=f"{behavior} while the server is down")
    assert resp.status_code == expected
    assert stack.get(host, "/other", headers={"x-tenant": "a"}).status_code == 200


def test_a_missing_extension_leaves_the_policy_unapplied(stack: Stack) -> None:
    host = "orphan.example.com"
    stack.write("orphan.yaml", stack.route("orphan", host, RULES), quota("orphan", "orphan", "nowhere",
                                                                          "\n      noAssignmentBehavior: Deny"))
    applied = stack.applied("orphan")
    assert applied["status"] == "False"
    assert "GatewayExtension default/nowhere not found" in applied["message"]
    assert stack.wait(host, lambda r: r.status_code == 200, "/limited", headers={"x-tenant": "a"}).status_code == 200
