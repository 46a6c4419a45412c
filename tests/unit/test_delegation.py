"""Route delegation (translate/delegation.py): which child rules a parent serves,
what answers 500, and the status of parents and children."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.registry import parse
from lychgate.controlplane import builtin_class
from lychgate.store import Store
from lychgate.translate.aggregate import Aggregate
from lychgate.translate.gateway import Translation, translate

V1 = "gateway.networking.k8s.io/v1"
GROUP = "gateway.networking.k8s.io"


def gateway() -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "Gateway", "metadata": {"name": "gw", "namespace": "infra"},
            "spec": {"gatewayClassName": "lychgate", "listeners": [
                {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}]}}


def service(ns: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}


def match(path: str, kind: str = "PathPrefix", headers: dict[str, str] | None = None,
          query: dict[str, str] | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"path": {"type": kind, "value": path}}
    if headers:
        m["headers"] = [{"name": k, "value": v} for k, v in headers.items()]
    if query:
        m["queryParams"] = [{"name": k, "value": v} for k, v in query.items()]
    return m


def delegate(ns: str, name: str = "*") -> dict[str, Any]:
    return {"group": GROUP, "kind": "HTTPRoute", "name": name, "namespace": ns}


def httproute(ns: str, name: str, rules: list[dict[str, Any]], parents: list[dict[str, Any]] | None = None,
              hostnames: list[str] | None = None, annotations: dict[str, str] | None = None,
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"rules": rules}
    if parents is not None:
        spec["parentRefs"] = parents
    if hostnames:
        spec["hostnames"] = hostnames
    return {"apiVersion": V1, "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}, "labels": labels or {}},
            "spec": spec}


ROOT_PARENT = [{"name": "gw", "namespace": "infra"}]


def to_root(name: str = "root") -> list[dict[str, Any]]:
    return [{"group": GROUP, "kind": "HTTPRoute", "name": name, "namespace": "infra"}]


def root(*prefixes: tuple[str, str], name: str = "root", hostnames: list[str] | None = None) -> dict[str, Any]:
    return httproute("infra", name, [{"matches": [match(p)], "backendRefs": [delegate(ns)]} for p, ns in prefixes],
                     ROOT_PARENT, hostnames)


def forward(ns: str, name: str, *matches: dict[str, Any], svc: str = "svc") -> dict[str, Any]:
    return {"matches": list(matches), "backendRefs": [{"name": svc, "namespace": ns, "port": 80}]}


class Passes:
    """A store with the Gateway, Services svc in team1 and team2, and `docs`, translated
    pass after pass with the state translation keeps (incremental passes)."""

    def __init__(self, *docs: dict[str, Any]) -> None:
        self.store = Store()
        self.state = Aggregate()
        self.store.upsert(builtin_class())
        self.apply(gateway(), service("team1", "svc"), service("team2", "svc"), *docs)

    def apply(self, *docs: dict[str, Any]) -> Passes:
        for d in docs:
            self.store.upsert(parse(d))
        return self

    def translate(self) -> Translation:
        return translate(self.store, lambda _gw: "127.0.0.1", state=self.state)


def run(*docs: dict[str, Any]) -> tuple[Translation, Store]:
    passes = Passes(*docs)
    return passes.translate(), passes.store


def routes(t: Translation, host: str = "*") -> list[ir.Route]:
    """The routes of one virtual host, in the order Envoy tries them."""
    gw = t.gateways["infra/gw"]
    return [r for listener in gw.listeners for vh in listener.virtual_hosts if host in vh.domains for r in vh.routes]


def served(t: Translation, host: str = "*") -> list[tuple[str, str, str]]:
    """(path type, path, what): 'ns/name' of the route whose rule forwards, or the status code."""
    out: list[tuple[str, str, str]] = []
    for r in routes(t, host):
        what = (f"{r.source.namespace}/{r.source.name}" if isinstance(r.action, ir.Forward)
                else str(getattr(r.action, "status", "?")))
        out.append((r.match.path_type, r.match.path, what))
    return out


def parents(t: Translation, ns: str, name: str) -> list[dict[str, Any]]:
    return list(t.status.get(ObjectKey("HTTPRoute", ns, name), {}).get("parents", []))


def cond(entry: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in entry["conditions"] if c["type"] == type_)


def test_children_by_namespace_serve_under_the_parent() -> None:
    t, _ = run(root(("/anything/team1", "team1"), ("/anything/team2", "team2")),
               httproute("team1", "svc1", [forward("team1", "svc1", match("/anything/team1/foo"))]),
               httproute("team2", "svc2", [forward("team2", "svc2", match("/anything/team2/foo", "Exact"))],
                         to_root()))
    assert served(t) == [("Exact", "/anything/team2/foo", "team2/svc2"),
                         ("PathPrefix", "/anything/team1/foo", "team1/svc1")]
    root_status = parents(t, "infra", "root")[0]
    assert cond(root_status, "ResolvedRefs")["status"] == "True"
    (child,) = parents(t, "team2", "svc2")
    assert child["parentRef"] == {"group": GROUP, "kind": "HTTPRoute", "namespace": "infra", "name": "root"}
    assert cond(child, "Accepted")["status"] == "True"
    assert "delegated from HTTPRoute infra/root" in cond(child, "Accepted")["message"]


def test_child_matches_outside_the_parent_are_refused() -> None:
    parent = httproute("infra", "root", [{"matches": [match("/a", headers={"h": "1"}, query={"q": "1"})],
                                          "backendRefs": [delegate("team1")]}], ROOT_PARENT)
    t, _ = run(parent, httproute("team1", "ok", [forward("team1", "ok", match("/a/x", headers={"h": "1", "x": "y"},
                                                                               query={"q": "1"}))]),
               httproute("team1", "nohdr", [forward("team1", "nohdr", match("/a/y"))]),
               httproute("team1", "other", [forward("team1", "other", match("/b", headers={"h": "1"},
                                                                             query={"q": "1"}))]))
    assert [w for *_, w in served(t)] == ["team1/ok"]
    for name in ("nohdr", "other"):
        (entry,) = parents(t, "team1", name)
        assert cond(entry, "Accepted")["status"] == "False"
        assert cond(entry, "Accepted")["reason"] == "NoMatchingParent"


def test_parent_rule_without_children_answers_500_and_says_backend_not_found() -> None:
    t, _ = run(root(("/anything/team1", "team1")))
    assert served(t) == [("PathPrefix", "/anything/team1", "500")]
    resolved = cond(parents(t, "infra", "root")[0], "ResolvedRefs")
    assert (resolved["status"], resolved["reason"]) == ("False", "BackendNotFound")


def test_child_with_hostnames_is_refused_siblings_still_served() -> None:
    t, _ = run(root(("/anything/team1", "team1"), ("/anything/team2", "team2")),
               httproute("team1", "svc1", [forward("team1", "svc1", match("/anything/team1/foo"))]),
               httproute("team2", "svc2", [forward("team2", "svc2", match("/anything/team2/foo", "Exact"))],
                         hostnames=["team2.com"]))
    assert ("PathPrefix", "/anything/team1/foo", "team1/svc1") in served(t)
    assert ("PathPrefix", "/anything/team2", "500") in served(t)
    (entry,) = parents(t, "team2", "svc2")
    assert "spec.hostnames must be unset" in cond(entry, "Accepted")["message"]


def test_cycle_is_reported_and_not_followed() -> None:
    mid = httproute("team2-root", "mid", [{"matches": [match("/anything/team2/")],
                                           "backendRefs": [delegate("team2")]}], to_root())
    loop = httproute("team2", "svc2", [{"matches": [match("/anything/team2/foo")], "backendRefs": [delegate("team2")]}])
    t, _ = run(root(("/anything/team1", "team1"), ("/anything/team2", "team2-root")), mid, loop,
               httproute("team1", "svc1", [forward("team1", "svc1", match("/anything/team1/foo"))]))
    assert ("PathPrefix", "/anything/team2/foo", "500") in served(t)
    assert ("PathPrefix", "/anything/team1/foo", "team1/svc1") in served(t)
    messages = [c["message"] for e in parents(t, "team2", "svc2") for c in e["conditions"]]
    assert any("cyclic reference detected" in m for m in messages)


def test_recursive_delegation() -> None:
    mid = httproute("team2-root", "mid", [{"matches": [match("/anything/team2/")],
                                           "backendRefs": [delegate("team2")]}], to_root())
    leaf = httproute("team2", "svc2", [forward("team2", "svc2", match("/anything/team2/.*", "RegularExpression"))])
    t, _ = run(root(("/anything/team2", "team2-root")), mid, leaf)
    assert served(t) == [("RegularExpression", "/anything/team2/.*", "team2/svc2")]
    assert cond(parents(t, "team2", "svc2")[0], "Accepted")["status"] == "True"
    assert parents(t, "team2", "svc2")[0]["parentRef"]["name"] == "mid"


def test_child_naming_one_parent_is_only_under_that_parent() -> None:
    t, _ = run(root(("/anything/team2", "team2"), name="p1", hostnames=["p1.com"]),
               root(("/anything/team2", "team2"), name="p2", hostnames=["p2.com"]),
               httproute("team2", "svc2", [forward("team2", "svc2", match("/anything/team2/foo", "Exact"))],
                         to_root("p1")))
    assert served(t, "p1.com") == [("Exact", "/anything/team2/foo", "team2/svc2")]
    assert served(t, "p2.com") == [("PathPrefix", "/anything/team2", "500")]


def test_inherit_parent_matcher_joins_paths() -> None:
    child = httproute("team1", "svc1", [forward("team1", "svc1", match("/child"))],
                      annotations={"delegation.kgateway.dev/inherit-parent-matcher": "true"})
    t, _ = run(root(("/anything/foo", "team1"), name="p1"), root(("/anything/baz", "team1"), name="p2"), child)
    assert sorted(served(t)) == [("PathPrefix", "/anything/baz/child", "team1/svc1"),
                                 ("PathPrefix", "/anything/foo/child", "team1/svc1")]


def test_route_weight_orders_children_before_precedence() -> None:
    parent = httproute("infra", "root", [{"matches": [match("/")], "backendRefs": [
        {"group": "delegation.kgateway.dev", "kind": "label", "name": "child", "namespace": "all"}]}], ROOT_PARENT)
    label = {"delegation.kgateway.dev/label": "child"}
    t, _ = run(parent,
               httproute("team1", "svc1", [forward("team1", "svc1", match("/anything"))], labels=label,
                         annotations={"kgateway.dev/route-weight": "1"}),
               httproute("team2", "svc2", [forward("team2", "svc2", match("/anything/team2", "Exact"))], to_root(),
                         labels=label),
               httproute("team2", "unlabelled", [forward("team2", "svc", match("/x"))]))
    assert served(t) == [("PathPrefix", "/anything", "team1/svc1"), ("Exact", "/anything/team2", "team2/svc2")]


def test_changing_a_child_retranslates_the_parent() -> None:
    passes = Passes(root(("/a", "team1")), httproute("team1", "c", [forward("team1", "c", match("/a/one"))]))
    assert [p for _, p, _ in served(passes.translate())] == ["/a/one"]
    passes.apply(httproute("team1", "c", [forward("team1", "c", match("/a/two"))]))
    assert [p for _, p, _ in served(passes.translate())] == ["/a/two"]
    passes.apply(httproute("team1", "d", [forward("team1", "d", match("/a/three"))]))
    assert sorted(p for _, p, _ in served(passes.translate())) == ["/a/three", "/a/two"]


def timeout_policy(ns: str, route_name: str, timeout: str) -> dict[str, Any]:
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
            "metadata": {"name": f"{route_name}-timeout", "namespace": ns},
            "spec": {"targetRefs": [{"group": GROUP, "kind": "HTTPRoute", "name": route_name}],
                     "timeouts": {"request": timeout}}}


def test_child_policies_come_before_the_parents() -> None:
    docs = (root(("/a", "team1")),
            httproute("team1", "own", [forward("team1", "own", match("/a/own"))]),
            httproute("team1", "bare", [forward("team1", "bare", match("/a/bare"))]),
            timeout_policy("infra", "root", "5s"))
    passes = Passes(*docs)

    def timeouts() -> dict[str, int | None]:
        return {r.match.path: r.policy.timeout_ms if r.policy else None for r in routes(passes.translate())}

    assert timeouts() == {"/a/own": 5000, "/a/bare": 5000}
    # A policy on a child only (no Gateway parent of its own) reaches its parent's virtual host.
    passes.apply(timeout_policy("team1", "own", "2s"))
    assert timeouts() == {"/a/own": 2000, "/a/bare": 5000}


def header_policy(ns: str, name: str, target: dict[str, Any] | None, value: str) -> dict[str, Any]:
    """A TrafficPolicy whose transformation sets response header `origin`."""
    spec: dict[str, Any] = {"transformation": {"response": {"set": [{"name": "origin", "value": value}]}}}
    if target is not None:
        spec["targetRefs"] = [target]
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def route_ref(name: str, section: str | None = None) -> dict[str, Any]:
    ref = {"group": GROUP, "kind": "HTTPRoute", "name": name}
    if section:
        ref["sectionName"] = section
    return ref


def _leaves(node: Any) -> Iterator[Any]:
    if isinstance(node, tuple):
        for item in node:
            yield from _leaves(item)
    else:
        yield node


def origins(t: Translation, host: str) -> dict[str, str | None]:
    """path -> the text the route's transformation sets response header `origin` to."""
    out: dict[str, str | None] = {}
    for r in routes(t, host):
        response = r.policy.transformation.response if r.policy and r.policy.transformation else None
        sets = dict(response.set) if response else {}
        # A literal template is ("t", text) nodes (translate/policies/templates.py).
        out[r.match.path] = "".join(_leaves(sets["origin"])).removeprefix("t") if "origin" in sets else None
    return out


