from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from lychgate.api.base import ObjectKey
from lychgate.status.store import StatusStore
from lychgate.translate.conditions import condition

KEY = ObjectKey("Gateway", "default", "gw")


def _status(programmed: bool) -> dict[str, object]:
    return {"conditions": [condition("Accepted", True, "Accepted", "", 1),
                           condition("Programmed", programmed, "Programmed" if programmed else "Pending", "", 1)]}


def test_unchanged_status_is_not_reported_and_keeps_its_time() -> None:
    store = StatusStore()
    assert store.update({KEY: _status(False)}) == {KEY}
    first = store.get(KEY)
    assert first is not None
    assert store.update({KEY: _status(False)}) == set()
    time.sleep(1.1)  # transition times have one-second resolution
    assert store.update({KEY: _status(True)}) == {KEY}
    now = store.get(KEY)
    assert now is not None
    accepted = next(c for c in now["conditions"] if c["type"] == "Accepted")
    programmed = next(c for c in now["conditions"] if c["type"] == "Programmed")
    assert accepted["lastTransitionTime"] == first["conditions"][0]["lastTransitionTime"]
    assert programmed["lastTransitionTime"] != first["conditions"][1]["lastTransitionTime"]


def test_removed_objects_lose_their_status() -> None:
    store = StatusStore()
    store.update({KEY: _status(True)})
    assert store.update({}) == {KEY}
    assert store.get(KEY) is None


def test_one_object_replacing_another_in_the_same_pass() -> None:
    """As many statuses as before, but one object gone and another new: both are reported."""
    other = ObjectKey("Gateway", "default", "other")
    store = StatusStore()
    store.update({KEY: _status(True)})
    assert store.update({other: _status(True)}) == {KEY, other}
    assert store.get(KEY) is None and store.get(other) is not None


def _keys(n: int) -> list[ObjectKey]:
    return [ObjectKey("HTTPRoute", "default", f"r-{i}") for i in range(n)]


def test_status_shared_by_two_objects_that_swap_places() -> None:
    """The same status object under two keys that trade places (translation may share one
    for identical statuses): each key still gets its own status, not its neighbour's."""
    a, b, c = _keys(3)
    shared, other = _status(True), _status(False)
    store = StatusStore()
    store.update({a: shared, b: other, c: shared})
    assert store.update({a: other, b: shared, c: shared}) == {a, b}
    assert store.get(a) is not None and store.get(a)["conditions"][1]["status"] == "False"  # type: ignore[index]
    assert store.get(b) is not None and store.get(b)["conditions"][1]["status"] == "True"  # type: ignore[index]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 11), st.integers(0, 3), st.integers(0, 2)), max_size=12),
                min_size=1, max_size=8))
def test_changes_are_found_whatever_the_order(passes: list[list[tuple[int, int, int]]]) -> None:
    """Passes that insert, drop, move and re-create statuses, reuse status objects and
    share one status object between keys, and hand in equal but new key objects: the store reports exactly the objects whose status
    content changed, appeared or went, as comparing every status would."""
    objects = [[_status(bool(v % 2)) | {"v": v} for v in range(4)] for _ in range(12)]  # per key, per value
    store = StatusStore()
    before: dict[ObjectKey, dict[str, object]] = {}
    for entries in passes:
        computed: dict[ObjectKey, dict[str, object]] = {}
        for k, v, how in entries:
            key = ObjectKey("HTTPRoute", "default", f"r-{k}")  # a new, equal key object every pass
            # The key's own object, a copy of it, or one object shared by every key of that content.
            computed[key] = (objects[k][v], dict(objects[k][v]), objects[0][v])[how]
        expected = {k for k in computed.keys() | before.keys()
                    if k not in before or k not in computed or before[k] != computed[k]}
        assert store.update(computed) == expected
        assert {k: store.get(k)["v"] for k in computed} == {k: s["v"] for k, s in computed.items()}  # type: ignore[index]
        before = computed


def _route_status(accepted: bool) -> dict[str, object]:
    reason, message = ("Accepted", "attached to http") if accepted else ("NotAllowedByListeners", "no listener")
    return {"parents": [{"parentRef": {"name": "edge"}, "controllerName": "gateway.lychgate.dev/lychgate",
                         "conditions": [condition("Accepted", accepted, reason, message, 1)]}]}


def test_equal_times_are_stored_once_and_the_computed_status_is_left_alone() -> None:
    store = StatusStore()
    routes = [ObjectKey("HTTPRoute", "default", f"r{i}") for i in range(3)]
    computed = {key: _route_status(True) for key in routes}
    store.update(computed)
    # Routes stamped in one update hold one tuple of times, no copy of their status.
    times = [store._times[key] for key in routes]
    assert all(t is times[0] for t in times)
    stored = [store.get(key) for key in routes]
    conditions = [s["parents"][0]["conditions"][0] for s in stored if s is not None]
    assert len(conditions) == 3 and all(c == conditions[0] for c in conditions)
    assert "lastTransitionTime" in conditions[0]
    assert all("lastTransitionTime" not in c for s in computed.values()
               for p in s["parents"] for c in p["conditions"])  # type: ignore[attr-defined]
    # A condition that changes on one route changes there alone.
    store.update(computed | {routes[0]: _route_status(False)})
    now = [store.get(key) for key in routes]
    assert [s["parents"][0]["conditions"][0]["status"] for s in now if s is not None] == ["False", "True", "True"]
