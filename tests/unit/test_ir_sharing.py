"""Equal IR parts that many routes hold are shared by value, and let go with their last holder."""

from __future__ import annotations

import gc

from lychgate import ir


def test_equal_forwards_are_one_object_until_no_route_holds_it() -> None:
    a = ir.shared_forward(ir.Forward((ir.WeightedCluster("svc-a", 1),), timeout_ms=5))
    b = ir.shared_forward(ir.Forward((ir.WeightedCluster("svc-a", 1),), timeout_ms=5))
    other = ir.shared_forward(ir.Forward((ir.WeightedCluster("svc-a", 1),), timeout_ms=6))
    assert a is b and other is not a and other != a
    before = len(ir.shared_forward)
    del a, b, other
    gc.collect()
    assert len(ir.shared_forward) == before - 2


def test_routes_under_equal_policies_hold_one_route_policy_after_policies_change() -> None:
    """A change to any TrafficPolicy resolves the route rules rebuilt anew. Rules under equal
    policies still share one RoutePolicy: under churn, each rule a policy had reached and left
    kept its own equal copy (hundreds more objects every few minutes)."""
    import yaml

    from lychgate.api.registry import parse
    from lychgate.controlplane import builtin_class
    from lychgate.store import Store
    from lychgate.translate.aggregate import Aggregate
    from lychgate.translate.gateway import translate
    from tests.bench.policy_shape import gateway_policy_yaml, header_policy_yaml

    store = Store()
    store.upsert(builtin_class())
    store.upsert(parse({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                        "metadata": {"name": "gw", "namespace": "default"},
                        "spec": {"gatewayClassName": "lychgate",
                                 "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}))
    for name in ("a", "b", "c"):
        store.upsert(parse({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                            "metadata": {"name": name, "namespace": "default"},
                            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [f"{name}.test"],
                                     "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}]}}))
    store.upsert(parse(yaml.safe_load(gateway_policy_yaml("gw"))))  # a timeout on every route
    state = Aggregate()

    def policies() -> dict[str, ir.RoutePolicy | None]:
        out = translate(store, lambda gw: "127.0.0.1", state=state)
        [listener] = out.gateways["default/gw"].listeners
        return {vh.domains[0]: vh.routes[0].policy for vh in listener.virtual_hosts}

    first = policies()
    assert first["a.test"] is first["b.test"] is first["c.test"] is not None
    extra = parse(yaml.safe_load(header_policy_yaml("extra", "b", "1")))
    store.upsert(extra)  # b gets a header too: its own policy
    second = policies()
    assert second["b.test"] != first["b.test"] and second["a.test"] is first["a.test"]
    store.delete(extra.key)  # and goes back to the Gateway's alone
    third = policies()
    assert third["b.test"] is third["a.test"] is first["a.test"]