def test_inherited_policy_priority_decides_who_wins() -> None:
    """kgateway's policy_merging scenario: parent1 lets children override (DeepMergePreferChild),
    parent2 does not (DeepMergePreferParent); the older annotation name and values count too."""
    def parent(name: str, priority: str, annotation: str = "kgateway.dev/inherited-policy-priority"
               ) -> dict[str, Any]:
        doc = root(("/anything/team1", "team1"), ("/anything/team2", "team2"), name=name,
                   hostnames=[f"{name}.com"])
        doc["metadata"]["annotations"] = {annotation: priority}
        return doc

    t, _ = run(parent("parent1", "DeepMergePreferChild"), parent("parent2", "DeepMergePreferParent"),
               parent("parent3", "PreferParent", "delegation.kgateway.dev/inherited-policy-priority"),
               httproute("team1", "svc1", [forward("team1", "svc1", match("/anything/team1/foo"))]),
               httproute("team2", "svc2", [forward("team2", "svc2", match("/anything/team2/foo", "Exact"))]),
               header_policy("infra", "p1", route_ref("parent1"), "parent1"),
               header_policy("infra", "p2", route_ref("parent2"), "parent2"),
               header_policy("infra", "p3", route_ref("parent3"), "parent2"),
               header_policy("team1", "c1", route_ref("svc1"), "svc1"),
               header_policy("team2", "c2", route_ref("svc2"), "svc2"))
    assert origins(t, "parent1.com") == {"/anything/team1/foo": "svc1", "/anything/team2/foo": "svc2"}
    assert origins(t, "parent2.com") == {"/anything/team1/foo": "parent2", "/anything/team2/foo": "parent2"}
    assert origins(t, "parent3.com") == {"/anything/team1/foo": "parent2", "/anything/team2/foo": "parent2"}


