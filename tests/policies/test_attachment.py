"""The attachment rules of spec §3, shown by traffic and by status.

1. Several policies targeting the same route: each field goes to the oldest policy that
   sets it (kgateway's field-by-field merge); a newer policy's other fields still apply.
2. Conflicts in general: the oldest is enforced; DeepMerge (policyMerge) merges
   extAuth, extProc and transformation instead (a second control plane runs with it on).
3. A selector that matches nothing leaves the policy unapplied, and says so.
4. A GatewayExtension's Service in another namespace needs a ReferenceGrant.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.policies.conftest import Stack, condition
from tests.policies.servers import AuthServer, body_of

pytestmark = pytest.mark.e2e


def policy(name: str, targets: str, body: str, created: str | None = None) -> str:
    stamp = f", creationTimestamp: '{created}'" if created else ""
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: {name}{stamp}}}
spec:
{targets}
{body}"""


def ref(route: str) -> str:
    return f"  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: {route}}}]"


def auth_ext(name: str, service: str, port: int, namespace: str | None = None) -> str:
    ns = f", namespace: {namespace}" if namespace else ""
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: {name}}}
spec:
  extAuth:
    grpcService:
      backendRef: {{name: {service}, port: {port}{ns}}}"""


def conflicting(stack: Stack, prefix: str, auth: AuthServer) -> None:
    """Two policies on one route through targetRefs, each asking for ext auth and headers."""
    stack.service(f"{prefix}-auth", auth.port)
    stack.write(
        f"{prefix}.yaml",
        auth_ext(f"{prefix}-auth", f"{prefix}-auth", auth.port),
        stack.route(prefix, f"{prefix}.example.com"),
        policy(f"{prefix}-old", ref(prefix), f"""
  extAuth:
    extensionRef: {{name: {prefix}-auth}}
    contextExtensions: {{from-old: "1"}}
  transformation:
    request:
      set: [{{name: x-old, value: "yes"}}]
  headerModifiers:
    response: {{set: [{{name: x-winner, value: old}}]}}""", created="2024-01-01T00:00:00Z"),
        policy(f"{prefix}-new", ref(prefix), f"""
  extAuth:
    extensionRef: {{name: {prefix}-auth}}
    contextExtensions: {{from-new: "2"}}
  transformation:
    request:
      set: [{{name: x-new, value: "yes"}}]
  headerModifiers:
    response: {{set: [{{name: x-winner, value: new}}]}}""", created="2025-01-01T00:00:00Z"),
    )


def test_oldest_policy_wins_through_target_refs(stack: Stack) -> None:
    auth = stack.servers.auth("oldest")
    conflicting(stack, "oldest", auth)
    token = {"authorization": "Bearer good"}
    resp = stack.wait("oldest.example.com", lambda r: r.headers.get("x-winner") == "old", headers=token,
                      what="the older policy to be applied")
    seen = body_of(resp)["headers"]
    assert seen["x-old"] == "yes" and "x-new" not in seen
    assert seen["x-context-oldest"] == "from-old=1"  # the newer policy's context never reaches the server

    new = stack.status("TrafficPolicy", "oldest-new")
    assert condition(new["conditions"], "Accepted")["status"] == "True"  # valid ...
    applied = condition(new["ancestors"][0]["conditions"], "Applied")
    assert applied["status"] == "False" and applied["reason"] == "Overridden"  # ... and says why it does nothing
    assert applied["message"] == (
        "extAuth, headerModifiers, transformation overridden by older policy default/oldest-old")
    assert condition(stack.status("TrafficPolicy", "oldest-old")["conditions"], "Applied")["status"] == "True"
    affected = condition(stack.status("HTTPRoute", "oldest")["parents"][0]["conditions"],
                         "gateway.lychgate.dev/TrafficPolicyAffected")
    assert "TrafficPolicy default/oldest-new: not applied (Overridden)" in affected["message"]

    # The newer policy takes over when the older one goes.
    docs = (stack.lg.manifests / "oldest.yaml").read_text().split("\n---\n")
    stack.lg.write("oldest.yaml", "\n---\n".join(d for d in docs if "name: oldest-old" not in d))
    resp = stack.wait("oldest.example.com", lambda r: r.headers.get("x-winner") == "new", headers=token,
                      what="the remaining policy to be applied")
    assert body_of(resp)["headers"]["x-context-oldest"] == "from-new=2"
    assert stack.applied("oldest-new")["status"] == "True"


def test_selectors_merge_fields_oldest_first(stack: Stack) -> None:
    """Policies attached through selectors share a route field by field; the oldest
    wins each field both set."""
    stack.write(
        "fields.yaml",
        stack.route("fields", "fields.example.com", labels={"team": "fields"}),
        policy("fields-a", "  targetSelectors: [{group: gateway.networking.k8s.io, kind: HTTPRoute, "
                           "matchLabels: {team: fields}}]", """
  headerModifiers:
    response: {set: [{name: x-from, value: a}]}
  timeouts: {request: 7s}""", created="2024-01-01T00:00:00Z"),
        policy("fields-b", "  targetSelectors: [{group: gateway.networking.k8s.io, kind: HTTPRoute, "
                           "matchLabels: {team: fields}}]", """
  headerModifiers:
    response: {set: [{name: x-from, value: b}]}
  cors:
    allowOrigins: ["https://fields.example.com"]
    allowMethods: [GET]""", created="2025-01-01T00:00:00Z"),
    )
    resp = stack.wait("fields.example.com", lambda r: r.headers.get("x-from") == "a",
                      headers={"origin": "https://fields.example.com"}, what="the selector policies to apply")
    assert resp.headers["access-control-allow-origin"] == "https://fields.example.com"  # b's cors applies too
    assert body_of(resp)["headers"]["x-envoy-expected-rq-timeout-ms"] == "7000"  # and a's timeout
    b = condition(stack.ancestors("fields-b")[0]["conditions"], "Applied")
    assert b["status"] == "True" and b["reason"] == "PartiallyApplied"
    assert b["message"] == "applied: cors; headerModifiers overridden by older policy default/fields-a"


def test_target_refs_policies_merge_field_by_field(stack: Stack) -> None:
    """The issue's case: a buffer limit in one policy and a transformation in a newer one,
    both on the route through targetRefs, both apply; the field both set goes to the oldest."""
    stack.write(
        "by-field.yaml",
        stack.route("by-field", "by-field.example.com"),
        policy("by-field-buffer", ref("by-field"), """
  buffer: {maxRequestSize: 64}
  headerModifiers:
    response: {set: [{name: x-from, value: buffer}]}""", created="2024-01-01T00:00:00Z"),
        policy("by-field-transform", ref("by-field"), """
  transformation:
    request:
      set: [{name: x-transformed, value: "yes"}]
  headerModifiers:
    response: {set: [{name: x-from, value: transform}]}""", created="2025-01-01T00:00:00Z"),
    )
    resp = stack.wait("by-field.example.com", lambda r: "x-transformed" in body_of(r).get("headers", {}),
                      what="both policies to apply")
    assert resp.headers["x-from"] == "buffer"
    big = stack.get("by-field.example.com", "/upload", method="POST", content=b"x" * 1000)
    assert big.status_code == 413  # the older policy's buffer limit holds beside the newer transformation
    stack.condition_when("TrafficPolicy", "by-field-transform", "Applied", lambda c: c["status"] == "True")
    newer = condition(stack.ancestors("by-field-transform")[0]["conditions"], "Applied")
    assert (newer["status"], newer["reason"]) == ("True", "PartiallyApplied")
    assert newer["message"] == "applied: transformation; headerModifiers overridden by older policy default/by-field-buffer"


def test_unmatched_selector_says_so_until_a_route_matches(stack: Stack) -> None:
    selector = ("  targetSelectors: [{group: gateway.networking.k8s.io, kind: HTTPRoute, "
                "matchLabels: {app: nothing-yet}}]")
    body = "  headerModifiers:\n    response: {set: [{name: x-selected, value: 'yes'}]}"
    stack.write("unmatched.yaml", stack.route("unmatched", "unmatched.example.com"),
                policy("unmatched", selector, body))
    applied = stack.applied("unmatched")
    assert applied["status"] == "False" and applied["reason"] == "NoTargetMatched"
    assert applied["message"] == ("not applied: spec.targetSelectors[0] matched no HTTPRoute with labels "
                                  "app=nothing-yet in namespace default")
    assert condition(stack.status("TrafficPolicy", "unmatched")["conditions"], "Accepted")["status"] == "True"
    assert "x-selected" not in stack.get("unmatched.example.com").headers
    out = stack.lg.cli("get", "trafficpolicies")
    row = next(line for line in out.stdout.splitlines() if line.startswith("unmatched "))
    assert "True" in row and "False (NoTargetMatched)" in row and "HTTPRoute{app=nothing-yet}" in row

    # Label the route: the selector matches, and the policy applies.
    stack.write("unmatched.yaml", stack.route("unmatched", "unmatched.example.com", labels={"app": "nothing-yet"}),
                policy("unmatched", selector, body))
    stack.wait("unmatched.example.com", lambda r: r.headers.get("x-selected") == "yes", what="the policy to apply")
    assert stack.applied("unmatched")["status"] == "True"


def test_invalid_policy_fails_its_routes_closed_and_nothing_else(stack: Stack) -> None:
    stack.write(
        "invalid.yaml",
        stack.route("invalid", "invalid.example.com"),
        stack.route("invalid-neighbour", "invalid-neighbour.example.com"),
        policy("invalid", ref("invalid"), "  timeouts: {request: soon}\n  rateLimit: {global: {extensionRef: {name: rl},"
                                          " descriptors: [{entries: [{type: Header, header: 'x y'}]}]}}"),
    )
    resp = stack.wait("invalid.example.com", lambda r: r.status_code == 500, what="the targeted route to answer 500")
    assert resp.text == ("invalid route configuration detected and replaced with a direct response. "
                         "A policy of this route is invalid; see the TrafficPolicy status.\n")
    assert stack.get("invalid-neighbour.example.com").status_code == 200
    st = stack.status("TrafficPolicy", "invalid")
    accepted = condition(st["conditions"], "Accepted")
    assert accepted["status"] == "False" and accepted["reason"] == "Invalid"
    assert accepted["message"] == (
        "invalid field spec.rateLimit.global.descriptors[0].entries[0].header: 'x y' is not a valid header name; "
        "spec.timeouts.request: 'soon' is not a duration like 10s or 500ms")
    applied = condition(st["ancestors"][0]["conditions"], "Applied")
    assert applied["message"] == ("not applied: the policy is invalid; the routes it targets answer 500 "
                                  "until it is fixed")
    out = stack.lg.cli("get", "tp", "invalid")
    assert "False (Invalid)" in out.stdout and "HTTPRoute/invalid" in out.stdout

    # Fixed: the route serves again.
    stack.write("invalid.yaml", stack.route("invalid", "invalid.example.com"),
                stack.route("invalid-neighbour", "invalid-neighbour.example.com"),
                policy("invalid", ref("invalid"), "  timeouts: {request: 5s}"))
    stack.wait("invalid.example.com", lambda r: r.status_code == 200, what="the fixed policy to apply")


@pytest.fixture(scope="module")
def merging(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("merging"), policy_merge={
        "trafficPolicy": {"extAuth": "DeepMerge", "extProc": "DeepMerge", "transformation": "DeepMerge"}})
    yield s
    s.close()


def test_deep_merge_combines_what_oldest_wins_would_drop(merging: Stack) -> None:
    auth = merging.servers.auth("merged")
    conflicting(merging, "merged", auth)
    token = {"authorization": "Bearer good"}
    resp = merging.wait("merged.example.com", lambda r: r.status_code == 200 and "x-old" in body_of(r)["headers"],
                        headers=token, what="the merged policies to apply")
    seen = body_of(resp)["headers"]
    # transformation and extAuth merge across both policies ...
    assert seen["x-old"] == "yes" and seen["x-new"] == "yes"
    assert seen["x-context-merged"] == "from-new=2,from-old=1"
    # ... other fields still go to the oldest.
    assert resp.headers["x-winner"] == "old"

    new = condition(merging.ancestors("merged-new")[0]["conditions"], "Applied")
    assert new["status"] == "True" and new["reason"] == "PartiallyApplied"
    assert new["message"] == (
        "deep-merged into older or more specific policies: extAuth (with default/merged-old), "
        "transformation (with default/merged-old); headerModifiers overridden by older policy "
        "default/merged-old")
    old = condition(merging.ancestors("merged-old")[0]["conditions"], "Applied")
    assert old["message"] == ("applied: extAuth (deep-merged with default/merged-new), headerModifiers, "
                              "transformation (deep-merged with default/merged-new)")
