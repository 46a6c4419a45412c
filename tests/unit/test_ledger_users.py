"""A resolution lives while any virtual host using it lives (one user, then several)."""

from __future__ import annotations

from lychgate.api.base import ObjectKey
from lychgate.translate.policies.attachment import Resolved
from lychgate.translate.policies.ledger import Ledger, Mark

ROUTE = ObjectKey("HTTPRoute", "apps", "r")
KEY = ("infra", "gw", "http", "HTTPRoute", "apps", "r", "apps", "r", 0, ())
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
