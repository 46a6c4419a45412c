"""Routes alike share what they keep: one status object for equal statuses, one Cluster
for the same Service; routes whose statuses differ in any value (or only in its type)
keep their own."""

from __future__ import annotations

from typing import Any

import pytest

from lychgate.api.registry import parse
from lychgate.controlplane import builtin_class
from lychgate.store import Store
from lychgate.translate.aggregate import Aggregate
from lychgate.translate.gateway import translate
from lychgate.translate.status_pool import StatusPool, frozen

GATEWAY = {
    "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "gw", "namespace": "apps"},
    "spec": {"gatewayClassName": "lychgate", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]},
}


def route(name: str, backend: str) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "apps"},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": backend, "port": 80}]}]}}


def test_routes_attached_alike_share_their_status() -> None:
    store = Store()
    store.upsert(builtin_class())
    store.upsert(parse(GATEWAY))
    for name, backend in (("a", "missing"), ("b", "missing"), ("c", "other")):
        store.upsert(parse(route(name, backend)))
    out = translate(store, lambda gw: "127.0.0.1", state=Aggregate())
    a, b, c = (out.status[parse(route(n, "x")).key] for n in "abc")
    assert a == b and a is b  # equal: one object
    assert a != c and a is not c  # "Service apps/other not found" differs
    assert "apps/missing" in a["parents"][0]["conditions"][1]["message"]


def test_values_equal_across_types_are_not_shared() -> None:
    pool = StatusPool()
    one = {"parents": [{"port": 1}]}
    assert pool.shared(one) is one
    assert pool.shared({"parents": [{"port": True}]}) is not one
    assert pool.shared({"parents": [{"port": 1}]}) is one
    assert pool.shared({"parents": [["port", 1]]}) is not one


SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "apps"},
           "spec": {"ports": [{"port": 80}]}}


def test_routes_resolving_one_service_share_its_cluster_until_it_changes() -> None:
    store = Store()
    store.upsert(builtin_class())
    store.upsert(parse(GATEWAY))
    store.upsert(parse(SERVICE))
    for name in "ab":
        store.upsert(parse(route(name, "svc")))
    state = Aggregate()
    translate(store, lambda gw: "127.0.0.1", state=state)
    (ca,), (cb,) = (state.routes[parse(route(n, "svc")).key][1].clusters for n in "ab")
    assert ca is cb
    store.upsert(parse({**SERVICE, "spec": {"ports": [{"port": 80, "appProtocol": "kubernetes.io/h2c"}]}}))
    out = translate(store, lambda gw: "127.0.0.1", state=state)
    (na,), (nb,) = (state.routes[parse(route(n, "svc")).key][1].clusters for n in "ab")
    assert na is nb and na != ca and na.protocol == "h2c"
    assert out.gateways["apps/gw"].clusters == (na,)


def test_a_pool_shares_equal_values_and_keeps_only_those_still_held(monkeypatch: pytest.MonkeyPatch) -> None:
    """Equal values are one object; once the pool has doubled, it lets go of the values no one
    else holds (under churn, every value a pass made had stayed until 4,096 were kept), and
    keeps sharing the ones still held: values that are their own keys, and values kept under
    a key of their own (a status dict, under its frozen form)."""
    from lychgate import interned

    monkeypatch.setattr(interned, "FLOOR", 4)
    pool: interned.Interned[tuple[str, ...]] = interned.Interned()
    held = pool(tuple(["a", "b"]))  # (not a constant: the code would hold it too)
    assert pool(tuple(["a", "b"])) is held  # an equal value: the one handed out before
    for n in range(50):
        pool((f"gone-{n}",))  # no one holds these
    assert len(pool) <= 8 and pool(tuple(["a", "b"])) is held
    statuses: interned.Interned[dict[str, Any]] = interned.Interned()
    status = {"parents": [{"port": 1}]}  # (a new dict each call: only `status` holds it)
    assert statuses(status, frozen(status)) is status
    for n in range(50):
        statuses({"n": n}, frozen({"n": n}))
    assert len(statuses) <= 8 and statuses({"parents": [{"port": 1}]}, frozen(status)) is status
    # Values made from their key (what a policy says of routes alike): made once while held.
    conditions: interned.Interned[dict[str, Any]] = interned.Interned()
    made: list[int] = []

    def condition(n: int) -> dict[str, Any]:
        made.append(n)
        return {"message": f"TrafficPolicy apps/p-{n}: applied"}

    said = conditions.made(("p", 0), lambda: condition(0))
    assert conditions.made(("p", 0), lambda: condition(0)) is said and made == [0]
    for n in range(1, 50):
        conditions.made(("p", n), lambda n=n: condition(n))  # each edit of a policy: a new text
    assert len(conditions) <= 8 and conditions.made(("p", 0), lambda: condition(0)) is said
    assert made.count(0) == 1


def test_statuses_with_a_policy_condition_stay_shared_while_held_and_go_after() -> None:
    """A route's status with a TrafficPolicy's condition is one object for the routes alike; the
    table of them keeps those some route still holds and lets go of the rest."""
    from lychgate.translate.policies.outcomes import StatusWriter

    writer = StatusWriter()
    cond = {"type": "gateway.lychgate.dev/TrafficPolicyAffected", "status": "True"}
    bases = [{"parents": [{"parentRef": {"name": f"gw-{n}"}, "conditions": []}]} for n in range(40)]
    held = [writer._with(base, cond) for base in bases[:5]]  # (routes hold these)
    for base in bases[5:]:
        writer._with(base, cond)
    assert writer._with(bases[0], cond) is held[0]
    writer._prune_with_condition()
    assert len(writer._with_condition) == 5
    assert all(writer._with(base, cond) is mine for base, mine in zip(bases, held, strict=False))
    assert held[0]["parents"][0]["conditions"] == [cond]
