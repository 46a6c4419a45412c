"""Route delegation through a real Envoy: kgateway's scenarios (a parent route on the
Gateway handing path prefixes to child routes in team namespaces), one after the
other on one running lychgate, each replacing the routes of the one before."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import EchoBackends, Lychgate, gateway_yaml, service_yaml, wait_for

pytestmark = pytest.mark.e2e

TO_ROOT = "parentRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: root, namespace: infra}]"


def parent(name: str, rules: list[tuple[str, str]], hostnames: str = "") -> str:
    """A parent route on the Gateway delegating each path prefix to every route of a namespace."""
    body = "".join(f"""
    - matches: [{{path: {{type: PathPrefix, value: {prefix}}}}}]
      backendRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: "*", namespace: {ns}}}]"""
                   for prefix, ns in rules)
    hosts = f"\n  hostnames: [{hostnames}]" if hostnames else ""
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: infra}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]{hosts}
  rules:{body}
"""


def child(ns: str, name: str, match: str, extra: str = "", meta: str = "", backend: str | None = None,
          filters: str = "[]") -> str:
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {ns}{meta}}}
spec:
  {extra}
  rules:
    - matches: [{match}]
      filters: {filters}
      backendRefs: [{backend or f"{{name: svc, namespace: {ns}, port: 80}}"}]