def test_parent_fields_fill_what_the_child_leaves_unset() -> None:
    """Shallow merge, child preferred (the default): a child's transformation wins, and the
    parent's timeout still reaches the child that sets none."""
    t, _ = run(root(("/a", "team1")),
               httproute("team1", "c", [forward("team1", "c", match("/a/c"))]),
               header_policy("team1", "c-header", route_ref("c"), "svc1"),
               header_policy("infra", "root-header", route_ref("root"), "root"),
               timeout_policy("infra", "root", "7s"))
    [r] = routes(t)
    assert r.policy is not None and r.policy.timeout_ms == 7000
    assert origins(t, "*") == {"/a/c": "svc1"}


def test_policies_of_every_delegating_parent_reach_a_grandchild() -> None:
    """root -> mid -> leaf: the leaf gets mid's policy over root's, and root's where mid sets nothing."""
    mid = httproute("team1", "mid", [{"matches": [match("/a/b")], "backendRefs": [delegate("team2")]}])
    t, _ = run(root(("/a", "team1")), mid,
               httproute("team2", "leaf", [forward("team2", "leaf", match("/a/b/c"))]),
               header_policy("team1", "mid-header", route_ref("mid"), "mid"),
               header_policy("infra", "root-header", route_ref("root"), "root"),
               timeout_policy("infra", "root", "3s"))
    [r] = routes(t)
    assert origins(t, "*") == {"/a/b/c": "mid"}
    assert r.policy is not None and r.policy.timeout_ms == 3000


