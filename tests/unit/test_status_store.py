from __future__ import annotations

import time

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