"""


def scenario(lg: Lychgate, *docs: str) -> None:
    lg.write("routes.yaml", "\n---\n".join(docs))


def accepted_messages(lg: Lychgate, ns: str, name: str) -> str:
    return " ".join(c.get("message", "") for p in lg.status("HTTPRoute", name, ns).get("parents", [])
                    for c in p["conditions"])


@pytest.fixture
def stack(lychgate: Lychgate, backends: EchoBackends) -> tuple[Lychgate, str]:
    for ns in ("team1", "team2"):
        lychgate.write(f"svc-{ns}.yaml", service_yaml("svc", 80, backends.start(pod=ns), namespace=ns))
    lychgate.write("gateway.yaml", gateway_yaml(namespace="infra"))
    scenario(lychgate, parent("root", [("/anything/team1", "team1"), ("/anything/team2", "team2")]),
             child("team1", "svc1", "{path: {type: PathPrefix, value: /anything/team1/foo}}"),
             child("team2", "svc2", "{path: {type: Exact, value: /anything/team2/foo}}", TO_ROOT))
    lychgate.start()
    return lychgate, lychgate.address("gw", "infra")


def test_kgateway_delegation_scenarios(stack: tuple[Lychgate, str]) -> None:
    lg, addr = stack
    # basic: a child without parentRefs and one naming the parent
    lg.wait_pod(addr, "team1", "/anything/team1/foo")
    lg.wait_pod(addr, "team2", "/anything/team2/foo")
    assert lg.pod(addr, "/anything/team2/foo/more") == 404  # the child's Exact match, not the parent's prefix

    # invalid child: hostnames on a child refuse it (500 on its parent's rule), its sibling still serves
    scenario(lg, parent("root", [("/anything/team1", "team1"), ("/anything/team2", "team2")]),
             child("team1", "svc1", "{path: {type: PathPrefix, value: /anything/team1/foo}}"),
             child("team2", "svc2", "{path: {type: Exact, value: /anything/team2/foo}}", "hostnames: [team2.com]"))
    lg.wait_pod(addr, 500, "/anything/team2/foo")
    assert lg.pod(addr, "/anything/team1/foo") == "team1"
    wait_for(lambda: "spec.hostnames must be unset" in accepted_messages(lg, "team2", "svc2"), 10, "child status")

    # cyclic: a child delegating to its own namespace selects itself
    scenario(lg, parent("root", [("/anything/team1", "team1"), ("/anything/team2", "team2-root")]),
             child("team1", "svc1", "{path: {type: PathPrefix, value: /anything/team1/foo}}"),
             child("team2-root", "mid", "{path: {type: PathPrefix, value: /anything/team2/}}", TO_ROOT,
                   backend='{group: gateway.networking.k8s.io, kind: HTTPRoute, name: "*", namespace: team2}'),
             child("team2", "svc2", "{path: {type: PathPrefix, value: /anything/team2/foo}}",
                   backend='{group: gateway.networking.k8s.io, kind: HTTPRoute, name: "*", namespace: team2}'))
    lg.wait_pod(addr, 500, "/anything/team2/foo")
    assert lg.pod(addr, "/anything/team1/foo") == "team1"
    wait_for(lambda: "cyclic reference detected" in accepted_messages(lg, "team2", "svc2"), 10, "cycle status")

    # recursive: the same chain ending in a route that forwards (a regex under the prefix)
    scenario(lg, parent("root", [("/anything/team2", "team2-root")]),
             child("team2-root", "mid", "{path: {type: PathPrefix, value: /anything/team2/}}", TO_ROOT,
                   backend='{group: gateway.networking.k8s.io, kind: HTTPRoute, name: "*", namespace: team2}'),
             child("team2", "svc2", '{path: {type: RegularExpression, value: "/anything/team2/.*"}}'))
    lg.wait_pod(addr, "team2", "/anything/team2/bar")
    assert lg.pod(addr, "/anything/team1/foo") == 404

    # header and query matches: a child must repeat its parent's
    root_hq = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: root, namespace: infra}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  rules:
    - matches: [{path: {type: PathPrefix, value: /anything/team1}, headers: [{name: header1, value: val1}],
                 queryParams: [{name: query1, value: val1}]}]
      backendRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: "*", namespace: team1}]
    - matches: [{path: {type: PathPrefix, value: /anything/team2}, headers: [{name: header2, value: val2}],
                 queryParams: [{name: query2, value: val2}]}]
      backendRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: "*", namespace: team2}]
"""
    scenario(lg, root_hq,
             child("team1", "svc1", "{path: {type: PathPrefix, value: /anything/team1/foo}, headers: "
                   "[{name: header1, value: val1}, {name: headerX, value: valX}], queryParams: "
                   "[{name: query1, value: val1}, {name: queryX, value: valX}]}"),
             child("team2", "svc2", "{path: {type: Exact, value: /anything/team2/foo}, headers: "
                   "[{name: headerX, value: valX}], queryParams: [{name: queryX, value: valX}]}", TO_ROOT))
    both = {"header1": "val1", "headerX": "valX"}
    lg.wait_pod(addr, "team1", "/anything/team1/foo?query1=val1&queryX=valX", headers=both)
    assert lg.pod(addr, "/anything/team2/foo?queryX=valX", headers={"headerX": "valX"}) == 404
    assert lg.pod(addr, "/anything/team2/foo?query2=val2", headers={"header2": "val2"}) == 500

    # multiple parents: a child naming one parent is served under that parent's hostname only
    scenario(lg, parent("p1", [("/anything/team1", "team1"), ("/anything/team2", "team2")], "p1.com"),
             parent("p2", [("/anything/team1", "team1"), ("/anything/team2", "team2")], "p2.com"),
             child("team1", "svc1", "{path: {type: PathPrefix, value: /anything/team1/foo}}"),
             child("team2", "svc2", "{path: {type: Exact, value: /anything/team2/foo}}",
                   TO_ROOT.replace("name: root", "name: p1")))
    lg.wait_pod(addr, 500, "/anything/team2/foo", host="p2.com")
    assert lg.pod(addr, "/anything/team2/foo", host="p1.com") == "team2"
    assert lg.pod(addr, "/anything/team1/foo", host="p1.com") == "team1"
    assert lg.pod(addr, "/anything/team1/foo", host="p2.com") == "team1"

    # matcher inheritance: one child under two parents' prefixes
    scenario(lg, parent("p1", [("/anything/foo", "team1")]), parent("p2", [("/anything/baz", "team1")]),
             child("team1", "svc1", "{path: {type: PathPrefix, value: /child}}",
                   meta=", annotations: {delegation.kgateway.dev/inherit-parent-matcher: 'true'}"))
    lg.wait_pod(addr, "team1", "/anything/foo/child")
    assert lg.pod(addr, "/anything/baz/child") == "team1"
    assert lg.pod(addr, "/child") == 404

    # route weight: the heavier child's broad prefix wins over the other's exact match
    label = "labels: {delegation.kgateway.dev/label: child}"
    by_label = '{group: delegation.kgateway.dev, kind: label, name: child, namespace: all}'
    header = '[{type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: origin, value: %s}]}}]'
    scenario(lg, child("infra", "root", "{path: {type: PathPrefix, value: /}}",
                       "parentRefs: [{name: gw, namespace: infra}]", backend=by_label),
             child("team1", "svc1", "{path: {type: PathPrefix, value: /anything}}", filters=header % "svc1",
                   meta=f", annotations: {{kgateway.dev/route-weight: '1'}}, {label}"),
             child("team2", "svc2", "{path: {type: Exact, value: /anything/team2}}", TO_ROOT,
                   filters=header % "svc2", meta=f", {label}"))
    lg.wait_pod(addr, "team1", "/anything/team2")
    resp: Any = lg.get(addr, "/anything/team2")
    assert resp.headers.get("origin") == "svc1"