def test_policy_on_the_delegating_rule_reaches_its_children_only() -> None:
    """A TrafficPolicy named in an ExtensionRef filter of the parent's delegating rule, and one
    targeting that rule by name, apply to the children under that rule, not to the other rule's."""
    parent = root(("/a", "team1"), ("/b", "team2"))
    parent["spec"]["rules"][0]["filters"] = [{"type": "ExtensionRef", "extensionRef": {
        "group": "gateway.lychgate.dev", "kind": "TrafficPolicy", "name": "by-filter"}}]
    parent["spec"]["rules"][1]["name"] = "second"
    by_filter = header_policy("infra", "by-filter", None, "parent1")
    t, _ = run(parent, by_filter, header_policy("infra", "by-name", route_ref("root", "second"), "parent2"),
               httproute("team1", "c1", [forward("team1", "c1", match("/a/x"))]),
               httproute("team2", "c2", [forward("team2", "c2", match("/b/x"))]))
    assert origins(t, "*") == {"/a/x": "parent1", "/b/x": "parent2"}


def test_delegating_rule_filters_and_timeouts_are_inherited() -> None:
    """Gateway API fields of the parent's rule reach the child rules that do not set the same:
    a request header modifier and the request timeout (kgateway's native-policy inheritance)."""
    parent = root(("/a", "team1"))
    parent["spec"]["rules"][0]["filters"] = [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
        "set": [{"name": "x-from", "value": "parent"}]}}]
    parent["spec"]["rules"][0]["timeouts"] = {"request": "10s"}
    own = forward("team1", "own", match("/a/own"))
    own["timeouts"] = {"request": "30s"}
    own["filters"] = [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
        "set": [{"name": "x-from", "value": "child"}]}}]
    t, _ = run(parent, httproute("team1", "own", [own]),
               httproute("team1", "bare", [forward("team1", "bare", match("/a/bare"))]))
    by_path = {r.match.path: r for r in routes(t)}
    bare, mine = by_path["/a/bare"], by_path["/a/own"]
    assert list(bare.request_headers.set) == [("x-from", "parent")]
    assert list(mine.request_headers.set) == [("x-from", "child")]
    assert isinstance(bare.action, ir.Forward) and isinstance(mine.action, ir.Forward)
    assert (bare.action.timeout_ms, mine.action.timeout_ms) == (10000, 30000)


