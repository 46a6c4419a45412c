"""Equal IR parts that many routes hold are shared by value, and let go with their last holder."""

from __future__ import annotations

import gc

from lychgate import ir


def test_equal_forwards_are_one_object_until_no_route_holds_it() -> None:
    a = ir.shared_forward(ir.Forward((ir.WeightedCluster("svc-a", 1),), timeout_ms=5))
    b = ir.shared_forward(ir.Forward((ir.WeightedCluster("svc-a", 1),), timeout_ms=5))
    other = ir.shared_forward(ir.Forward((ir.WeightedCluster("svc-a", 1),), timeout_ms=6))
    assert a is b and other is not a and other != a
    before = len(ir._FORWARDS)
    del a, b, other
    gc.collect()
    assert len(ir._FORWARDS) == before - 2