def transform(ns: str, name: str, route: str, value: str, verb: str = "set") -> str:
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: {name}, namespace: {ns}}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: {route}}}]
  transformation:
    response:
      {verb}: [{{name: origin, value: {value}}}]
"""


def test_policy_merging_follows_the_parents_priority(stack: tuple[Lychgate, str]) -> None:
    """kgateway's policy_merging scenario: parent1 (DeepMergePreferChild) lets the children's
    transformations win, parent2 (DeepMergePreferParent) keeps its own; a Gateway API timeout on
    parent2's delegating rule reaches the child, which sets none (Envoy says so in a header)."""
    lg, addr = stack
    p1 = parent("parent1", [("/anything/team1", "team1"), ("/anything/team2", "team2")], "parent1.com").replace(
        "namespace: infra}", "namespace: infra, annotations: {kgateway.dev/inherited-policy-priority: "
        "DeepMergePreferChild}}", 1)
    p2 = parent("parent2", [("/anything/team1", "team1"), ("/anything/team2", "team2")], "parent2.com").replace(
        "namespace: infra}", "namespace: infra, annotations: {kgateway.dev/inherited-policy-priority: "
        "DeepMergePreferParent}}", 1).replace("namespace: team1}]", "namespace: team1}]\n      timeouts: {request: 7s}")
    scenario(lg, p1, p2,
             child("team1", "svc1", "{path: {type: PathPrefix, value: /anything/team1/foo}}"),
             child("team2", "svc2", "{path: {type: Exact, value: /anything/team2/foo}}"),
             transform("infra", "parent1-transform", "parent1", "parent1"),
             transform("infra", "parent2-transform", "parent2", "parent2"),
             transform("team1", "svc1-transform", "svc1", "svc1"),
             transform("team2", "svc2-transform", "svc2", "svc2", verb="add"))

    def origin(host: str, path: str) -> str | None:
        resp = lg.get(addr, path, host=host)
        return resp.headers.get("origin") if resp.status_code == 200 else f"status {resp.status_code}"

    wait_for(lambda: origin("parent2.com", "/anything/team2/foo") == "parent2", 20, "parent2's transformation")
    assert origin("parent1.com", "/anything/team1/foo") == "svc1"
    assert origin("parent1.com", "/anything/team2/foo") == "svc2"
    assert origin("parent2.com", "/anything/team1/foo") == "parent2"
    seen = lg.get(addr, "/anything/team1/foo", host="parent2.com").json()["headers"]
    assert seen.get("X-Envoy-Expected-Rq-Timeout-Ms") == ["7000"]


def test_invalid_child_serves_standalone_and_unresolved_child_is_reported(stack: tuple[Lychgate, str]) -> None:
    """kgateway's invalid_child_valid_standalone and unresolved_child scenarios."""
    lg, addr = stack
    both_parents = ("parentRefs: [{name: gw, namespace: infra}, {group: gateway.networking.k8s.io, "
                    "kind: HTTPRoute, name: root, namespace: infra}]\n  hostnames: [team2.com]")
    scenario(lg, parent("root", [("/anything/team1", "team1"), ("/anything/team2", "team2")], "parent.com"),
             child("team1", "svc1", "{path: {type: PathPrefix, value: /anything/team1/foo}}"),
             child("team2", "svc2", "{path: {type: PathPrefix, value: /anything/team2/foo}}", both_parents))
    # The stack's routes served every host ("*"): wait for the parent's own hostname first.
    lg.wait_pod(addr, 500, "/anything/team2/foo", host="parent.com")
    assert lg.pod(addr, "/anything/team2/foo", host="team2.com") == "team2"
    assert lg.pod(addr, "/anything/team1/foo", host="parent.com") == "team1"
    wait_for(lambda: "spec.hostnames must be unset" in accepted_messages(lg, "team2", "svc2"), 10, "child status")

    scenario(lg, parent("root", [("/anything/team1", "nobody")]))
    lg.wait_pod(addr, 500, "/anything/team1/foo")
    wait_for(lambda: any(c.get("reason") == "BackendNotFound"
                         for p in lg.status("HTTPRoute", "root", "infra").get("parents", [])
                         for c in p["conditions"]), 10, "BackendNotFound on the parent")
