"""Incremental translation with policies must equal translation from scratch.

TrafficPolicies reach routes through their targets, not through what routes
read: a policy change re-resolves only the route rules under the targets it
changed, and policy status is counted per route rule (translate/policies/
ledger.py). After every step a user could take (attach, detach, retarget, a
selector's labels, an invalid policy and its fix, an extension appearing, a
policy merge turned on and off, routes coming and going under policies), the
xDS resources and every status of a translation that keeps its state must
equal those of a fresh translation. The scripted walk covers each kind of
step; the property test runs random walks over the same steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lychgate.api.base import ObjectKey
from lychgate.api.registry import parse
from lychgate.controlplane import builtin_class
from lychgate.status.store import StatusStore
from lychgate.store import Store
from lychgate.translate.aggregate import Aggregate
from lychgate.xds.translator.wire import WireCache
from tests.unit.test_incremental import snapshot

GATEWAY = {
    "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "gw", "namespace": "apps"},
    "spec": {"gatewayClassName": "lychgate", "allowedListeners": {"namespaces": {"from": "Same"}}, "listeners": [
        {"name": "http", "protocol": "HTTP", "port": 80},
        {"name": "alt", "protocol": "HTTP", "port": 8080, "hostname": "*.alt.example"},
    ]},
}
MERGE = {"trafficPolicy": {"extAuth": "DeepMerge", "transformation": "DeepMerge"}}


def route(name: str, hosts: list[str], paths: list[str], labels: dict[str, str] | None = None,
          section: str | None = None) -> dict[str, Any]:
    parent: dict[str, Any] = {"name": "gw"}
    if section:
        parent["sectionName"] = section
    return {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "apps", "labels": labels or {}},
        "spec": {"parentRefs": [parent], "hostnames": hosts, "rules": [
            {"name": f"r{i}", "matches": [{"path": {"type": "PathPrefix", "value": p}}],
             "backendRefs": [{"name": "svc", "port": 80}]} for i, p in enumerate(paths)]},
    }


def policy(name: str, spec: dict[str, Any], created: str = "2025-01-01T00:00:00Z") -> dict[str, Any]:
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
            "metadata": {"name": name, "namespace": "apps", "creationTimestamp": created}, "spec": spec}


def target(kind: str, name: str, section: str | None = None) -> dict[str, Any]:
    ref = {"group": "gateway.networking.k8s.io", "kind": kind, "name": name}
    if section:
        ref["sectionName"] = section
    return ref


def header(value: str) -> dict[str, Any]:
    return {"headerModifiers": {"request": {"set": [{"name": "x-policy", "value": value}]}}}


def ext_auth(context: str) -> dict[str, Any]:
    return {"extAuth": {"extensionRef": {"name": "auth"}, "contextExtensions": {"from": context}},
            "transformation": {"request": {"set": [{"name": f"x-{context}", "value": "1"}]}}}


EXTENSION = {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "GatewayExtension",
             "metadata": {"name": "auth", "namespace": "apps"},
             "spec": {"extAuth": {"grpcService": {"backendRef": {"name": "auth", "port": 9000}}}}}


def service(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "apps"},
            "spec": {"ports": [{"port": 80 if name == "svc" else 9000, "targetPort": 8080}]}}


def filtered_route(policy_name: str) -> dict[str, Any]:
    """Route f: its only rule names a TrafficPolicy in an ExtensionRef filter."""
    doc = route("f", ["f.example"], ["/"])
    doc["spec"]["rules"][0]["filters"] = [{"type": "ExtensionRef", "extensionRef": {
        "group": "gateway.lychgate.dev", "kind": "TrafficPolicy", "name": policy_name}}]
    return doc


LISTENER_SET = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
                "metadata": {"name": "team", "namespace": "apps"},
                "spec": {"parentRef": {"name": "gw"}, "listeners": [
                    {"name": "team", "protocol": "HTTP", "port": 80, "hostname": "team.example"}]}}


def set_route() -> dict[str, Any]:
    doc = route("s", ["team.example"], ["/"])
    doc["spec"]["parentRefs"] = [{"group": "gateway.networking.k8s.io", "kind": "ListenerSet", "name": "team"}]
    return doc


class World:
    """A store, and a translation that keeps its state between passes, as the control loop does."""

    def __init__(self) -> None:
        self.store = Store()
        self.state = Aggregate()
        self.wire, self.statuses = WireCache(), StatusStore()
        self.merge: dict[str, Any] | None = None
        self.address: str | None = "127.0.1.1"
        for doc in (GATEWAY, service("svc"), route("a", ["a.example"], ["/", "/x"], {"team": "blue"}),
                    route("b", ["b.example", "one.alt.example"], ["/"]), route("c", ["a.example"], ["/c"])):
            self.put(doc)
        self.store.upsert(builtin_class())

    def put(self, doc: dict[str, Any]) -> None:
        self.store.upsert(parse(doc))

    def drop(self, kind: str, name: str) -> None:
        self.store.delete(ObjectKey(kind, "apps", name))

    def check(self, step: str) -> None:
        kept = snapshot(self.store, self.state, self.wire, self.statuses, self.address, self.merge)
        fresh = snapshot(self.store, None, address=self.address, policy_merge=self.merge)
        assert kept[0] == fresh[0], f"after {step}: the xDS resources differ from a fresh translation"
        for key in fresh[1].keys() | kept[1].keys():
            assert kept[1].get(key) == fresh[1].get(key), f"after {step}: the status of {key} differs"


Step = Callable[[World], None]
STEPS: dict[str, Step] = {
    "a Gateway-wide policy": lambda w: w.put(policy("gw-wide", {"targetRefs": [target("Gateway", "gw")],
                                                               "timeouts": {"request": "30s"}}, "2020-01-01T00:00:00Z")),
    "the Gateway-wide policy edited": lambda w: w.put(policy("gw-wide", {"targetRefs": [target("Gateway", "gw")],
                                                                        "timeouts": {"request": "9s"}}, "2020-01-01T00:00:00Z")),
    "the Gateway-wide policy deleted": lambda w: w.drop("TrafficPolicy", "gw-wide"),
    "a listener policy": lambda w: w.put(policy("on-alt", {"targetRefs": [target("Gateway", "gw", "alt")],
                                                          **header("alt")})),
    "a route policy": lambda w: w.put(policy("on-a", {"targetRefs": [target("HTTPRoute", "a")], **header("a")})),
    "the route policy edited": lambda w: w.put(policy("on-a", {"targetRefs": [target("HTTPRoute", "a")],
                                                              **header("a2")})),
    "the route policy retargeted": lambda w: w.put(policy("on-a", {"targetRefs": [target("HTTPRoute", "b")],
                                                                  **header("a")})),
    "the route policy deleted": lambda w: w.drop("TrafficPolicy", "on-a"),
    "an older route policy on the same route": lambda w: w.put(policy(
        "older", {"targetRefs": [target("HTTPRoute", "a")], **header("older")}, "2019-01-01T00:00:00Z")),
    "a rule policy": lambda w: w.put(policy("on-rule", {"targetRefs": [target("HTTPRoute", "a", "r1")],
                                                       "timeouts": {"request": "5s"}})),
    "a policy on a missing rule": lambda w: w.put(policy("on-rule", {"targetRefs": [target("HTTPRoute", "a", "r9")],
                                                                    "timeouts": {"request": "5s"}})),
    "the rule policy deleted": lambda w: w.drop("TrafficPolicy", "on-rule"),
    "a policy on a route of no Gateway": lambda w: [
        w.put(route("e", ["e.example"], ["/"], section="nowhere")),
        w.put(policy("on-e", {"targetRefs": [target("HTTPRoute", "e")], **header("e")}))],
    "the policy on e deleted": lambda w: w.drop("TrafficPolicy", "on-e"),
    "the policy on e back": lambda w: w.put(policy("on-e", {"targetRefs": [target("HTTPRoute", "e")],
                                                           **header("e")})),
    "route e attached": lambda w: w.put(route("e", ["e.example"], ["/"])),
    "a selector policy": lambda w: w.put(policy("by-label", {
        "targetSelectors": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                             "matchLabels": {"team": "blue"}}], **header("blue")})),
    "route c labelled blue": lambda w: w.put(route("c", ["a.example"], ["/c"], {"team": "blue"})),
    "route a unlabelled": lambda w: w.put(route("a", ["a.example"], ["/", "/x"])),
    "an invalid policy on b": lambda w: w.put(policy("bad", {"targetRefs": [target("HTTPRoute", "b")],
                                                            "timeouts": {"request": "-3s"}})),
    "the invalid policy fixed": lambda w: w.put(policy("bad", {"targetRefs": [target("HTTPRoute", "b")],
                                                              "timeouts": {"request": "3s"}})),
    "ext auth without its extension": lambda w: w.put(policy("auth-old", {"targetRefs": [target("HTTPRoute", "c")],
                                                                         **ext_auth("old")}, "2021-01-01T00:00:00Z")),
    "a second ext auth policy": lambda w: w.put(policy("auth-new", {"targetRefs": [target("HTTPRoute", "c")],
                                                                   **ext_auth("new")}, "2022-01-01T00:00:00Z")),
    "the extension appears": lambda w: w.put(EXTENSION),
    "the extension's Service appears": lambda w: w.put(service("auth")),
    "the extension's Service goes": lambda w: w.drop("Service", "auth"),
    "the extension goes": lambda w: w.drop("GatewayExtension", "auth"),
    # Not a store change: no route table is built while the Gateway has no address.
    "the Gateway loses its address": lambda w: setattr(w, "address", None),
    "the Gateway's address is back": lambda w: setattr(w, "address", "127.0.1.1"),
    "deep merge on": lambda w: setattr(w, "merge", MERGE),
    "deep merge off": lambda w: setattr(w, "merge", None),
    "a new route under policies": lambda w: w.put(route("d", ["a.example", "two.alt.example"], ["/d"],
                                                        {"team": "blue"})),
    "route d moves to the alt listener": lambda w: w.put(route("d", ["two.alt.example"], ["/d"], section="alt")),
    "route d deleted": lambda w: w.drop("HTTPRoute", "d"),
    "route f names a policy in an ExtensionRef filter": lambda w: w.put(filtered_route("on-filter")),
    "the policy route f names appears": lambda w: w.put(policy("on-filter", {**header("filter")})),
    "the policy route f names edited": lambda w: w.put(policy("on-filter", {"timeouts": {"request": "2s"}})),
    "route f names another policy": lambda w: w.put(filtered_route("gw-wide")),
    "route f drops its filter": lambda w: w.put(route("f", ["f.example"], ["/"])),
    "the policy route f names deleted": lambda w: w.drop("TrafficPolicy", "on-filter"),
    "a ListenerSet with a route": lambda w: [w.put(LISTENER_SET), w.put(set_route())],
    "a policy on the ListenerSet": lambda w: w.put(policy("on-set", {
        "targetRefs": [{"group": "gateway.networking.x-k8s.io", "kind": "XListenerSet", "name": "team"}],
        **header("set")})),
    "the ListenerSet deleted": lambda w: w.drop("ListenerSet", "team"),
    "route b gets a second rule": lambda w: w.put(route("b", ["b.example", "one.alt.example"], ["/", "/more"])),
    "route b deleted": lambda w: w.drop("HTTPRoute", "b"),
    "route b back": lambda w: w.put(route("b", ["b.example", "one.alt.example"], ["/"])),
}


def test_every_policy_step_keeps_incremental_equal_to_fresh() -> None:
    world = World()
    world.check("the start")
    kept_passes = 0
    for name, step in STEPS.items():
        routes_before = dict(world.state.routes)
        step(world)
        world.check(name)
        # A policy step re-resolves route rules but does not recompile the routes it did not change.
        kept_passes += any(world.state.routes.get(k) is v for k, v in routes_before.items())
    # Everything but the merge switch (outside the store: a full pass) and a ListenerSet
    # coming or going (it changes the Gateway's listeners) kept the routes.
    assert kept_passes >= len(STEPS) - 4, kept_passes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=14))
def test_random_policy_walks_keep_incremental_equal_to_fresh(walk: list[str]) -> None:
    world = World()
    world.check("the start")
    for i, name in enumerate(walk):
        STEPS[name](world)
        world.check(f"step {i}: {name}")


def test_a_renamed_route_table_leaves_nothing_behind_in_the_wire_cache() -> None:
    """The first policy renames the listener's table (its chain gains the policy filters):
    what was serialized for the old table is dropped at once, not kept until a sweep."""
    world = World()
    world.check("the start")
    bare = {key for key in world.wire._sequences if isinstance(key, tuple)}
    entries = len(world.wire._entries)
    STEPS["a Gateway-wide policy"](world)
    world.check("a Gateway-wide policy")
    assert bare and not bare & world.wire._sequences.keys()
    assert len(world.wire._entries) <= entries
