"""A resolution lives while any virtual host using it lives (one user, then several)."""

from __future__ import annotations

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.translate.policies.attachment import Resolved
from lychgate.translate.policies.ledger import Ledger, Mark

ROUTE = ObjectKey("HTTPRoute", "apps", "r")
WHERE = ("infra", "gw", "http")
KEY = Ledger().key(WHERE, ROUTE, ir.RouteSource("HTTPRoute", "apps", "r", 0, 0))
HOST_A = (("infra", "gw"), "http-80", "a.example")
HOST_B = (("infra", "gw"), "http-80", "b.example")


def test_a_resolution_goes_with_its_last_user() -> None:
    ledger = Ledger()
    resolved = Resolved(None, None, {})
    ledger.add(HOST_A, KEY, (resolved, (("apps/p", None, Mark()),)))  # type: ignore[arg-type]
    assert ledger.lookup(HOST_A, KEY) is resolved  # the same user again: still one
    assert ledger.lookup(HOST_B, KEY) is resolved
    ledger.release([HOST_A])
    assert ledger.lookup(HOST_B, KEY) is resolved and ledger.route_tallies(ROUTE) == {"apps/p": {Mark(): 1}}
    ledger.release([HOST_B])
    assert ledger.lookup(HOST_B, KEY) is None and not ledger.by_route
    ledger.add(HOST_A, KEY, (resolved, (("apps/p", None, Mark()),)))  # type: ignore[arg-type]
    ledger.release([HOST_A])
    assert ledger.lookup(HOST_A, KEY) is None and not ledger.by_target


def test_resolution_keys_share_their_listener_and_route() -> None:
    """Each route rule under a listener has a key; they share the listener's tuple and the
    route's key instead of holding ten fields each (5,000 routes)."""
    ledger = Ledger()
    keys = [ledger.key(("infra", "gw", "http"), ObjectKey("HTTPRoute", "apps", "r"),
                       ir.RouteSource("HTTPRoute", "apps", "r", rule, 0)) for rule in range(3)]
    assert len(set(keys)) == 3
    assert all(k[0] is keys[0][0] and k[1] is keys[0][1] for k in keys)
    # A delegated child's rule is told apart from the parent's own rule of the same index.
    hop = ir.DelegationHop("apps", "r", 0, None)
    child = ledger.key(WHERE, ROUTE, ir.RouteSource("HTTPRoute", "apps", "child", 0, 0, delegated_by=(hop,)))
    assert child != keys[0] and child[1] is keys[0][1]


def test_the_parts_of_keys_no_one_holds_go() -> None:
    """Under churn routes come and go: the route keys shared by resolution keys go with them,
    while the keys still held keep sharing theirs."""
    ledger = Ledger()
    held = ledger.key(WHERE, ROUTE, ir.RouteSource("HTTPRoute", "apps", "r", 0, 0))
    for n in range(5_000):  # routes made and gone, their keys held by no one
        route = ObjectKey("HTTPRoute", "apps", f"gone-{n}")
        ledger.key(WHERE, route, ir.RouteSource("HTTPRoute", "apps", route.name, 0, 0))
    assert len(ledger._routes) < 1_000
    again = ledger.key(WHERE, ObjectKey("HTTPRoute", "apps", "r"), ir.RouteSource("HTTPRoute", "apps", "r", 1, 0))
    assert again[1] is held[1] and again[0] is held[0]