def test_filters_a_delegating_rule_cannot_pass_down_are_refused() -> None:
    parent = root(("/a", "team1"))
    parent["spec"]["rules"][0]["filters"] = [{"type": "URLRewrite", "urlRewrite": {
        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}]
    t, _ = run(parent, httproute("team1", "c", [forward("team1", "c", match("/a/c"))]))
    assert served(t) == [("PathPrefix", "/a", "500")]
    [entry] = parents(t, "infra", "root")
    assert "ReplacePrefixMatch on a rule that delegates" in cond(entry, "Accepted")["message"]


def test_unknown_priority_value_is_said_in_the_parent_status() -> None:
    parent = root(("/a", "team1"))
    parent["metadata"]["annotations"] = {"kgateway.dev/inherited-policy-priority": "ChildFirst"}
    t, _ = run(parent, httproute("team1", "c", [forward("team1", "c", match("/a/c"))]))
    [entry] = parents(t, "infra", "root")
    assert "'ChildFirst' is not one of" in cond(entry, "Accepted")["message"]


def test_child_with_hostnames_serves_standalone_but_not_under_the_parent() -> None:
    """kgateway's invalid_child_valid_standalone: a route with hostnames and two parents (the
    Gateway and the delegating route) serves its own hostname; under the parent it is refused."""
    child = httproute("team2", "svc2", [forward("team2", "svc2", match("/anything/team2/foo"))],
                      [{"name": "gw", "namespace": "infra"}, *to_root()], hostnames=["team2.com"])
    t, _ = run(root(("/anything/team1", "team1"), ("/anything/team2", "team2"), hostnames=["parent.com"]),
               httproute("team1", "svc1", [forward("team1", "svc1", match("/anything/team1/foo"))]), child)
    assert served(t, "team2.com") == [("PathPrefix", "/anything/team2/foo", "team2/svc2")]
    assert ("PathPrefix", "/anything/team2", "500") in served(t, "parent.com")
    by_kind = {p["parentRef"].get("kind", "Gateway"): p for p in parents(t, "team2", "svc2")}
    assert cond(by_kind["Gateway"], "Accepted")["status"] == "True"
    assert "spec.hostnames must be unset" in cond(by_kind["HTTPRoute"], "Accepted")["message"]


def test_a_child_change_recompiles_that_child_only() -> None:
    """Incremental: with many children under one parent, editing one re-compiles its rules;
    the others' routes are the very objects of the last pass (delegation_cache.py)."""
    kids = [httproute("team1", f"c{i}", [forward("team1", f"c{i}", match(f"/a/{i}"))]) for i in range(20)]
    passes = Passes(root(("/a", "team1")), *kids)
    before = {r.match.path: r for r in routes(passes.translate())}
    passes.apply(httproute("team1", "c7", [forward("team1", "c7", match("/a/seven"))]))
    after = {r.match.path: r for r in routes(passes.translate())}
    assert "/a/seven" in after and "/a/7" not in after
    assert all(after[p] is before[p] for p in after if p != "/a/seven")
    # A Service a child uses changes: that child's routes are compiled again.
    passes.apply({**service("team1", "svc"), "spec": {"ports": [{"port": 80, "targetPort": 9090}]}})
    again = {r.match.path: r for r in routes(passes.translate())}
    assert all(again[p] is not after[p] for p in again)


def test_deep_merge_priority_runs_the_ext_proc_of_parent_and_child() -> None:
    """DeepMerge...: the parent's and the child's extProc extensions both run (the preferred
    side's first); ShallowMergePreferChild: the child's only."""
    def extension(ns: str) -> list[dict[str, Any]]:
        return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "proc", "namespace": ns},
                 "spec": {"ports": [{"port": 9000}]}},
                {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "GatewayExtension",
                 "metadata": {"name": "proc", "namespace": ns},
                 "spec": {"extProc": {"grpcService": {"backendRef": {"name": "proc", "port": 9000}}}}}]

    def uses(ns: str, target: str) -> dict[str, Any]:
        return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
                "metadata": {"name": f"{target}-proc", "namespace": ns},
                "spec": {"targetRefs": [route_ref(target)], "extProc": {"extensionRef": {"name": "proc"}}}}

    def ext_procs(priority: str) -> list[str]:
        parent = root(("/a", "team1"))
        parent["metadata"]["annotations"] = {"kgateway.dev/inherited-policy-priority": priority}
        t, _ = run(parent, httproute("team1", "c", [forward("team1", "c", match("/a/c"))]),
                   *extension("infra"), *extension("team1"), uses("infra", "root"), uses("team1", "c"))
        [r] = routes(t)
        return [p.service.name for p in r.policy.ext_proc] if r.policy else []

    assert ext_procs("DeepMergePreferChild") == ["team1/proc", "infra/proc"]
    assert ext_procs("DeepMergePreferParent") == ["infra/proc", "team1/proc"]
    assert ext_procs("ShallowMergePreferChild") == ["team1/proc"]
    assert ext_procs("ShallowMergePreferParent") == ["infra/proc"]


def test_child_status_drops_a_parent_that_no_longer_delegates_to_it() -> None:
    passes = Passes(root(("/a", "team1")), httproute("team1", "c", [forward("team1", "c", match("/a/c"))]))
    assert [p["parentRef"]["name"] for p in parents(passes.translate(), "team1", "c")] == ["root"]
    passes.apply(root(("/a", "team2")))  # the rule now hands /a to another team
    assert parents(passes.translate(), "team1", "c") == []
