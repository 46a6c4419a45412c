"""A control-loop pass rebuilds only the Gateways whose IR changed.

A real ControlPlane and store, with a deployer that starts nothing (no Envoy:
this checks what the pass hands the xDS cache). With many Gateways, a change on
one must not rebuild and re-snapshot the others, and a change that reaches a
Gateway must always reach its snapshot.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest

from lychgate import controlplane
from lychgate.admin import metrics
from lychgate.api.base import ObjectKey
from lychgate.api.registry import parse
from lychgate.controlplane import ControlPlane, builtin_class
from lychgate.settings import Settings
from lychgate.xds import opening, types
from lychgate.xds import server as server_module
from lychgate.xds.cache import SnapshotCache
from lychgate.xds.server import AdsServer, start_server
from lychgate.xds.translator import build
from tests.no_proxies import NoProxies
from tests.unit.test_ads_server import DeltaClient


def gateway(name: str) -> Any:
    return parse({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                  "metadata": {"name": name, "namespace": "default"},
                  "spec": {"gatewayClassName": "lychgate",
                           "listeners": [{"name": "http", "protocol": "HTTP", "port": 8080}]}})


def route(name: str, gw: str, path: str = "/") -> Any:
    return parse({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                  "metadata": {"name": name, "namespace": "default"},
                  "spec": {"parentRefs": [{"name": gw}], "hostnames": [f"{name}.example.com"],
                           "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": path}}]}]}})


def test_a_change_rebuilds_only_the_gateways_it_reaches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def counting_build(gw: Any, *args: Any) -> Any:
        built.append(gw.ref)
        return build(gw, *args)

    monkeypatch.setattr(controlplane, "build", counting_build)
    cp = ControlPlane(Settings(state_dir=tmp_path), NoProxies())  # type: ignore[arg-type]
    cp.store.upsert(builtin_class())
    for gw in ("a", "b"):
        cp.store.upsert(gateway(gw))
        cp.store.upsert(route(f"r-{gw}", gw))

    def snapshots() -> dict[str, Any]:
        return {ref: cp.cache.get(ref) for ref in ("default/a", "default/b")}

    def routes_of(ref: str) -> bytes:
        snap = cp.cache.get(ref)
        assert snap is not None
        return b"".join(snap.resources[types.ROUTE].values())

    asyncio.run(cp.sync_once())
    first = snapshots()
    assert all(first.values())
    assert sorted(built) == ["default/a", "default/b"]

    cp.store.upsert(route("r-a", "a", path="/v2"))  # reaches Gateway a only
    asyncio.run(cp.sync_once())
    second = snapshots()
    assert second["default/a"] is not first["default/a"]
    assert b"/v2" in routes_of("default/a")
    assert second["default/b"] is first["default/b"]
    assert built[2:] == ["default/a"]  # b was not built again

    cp.store.upsert(route("r-new", "b"))  # now b changes
    asyncio.run(cp.sync_once())
    assert cp.cache.get("default/b") is not first["default/b"]
    assert b"r-new.example.com" in routes_of("default/b")

    cp.store.delete(ObjectKey("Gateway", "default", "b"))
    asyncio.run(cp.sync_once())
    assert cp.cache.get("default/b") is None
    cp.store.upsert(gateway("b"))  # back with the same routes: served again
    asyncio.run(cp.sync_once())
    assert b"r-new.example.com" in routes_of("default/b")


def test_snapshot_metrics_follow_the_snapshot(tmp_path: Path) -> None:
    """lychgate_xds_snapshot_bytes/_resources show the snapshot a proxy gets, after each change."""
    cp = ControlPlane(Settings(state_dir=tmp_path), NoProxies())  # type: ignore[arg-type]
    cp.store.upsert(builtin_class())
    cp.store.upsert(gateway("m"))

    def shown(metric: str) -> float | None:
        return metrics.REGISTRY.get_sample_value(metric, {"gateway": "default/m", "type_url": "RDS"})

    def actual() -> int:
        snap = cp.cache.get("default/m")
        assert snap is not None
        return sum(map(len, snap.resources[types.ROUTE].values()))

    for n in range(3):
        cp.store.upsert(route(f"m-{n}", "m"))
        asyncio.run(cp.sync_once())
        assert shown("lychgate_xds_snapshot_bytes") == actual()
        assert shown("lychgate_xds_snapshot_resources") == 2  # the table, the stand-in (chain_routes.py)
    asyncio.run(cp.sync_once())  # nothing changed: the figures stay
    assert shown("lychgate_xds_snapshot_bytes") == actual()


async def _fleet_served(tmp_path: Path) -> tuple[ControlPlane, grpc.aio.Server, int]:
    """A control plane serving Gateway default/fleet (one route) over a real ADS server."""
    cache = SnapshotCache()
    ads = AdsServer(cache)
    server, port = await start_server(ads, "127.0.0.1:0")
    cp = ControlPlane(Settings(state_dir=tmp_path), NoProxies(), cache=cache, ads=ads)  # type: ignore[arg-type]
    cp.store.upsert(builtin_class())
    cp.store.upsert(gateway("fleet"))
    cp.store.upsert(route("r", "fleet"))
    await cp.sync_once()
    return cp, server, port


async def test_proxies_that_change_no_status_ask_for_no_pass(tmp_path: Path) -> None:
    """Every proxy that connects, first ACKs or leaves used to ask for a pass. When a fleet
    reconnects after a restart, the first one programmed changes the Gateway's status and
    the others change nothing: they must not each ask for one. A refusal still does, and a
    Gateway that no proxy holds programmed any more is looked at again."""
    cp, server, port = await _fleet_served(tmp_path)
    asked = cp._feedback_changed  # what wakes the control loop for a pass

    async def programmed_proxy() -> DeltaClient:
        client = DeltaClient(f"127.0.0.1:{port}", delta=True, node="default/fleet")
        for type_url in (types.CLUSTER, types.LISTENER):
            client.delta(type_url)
            client.delta(type_url, nonce=(await client.recv()).nonce)
        return client

    async def settled() -> None:
        await asyncio.sleep(0.3)  # (the server reads the ACKs)

    clients = [await programmed_proxy()]
    try:
        await settled()
        assert asked.is_set()  # the first proxy: the Gateway becomes programmed
        await cp.sync_once()
        assert not asked.is_set()
        clients += [await programmed_proxy() for _ in range(5)]
        await clients.pop().close()
        await settled()
        assert not asked.is_set()  # five more came and one left: nothing to look at
        # A proxy refuses the next listener: that is news.
        moved = gateway("fleet").model_dump(by_alias=True, exclude_none=True)
        moved["spec"]["listeners"][0]["port"] = 8081
        cp.store.upsert(parse(moved))
        await cp.sync_once()
        last = clients[-1]
        last.delta(types.LISTENER, nonce=(await last.recv()).nonce, error="cannot bind")
        await settled()
        assert asked.is_set()
    finally:
        for client in clients:
            await client.close()
        await server.stop(0)


@pytest.mark.parametrize("waited", [controlplane.CATCH_UP_SECONDS, 0.0])
async def test_once_a_change_is_sent_the_snapshot_keeps_no_second_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       waited: float) -> None:
    """What a snapshot keeps encoded to send a change (each resource changed, each answer) is a
    second copy of what changed. Once every proxy of the Gateway has been sent the change it goes,
    whether the pass saw it sent or (a change bigger than the pass waits for: `waited` 0) not;
    the next change reaches the proxy all the same. And once answers of more than GIVE_BACK_AFTER
    bytes were sent, the heap's free pages go back to the system."""
    monkeypatch.setattr(opening, "IDLE", 0.05)
    monkeypatch.setattr(controlplane, "CATCH_UP_SECONDS", waited)
    monkeypatch.setattr(server_module, "GIVE_BACK_AFTER", 1)
    given_back: list[bool] = []
    monkeypatch.setattr(server_module.memory, "give_back", lambda: given_back.append(True))
    cp, server, port = await _fleet_served(tmp_path)
    client = DeltaClient(f"127.0.0.1:{port}", delta=True, node="default/fleet")
    try:
        client.delta(types.CLUSTER)
        client.delta(types.CLUSTER, nonce=(await client.recv()).nonce)
        client.delta(types.LISTENER)
        client.delta(types.LISTENER, nonce=(await client.recv()).nonce)
        client.delta(types.ROUTE, subscribe=["http-8080"])  # (the listener's route table)
        first = await client.recv()
        assert [r.name for r in first.resources] == ["http-8080"]
        client.delta(types.ROUTE, nonce=first.nonce)
        await asyncio.sleep(0.3)  # (its opening is over, and IDLE passed)
        for path in ("/a", "/b"):
            cp.store.upsert(route("r", "fleet", path))
            await cp.sync_once()
            update = await client.recv()
            assert update.type_url == types.ROUTE and path.encode() in update.resources[0].resource.value
            client.delta(types.ROUTE, nonce=update.nonce)
            snap = cp.cache.get("default/fleet")
            assert snap is not None
            for _ in range(50):  # (bounded) seen to in the background when the pass did not wait
                if not snap.delta_bodies and not any(snap.entries.values()):
                    break
                await asyncio.sleep(0.02)
            assert not snap.delta_bodies and not any(snap.entries.values())
            assert given_back
            given_back.clear()
    finally:
        await client.close()
        await server.stop(0)
