"""Status written to the API server: observedGeneration, no rewrites, other controllers' entries, conflicts."""

from __future__ import annotations

from typing import Any

from lychgate.status.writer import merge_patch, merge_status
from lychgate.translate.gateway import CONTROLLER_NAME
from tests.kube.helpers import (
    CONTROLLER,
    Controller,
    condition,
    eventually,
    gateway,
    gateway_class,
    gateway_condition,
    route,
    service,
    settle,
)
from tests.kubefake import KubeFake


def setup_objects(kube: KubeFake) -> None:
    kube.create(gateway_class())
    kube.create(gateway_class("lychgate-waypoint"))
    kube.create(gateway())
    kube.create(route())
    kube.create(service())


def route_parents(kube: KubeFake, name: str = "route") -> list[dict[str, Any]]:
    return ((kube.get("httproutes", name) or {}).get("status") or {}).get("parents") or []


async def test_status_is_written_with_observed_generation(kube: KubeFake, controller: Controller) -> None:
    setup_objects(kube)
    async with controller():
        await eventually(lambda: gateway_condition(kube, "Accepted"), what="Gateway status")
        accepted = gateway_condition(kube, "Accepted")
        assert accepted and accepted["status"] == "True" and accepted["observedGeneration"] == 1
        gw_status = kube.get("gateways", "gw")["status"]  # type: ignore[index]
        assert gw_status["listeners"][0]["attachedRoutes"] == 1

        await eventually(lambda: route_parents(kube), what="HTTPRoute status")
        (parent,) = route_parents(kube)
        assert parent["controllerName"] == CONTROLLER
        assert parent["parentRef"]["name"] == "gw"
        assert condition(parent, "Accepted")["status"] == "True"  # type: ignore[index]

        gc = await eventually(lambda: (kube.get("gatewayclasses", "lychgate") or {}).get("status"),
                              what="GatewayClass lychgate status")
        assert condition(gc, "Accepted")["status"] == "True"  # type: ignore[index]
        assert {"name": "HTTPRoute"} in gc["supportedFeatures"]
        # waypoint.enabled is off by default: the waypoint class says so instead of pretending to serve.
        gc = await eventually(lambda: (kube.get("gatewayclasses", "lychgate-waypoint") or {}).get("status"),
                              what="GatewayClass lychgate-waypoint status")
        waypoint = condition(gc, "Accepted")
        assert waypoint is not None and waypoint["status"] == "False" and waypoint["reason"] == "Unsupported"
        assert "waypoint.enabled" in waypoint["message"]

        # A spec change: the conditions follow the new generation.
        kube.apply(gateway(listeners=[{"name": "http", "port": 8080, "protocol": "HTTP",
                                       "allowedRoutes": {"namespaces": {"from": "All"}}},
                                      {"name": "other", "port": 8081, "protocol": "HTTP"}]))
        await eventually(lambda: gateway_condition(kube, "Accepted")["observedGeneration"] == 2,  # type: ignore[index]
                         what="observedGeneration 2")


async def test_unchanged_status_is_not_rewritten_even_by_a_new_controller(
    kube: KubeFake, controller: Controller
) -> None:
    setup_objects(kube)
    async with controller() as wiring:
        await eventually(lambda: route_parents(kube) and gateway_condition(kube, "Programmed"),
                         what="status written")
        await settle()
        objects = (("gateways", "gw"), ("httproutes", "route"), ("gatewayclasses", "lychgate"))

        def count() -> dict[str, int]:
            return {r: kube.writes(r, n, subresource="status") for r, n in objects}

        writes = count()
        # More passes over the same input (an unrelated object changes) write nothing.
        kube.create(service("unrelated"))
        passes = wiring.cp.passes
        await eventually(lambda: wiring.cp.passes > passes, what="another pass")
        await settle()
        assert count() == writes
    # A restarted controller computes the same status with fresh timestamps: still no write.
    async with controller() as wiring:
        await eventually(lambda: wiring.elector.is_leader(), what="leadership")
        await settle(0.5)
        assert wiring.cp.passes >= 1
        assert count() == writes


async def test_other_controllers_entries_and_conditions_are_kept(kube: KubeFake, controller: Controller) -> None:
    """A route attached to our Gateway and to another implementation's: their
    parents entry stays. A foreign condition type on our Gateway stays too."""
    setup_objects(kube)
    kube.create(gateway_class("other", controller="example.com/other"))
    kube.create(gateway("theirs", cls="other"))
    r = route()
    r["spec"]["parentRefs"].append({"name": "theirs"})
    kube.apply(r)
    theirs = {"parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "theirs",
                            "namespace": "default"},
              "controllerName": "example.com/other",
              "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                              "observedGeneration": 1, "lastTransitionTime": "2020-01-01T00:00:00Z"}]}
    kube.update_status("httproutes", "route", {"parents": [theirs]})
    kube.update_status("gateways", "gw", {"conditions": [
        {"type": "example.com/Audited", "status": "True", "reason": "Audited", "message": "",
         "lastTransitionTime": "2020-01-01T00:00:00Z"}]})
    async with controller():
        await eventually(lambda: len(route_parents(kube)) == 2, what="both parents")
        parents = route_parents(kube)
        assert parents[0] == theirs
        assert parents[1]["controllerName"] == CONTROLLER
        await eventually(lambda: gateway_condition(kube, "Accepted"), what="our conditions")
        assert gateway_condition(kube, "example.com/Audited") is not None

        # The route leaves our Gateway: our entry goes, theirs stays.
        r["spec"]["parentRefs"] = [{"name": "theirs"}]
        kube.apply(r)
        await eventually(lambda: route_parents(kube) == [theirs], what="only their entry")


