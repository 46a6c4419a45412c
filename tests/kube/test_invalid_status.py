"""An object the API server took but lychgate's model refuses: its status says so (status/invalid.py).

The CRD cannot say "exactly one of json, text" for a directResponse's bodyFormat, so the
API server stores a version lychgate refuses. The last valid version keeps serving; the
status names the field, at the refused generation, and goes back to translation's once fixed.
"""

from __future__ import annotations

import json
from typing import Any

from tests.kube.helpers import LG, Controller, condition, eventually, settle
from tests.kube.test_crds import status_problems
from tests.kube.test_status import setup_objects
from tests.kubefake import KubeFake


def traffic_policy(name: str, body_format: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": LG, "kind": "TrafficPolicy", "metadata": {"name": name, "namespace": "default"},
            "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "route"}],
                     "directResponse": {"status": 200, "bodyFormat": body_format}}}


def status(kube: KubeFake, plural: str, name: str) -> dict[str, Any]:
    return (kube.get(plural, name) or {}).get("status") or {}


def accepted(kube: KubeFake, plural: str, name: str, generation: int) -> dict[str, Any] | None:
    """The Accepted condition once it describes `generation`."""
    found = condition(status(kube, plural, name), "Accepted")
    return found if found and found["observedGeneration"] == generation else None


def served(wiring: Any) -> str:
    """What the Gateway's proxies are sent, as text."""
    return json.dumps(wiring.cp.cache.resources_json("default/gw"))


async def test_a_refused_version_is_named_in_status_and_the_last_valid_one_serves(
    kube: KubeFake, controller: Controller
) -> None:
    setup_objects(kube)
    kube.create(traffic_policy("answer", {"text": "first answer"}))
    async with controller() as wiring:
        ok = await eventually(lambda: accepted(kube, "trafficpolicies", "answer", 1), what="generation 1 accepted")
        assert ok["status"] == "True"
        await eventually(lambda: "first answer" in served(wiring), what="the direct response served")

        # Both json and text: the CRD takes it, lychgate's model does not.
        kube.apply(traffic_policy("answer", {"text": "second answer", "json": {"answer": "%RESPONSE_CODE%"}}))
        refused = await eventually(lambda: accepted(kube, "trafficpolicies", "answer", 2),
                                   what="generation 2 reported")
        assert refused["status"] == "False" and refused["reason"] == "Invalid"
        assert "spec.directResponse.bodyFormat" in refused["message"], refused
        assert "exactly one of json, text must be set" in refused["message"], refused
        assert "the last valid version (generation 1) stays in use" in refused["message"], refused
        written = status(kube, "trafficpolicies", "answer")
        assert status_problems("TrafficPolicy", written) == []
        # Where the last valid version applies, it still does (and says of which generation).
        (ancestor,) = written["ancestors"]
        applied = condition(ancestor, "Applied")
        assert applied and applied["status"] == "True" and applied["observedGeneration"] == 1
        assert "first answer" in served(wiring) and "second answer" not in served(wiring)

        # Written once, and not again: our own write coming back refuses nothing new.
        await settle(0.5)
        writes = kube.writes("trafficpolicies", "answer", subresource="status")
        passes = wiring.cp.passes
        await settle(0.5)
        assert kube.writes("trafficpolicies", "answer", subresource="status") == writes
        assert wiring.cp.passes == passes

        # Fixed: translation's status again, and the new version serves.
        kube.apply(traffic_policy("answer", {"text": "third answer"}))
        fixed = await eventually(lambda: accepted(kube, "trafficpolicies", "answer", 3), what="generation 3")
        assert fixed["status"] == "True" and fixed["reason"] == "Valid"
        await eventually(lambda: "third answer" in served(wiring), what="the fixed version served")
        assert status_problems("TrafficPolicy", status(kube, "trafficpolicies", "answer")) == []


async def test_an_object_never_valid_is_told_so_and_cleared_when_fixed(kube: KubeFake, controller: Controller) -> None:
    """No valid version: nothing runs, and the status says that. A DirectResponse gets no
    status from translation, so fixing it must clear lychgate's condition, not leave it."""
    setup_objects(kube)
    # Applied (not created): the fixes below are applies that drop a field the first one set.
    kube.apply(traffic_policy("never", {"text": "a", "json": {"a": "b"}}))
    kube.apply({"apiVersion": LG, "kind": "DirectResponse", "metadata": {"name": "teapot", "namespace": "default"},
                 "spec": {"status": 418, "body": "short and stout", "bodyFormat": {"text": "tip me over"}}})
    async with controller():
        refused = await eventually(lambda: accepted(kube, "trafficpolicies", "never", 1), what="TrafficPolicy")
        assert refused["status"] == "False"
        assert "no version of it is in use until it is fixed" in refused["message"]
        assert status_problems("TrafficPolicy", status(kube, "trafficpolicies", "never")) == []
        teapot = await eventually(lambda: accepted(kube, "directresponses", "teapot", 1), what="DirectResponse")
        assert teapot["status"] == "False" and "at most one of body, bodyFormat" in teapot["message"]
        assert status_problems("DirectResponse", status(kube, "directresponses", "teapot")) == []

        kube.apply({"apiVersion": LG, "kind": "DirectResponse", "metadata": {"name": "teapot", "namespace": "default"},
                    "spec": {"status": 418, "body": "short and stout"}})
        await eventually(lambda: condition(status(kube, "directresponses", "teapot"), "Accepted") is None,
                         what="the DirectResponse's condition cleared")
        kube.apply(traffic_policy("never", {"text": "now valid"}))
        fixed = await eventually(lambda: accepted(kube, "trafficpolicies", "never", 2), what="TrafficPolicy fixed")
        assert fixed["status"] == "True"
