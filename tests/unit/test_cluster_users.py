"""A Gateway's Clusters as its routes come and go (translate/cluster_users.py)."""

from __future__ import annotations

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.translate.cluster_users import ClusterUsers

A, B = ObjectKey("HTTPRoute", "default", "a"), ObjectKey("HTTPRoute", "default", "b")


def _cluster(name: str, port: int = 80) -> ir.Cluster:
    return ir.Cluster(name, (ir.Endpoint("10.0.0.1", port),))


def test_a_route_changed_within_a_pass_keeps_the_names_order_without_sorting_again() -> None:
    """Each pass removes a changed route and adds it again: its Clusters' names neither come
    nor go, so the sorted names are the very list of the last pass (sorting 3,000 names was a
    part of every change); the Cluster served is the route's new one."""
    used = ClusterUsers()
    used.add(A, _cluster("svc-b"))
    used.add(A, _cluster("svc-a"))
    served, names = used.clusters()
    assert names == ["svc-a", "svc-b"]
    used.remove(A, "svc-a")
    used.remove(A, "svc-b")
    used.add(A, _cluster("svc-a", 81))
    used.add(A, _cluster("svc-b"))
    served, again = used.clusters()
    assert again is names
    assert served["svc-a"].endpoints[0].port == 81


def test_names_go_with_their_last_user_and_the_oldest_user_is_served() -> None:
    used = ClusterUsers()
    used.add(A, _cluster("svc", 80))
    used.add(B, _cluster("svc", 81))
    used.add(B, _cluster("only-b"))
    assert used.clusters()[0]["svc"].endpoints[0].port == 80  # A's: the oldest user
    used.remove(A, "svc")
    assert used.clusters()[0]["svc"].endpoints[0].port == 81
    used.remove(B, "svc")
    used.remove(B, "only-b")
    assert used.clusters() == ({}, [])