async def test_conflicts_are_retried_with_a_fresh_read(kube: KubeFake, controller: Controller) -> None:
    """Another writer changes the route between our read and our write: the write
    fails 409, the writer reads afresh and writes again, keeping the other change."""
    setup_objects(kube)
    kube.conflict_next("patch", "httproutes", name="route", subresource="status")
    async with controller() as wiring:
        await eventually(lambda: route_parents(kube), what="route status despite the conflict")
        assert wiring.writer.conflicts >= 1
        patches = kube.requests_for("httproutes", verb="patch", name="route", subresource="status")
        assert [p.status for p in patches][:2] == [409, 200]
        # The retried write was computed from a fresh GET.
        gets = kube.requests_for("httproutes", verb="get", name="route")
        assert gets, "the writer must read the object again after a conflict"


async def test_a_failing_api_server_is_retried(kube: KubeFake, controller: Controller) -> None:
    setup_objects(kube)
    kube.fail_next("patch", "gateways", name="gw", subresource="status", code=500, times=2)
    async with controller():
        await eventually(lambda: gateway_condition(kube, "Accepted"), timeout=8, what="status after 500s")


def test_merge_keeps_transition_times_and_foreign_fields() -> None:
    current = {
        "conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "old", "observedGeneration": 1,
             "lastTransitionTime": "2020-01-01T00:00:00Z"},
            {"type": "Programmed", "status": "False", "reason": "Pending", "message": "", "observedGeneration": 1,
             "lastTransitionTime": "2020-01-01T00:00:00Z"},
            {"type": "ResolvedRefs", "status": "True", "reason": "x", "message": "", "observedGeneration": 1,
             "lastTransitionTime": "2020-01-01T00:00:00Z"},
        ],
        "vendorField": {"a": 1},
    }
    desired = {"conditions": [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "new", "observedGeneration": 2,
         "lastTransitionTime": "2030-01-01T00:00:00Z"},
        {"type": "Programmed", "status": "True", "reason": "Programmed", "message": "", "observedGeneration": 2,
         "lastTransitionTime": "2030-01-01T00:00:00Z"},
    ]}
    merged = merge_status(current, desired)
    assert merged is not None
    by_type = {c["type"]: c for c in merged["conditions"]}
    assert by_type["Accepted"]["lastTransitionTime"] == "2020-01-01T00:00:00Z"  # same status: kept
    assert by_type["Programmed"]["lastTransitionTime"] == "2030-01-01T00:00:00Z"  # flipped: new time
    assert "ResolvedRefs" not in by_type  # ours, no longer computed: removed
    assert merged["vendorField"] == {"a": 1}
    assert merge_status({"conditions": []}, None) is None  # no longer ours: leave it alone
    patch = merge_patch(current, merged)
    assert "vendorField" not in patch and isinstance(patch["conditions"], list)
    assert merge_patch({"a": 1, "b": {"c": 1, "d": 2}}, {"b": {"c": 1}}) == {"a": None, "b": {"d": None}}


def test_merge_leaves_other_controllers_entries_room_within_the_list_bounds() -> None:
    """Gateway API caps PolicyStatus.ancestors at 16 (RouteStatus.parents at 32) and the API
    server refuses a longer list: with another controller's 3 entries on the object, lychgate's
    16 ancestors are cut to 13 rather than the whole status write failing."""
    def entry(controller: str, i: int) -> dict[str, object]:
        return {"ancestorRef": {"name": f"gw-{i}"}, "controllerName": controller,
                "conditions": [{"type": "Accepted", "status": "True"}]}

    foreign = [entry("example.com/other", i) for i in range(3)]
    ours = [entry(CONTROLLER_NAME, i) for i in range(16)]
    merged = merge_status({"ancestors": foreign}, {"ancestors": ours})
    assert merged is not None
    assert merged["ancestors"] == foreign + ours[:13]
    assert merge_status({}, {"ancestors": ours})["ancestors"] == ours  # type: ignore[index]


async def test_policy_status_is_written(kube: KubeFake, controller: Controller) -> None:
    """Policies get status like routes do: one ancestors entry per target, ours by controllerName."""
    setup_objects(kube)
    kube.create({"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
                 "metadata": {"name": "timeouts", "namespace": "default"},
                 "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "route"}],
                          "timeouts": {"request": "5s"}}})
    async with controller():
        status = await eventually(lambda: (kube.get("trafficpolicies", "timeouts") or {}).get("status"),
                                  what="TrafficPolicy status")
        (ancestor,) = status["ancestors"]
        assert ancestor["controllerName"] == CONTROLLER and ancestor["ancestorRef"]["name"] == "route"
        assert condition(ancestor, "Accepted") is not None
