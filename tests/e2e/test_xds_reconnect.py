"""A real Envoy reconnecting to a restarted control plane (xds/delta_request.py).

Envoy names what it holds in `initial_resource_versions`. The ADS server reads that map
as its raw entries and compares them with the snapshot's own, encoded the way Envoy
encodes them; only entries that differ are decoded. Were Envoy to write its entries any
other way, every reconnect would be decoded: still correct, but a reconnect storm would
cost twice the CPU again. This test holds the encoding to the real Envoy's.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from lychgate import ir
from lychgate.deploy.bootstrap import XdsTarget, bootstrap
from lychgate.deploy.local import envoy_binary
from lychgate.xds import delta_request, types
from lychgate.xds.cache import SnapshotCache
from lychgate.xds.delta import DeltaState
from lychgate.xds.server import AdsServer, ProxyConnection, start_server
from lychgate.xds.translator import build
from tests.harness import free_port
from tests.unit.test_ads_server import NODE

pytestmark = pytest.mark.e2e
HELD = (types.CLUSTER, types.ENDPOINT, types.LISTENER, types.ROUTE)


def _gateway(listen: int) -> ir.GatewayIR:
    """Twelve Services (Clusters with endpoints), a route to each. (Set with
    counts_replicas=False, as for a Gateway whose routes share no rate-limit bucket: its
    local cluster stays empty, where counting proxies would change it with every
    reconnect, and Envoy would rightly hold another version of it.)"""
    clusters = tuple(ir.Cluster(f"kube/default/svc-{i}/80", (ir.Endpoint("127.0.0.1", 3000 + i),))
                     for i in range(12))
    routes = tuple(ir.Route(ir.RouteSource("HTTPRoute", "default", f"r{i}", 0, 0), ir.Match(path=f"/{i}/"),
                            ir.Forward((ir.WeightedCluster(c.name, 1),))) for i, c in enumerate(clusters))
    listener = ir.HTTPListener("http", "127.0.0.1", listen, (ir.VirtualHost("http/*", ("*",), routes),))
    return ir.GatewayIR("default", "gw", (listener,), clusters)


async def _synced(ads: AdsServer, cache: SnapshotCache, timeout: float) -> ProxyConnection:
    """The proxy's connection once it holds the snapshot of every type and has ACKed it all."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        snapshot = cache.get(NODE)  # (the local cluster changes it as the proxy connects)
        assert snapshot is not None
        for conn in ads.connections.values():
            deltas = {t: s.delta if (s := conn.types.get(t)) is not None else None for t in HELD}
            if all(d is not None and d.synced_to(snapshot.hashes[t]) and not d.inflight for t, d in deltas.items()):
                return conn
        await asyncio.sleep(0.05)
    raise AssertionError(f"Envoy did not sync in {timeout} s: {[c.summary() for c in ads.connections.values()]}")


async def test_envoy_reconnecting_with_what_it_holds_is_read_without_decoding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = _gateway(free_port())
    cache = SnapshotCache()
    ads = AdsServer(cache)
    server, port = await start_server(ads, "127.0.0.1:0")
    cache.set(NODE, build(gateway), counts_replicas=False)
    config = tmp_path / "envoy.json"
    config.write_text(json.dumps(bootstrap("default", "gw", XdsTarget("127.0.0.1", port), admin_port=free_port())))
    envoy = subprocess.Popen([envoy_binary(), "-c", str(config), "--disable-hot-restart", "--base-id", str(port),
                              "-l", "error"], stderr=(tmp_path / "envoy.log").open("wb"))
    restarted = None
    try:
        await _synced(ads, cache, 30)
        await server.stop(0)

        read: list[int] = []
        decoded: list[int] = []
        entries_of, versions_of = DeltaState.initial_entries, delta_request.versions

        def counted_entries(self: DeltaState, entries: Sequence[bytes], *args: object) -> None:
            read.append(len(entries))
            entries_of(self, entries, *args)  # type: ignore[arg-type]

        def counted_versions(entries: Sequence[bytes]) -> dict[str, str]:
            decoded.append(len(entries))
            return versions_of(entries)

        monkeypatch.setattr(DeltaState, "initial_entries", counted_entries)
        monkeypatch.setattr(delta_request, "versions", counted_versions)
        # The control plane comes back with the same configuration (a restart).
        cache = SnapshotCache()
        ads = AdsServer(cache)
        cache.set(NODE, build(gateway), counts_replicas=False)
        restarted, _ = await start_server(ads, f"127.0.0.1:{port}")
        conn = await _synced(ads, cache, 30)
        # Envoy named what it held of every type: a listener, its routes, 12 clusters, and
        # their endpoints with the Gateway's local cluster's...
        assert sorted(read) == [1, 1, 12, 13]
        assert decoded == []  # ...as the snapshot's own entries
        assert conn.programmed(cache.get(NODE))
    finally:
        envoy.terminate()
        envoy.wait(10)
        for running in (server, restarted):
            if running is not None:
                await running.stop(0)  # (again for the first: a no-op)
