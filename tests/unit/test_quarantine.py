"""A quarantined rule answers 500 until its input changes, and only its own rule does."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.registry import parse
from lychgate.controlplane import builtin_class
from lychgate.store import Store
from lychgate.translate.aggregate import Aggregate
from lychgate.translate.gateway import translate
from lychgate.translate.quarantine import Quarantine, rule_of
from tests.no_proxies import NoProxies

GATEWAY = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
           "metadata": {"name": "gw", "namespace": "default"},
           "spec": {"gatewayClassName": "lychgate", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "default"},
           "spec": {"ports": [{"port": 80}]}}
POLICY = {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
          "metadata": {"name": "p", "namespace": "default"},
          "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}],
                   "timeouts": {"request": "10s"}}}


def route(name: str, *paths: str) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [
                {"matches": [{"path": {"value": p}}], "backendRefs": [{"name": "svc", "port": 80}]} for p in paths]}}


class World:
    """A store, a translation that keeps its state, and a quarantine, as the control plane has them."""

    def __init__(self, *docs: dict[str, Any]) -> None:
        self.store, self.state, self.quarantine = Store(), Aggregate(), Quarantine()
        self.store.upsert(builtin_class())
        for doc in (GATEWAY, SERVICE, *docs):
            self.store.upsert(parse(doc))

    def answers(self) -> dict[str, int | str]:
        """Path -> 500 (replaced) or "forward", for every route on the Gateway."""
        t = translate(self.store, NoProxies().address_for, state=self.state, quarantine=self.quarantine)
        out: dict[str, int | str] = {}
        for listener in t.gateways["default/gw"].listeners:
            for vh in listener.virtual_hosts:
                for r in vh.routes:
                    out[r.match.path] = r.action.status if isinstance(r.action, ir.DirectResponse) else "forward"
        self.status = t.status
        return out

    def conditions(self, name: str) -> dict[str, dict[str, Any]]:
        return {c["type"]: c for c in self.status[ObjectKey("HTTPRoute", "default", name)]["parents"][0]["conditions"]}


def test_only_the_quarantined_rule_answers_500_until_it_is_edited() -> None:
    w = World(route("a", "/one", "/two"), route("b", "/other"))
    assert w.answers() == {"/one": "forward", "/two": "forward", "/other": "forward"}
    assert w.quarantine.add(w.store, "httproute/default/a/rule/1/match/0", "invalid perl operator: (?=", "default/gw", "nack")
    assert w.answers() == {"/one": "forward", "/two": 500, "/other": "forward"}
    conds = w.conditions("a")
    assert conds["Programmed"]["status"] == "False" and conds["Programmed"]["reason"] == "Rejected"
    assert "rule 1: quarantined" in conds["Programmed"]["message"] and "(?=" in conds["Programmed"]["message"]
    assert conds["PartiallyInvalid"]["status"] == "True" and conds["Accepted"]["status"] == "True"
    # Another route's change keeps it; the same rule quarantined again is no news.
    w.store.upsert(parse(route("b", "/other", "/more")))
    assert w.answers()["/two"] == 500
    assert not w.quarantine.add(w.store, "httproute/default/a/rule/1/match/0", "again", "default/gw", "nack")
    # An edit of a sibling rule keeps it too; an edit of the rule lifts it.
    w.store.upsert(parse(route("a", "/one-edited", "/two")))
    assert w.answers()["/two"] == 500
    w.store.upsert(parse(route("a", "/one-edited", "/two-fixed")))
    assert w.answers() == {"/one-edited": "forward", "/two-fixed": "forward", "/other": "forward", "/more": "forward"}
    assert "Programmed" not in w.conditions("a")
    assert list(w.quarantine.entries()) == []


def test_a_change_beside_routes_tries_the_rule_again() -> None:
    """A policy (or Service, Secret, Gateway) change may be what Envoy refused: the rule is retried."""
    w = World(route("a", "/one"))
    w.answers()
    w.quarantine.add(w.store, "httproute/default/a/rule/0/match/0", "refused", "default/gw", "preflight")
    assert w.answers() == {"/one": 500}
    w.store.upsert(parse(POLICY))
    assert w.answers() == {"/one": "forward"}
    w.quarantine.add(w.store, "httproute/default/a/rule/0/match/0", "refused", "default/gw", "preflight")
    edited = copy.deepcopy(POLICY)
    edited["spec"]["timeouts"]["request"] = "20s"
    w.store.upsert(parse(edited))
    assert w.answers() == {"/one": "forward"}


def test_a_deleted_route_leaves_no_quarantine_behind() -> None:
    w = World(route("a", "/one"))
    w.answers()
    w.quarantine.add(w.store, "httproute/default/a/rule/0/match/0", "refused", "default/gw", "nack")
    w.store.delete(ObjectKey("HTTPRoute", "default", "a"))
    assert w.answers() == {}
    assert list(w.quarantine.entries()) == []


def test_only_route_rules_are_quarantined() -> None:
    w = World(route("a", "/one"))
    assert rule_of("httproute/default/a/rule/0/match/0") == ("HTTPRoute", "default", "a", 0)
    assert rule_of("grpcroute/default/rpc/rule/2/match/0") == ("GRPCRoute", "default", "rpc", 2)
    for name in ("lychgate/not-found", "httproute/default/a/rule/x/match/0", "httproute/default/gone/rule/0/match/0",
                 "httproute/default/a/rule/5/match/0"):
        assert not w.quarantine.add(w.store, name, "refused", "default/gw", "nack"), name


def test_a_refused_cluster_quarantines_the_rules_that_route_to_it() -> None:
    """Envoy refuses clusters whole (CDS): the rules sending traffic there answer
    500 instead, and the rules of other backends keep forwarding."""
    from lychgate.xds import types
    from lychgate.xds.doctor import Doctor
    from lychgate.xds.translator import build
    from lychgate.xds.validate import Blocked

    other = {**SERVICE, "metadata": {"name": "other", "namespace": "default"}}
    two = route("a", "/one", "/two")
    two["spec"]["rules"][1]["backendRefs"] = [{"name": "other", "port": 80}]
    w = World(other, two)
    w.answers()
    t = translate(w.store, NoProxies().address_for, state=w.state, quarantine=w.quarantine)
    resources = build(t.gateways["default/gw"])
    [refused] = [name for name in resources.by_type[types.CLUSTER] if "_other_" in name]
    doctor = Doctor(w.store, w.quarantine, lambda: pytest.fail("no validation is needed to blame a cluster"))
    assert doctor.quarantine_blocked("default/gw", [Blocked(types.CLUSTER, refused, "bad cluster")], resources, "nack")
    assert w.answers() == {"/one": "forward", "/two": 500}
    assert "bad cluster" in w.conditions("a")["Programmed"]["message"]
