"""Strict validation: ask the real Envoy whether it would accept a snapshot.

With `validation.level: strict`, every changed resource of a Gateway's snapshot
is checked by `envoy --mode validate` (the proxies' own binary) before it is
sent. What Envoy would reject is blocked: the proxy keeps the last accepted
version of that resource while everything else moves on, and the rejection is
attributed to the routes that caused it.

Envoy validates a static bootstrap, so each check inlines the dynamic parts:
listeners carry their RouteConfiguration, clusters become STATIC with their
ClusterLoadAssignment. Verdicts are cached by content hash, so a resource is
validated once however often it is translated; a failing batch is split in
halves until the culprits are found.
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.bootstrap.internal_listener.v3 import internal_listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2

from lychgate.log import component_logger
from lychgate.xds import types
from lychgate.xds.cache import decode, route_hash
from lychgate.xds.replicas import LOCAL_CLUSTER
from lychgate.xds.translator import Resources, as_message
from lychgate.xds.translator.route_matcher import routes_of
from lychgate.xds.validate_files import StandIns

log = component_logger("xds")

MAX_ERROR = 2000
XDS_CLUSTER = "lychgate_xds"
_HTTP_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
HCM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"


@dataclass(frozen=True)
class Blocked:
    """A resource Envoy would reject, and the route entries to blame."""

    type_url: str
    name: str
    error: str
    routes: tuple[str, ...] = ()  # Envoy route names: "httproute/NS/NAME/rule/I/match/J"


@dataclass
class _Unit:
    """What is validated together: a listener and its routes, or a cluster and its endpoints."""

    type_url: str
    name: str
    listener: listener_pb2.Listener | None = None
    routes: route_pb2.RouteConfiguration | None = None
    cluster: cluster_pb2.Cluster | None = None
    key: str = field(default="")

    def __post_init__(self) -> None:
        digest = hashlib.blake2b(digest_size=12)
        for part in (self.listener, self.routes, self.cluster):
            if part is not None:
                digest.update(part.SerializeToString(deterministic=True))
        self.key = digest.hexdigest()


class Preflight:
    def __init__(self, binary: str, workdir: Path | None = None) -> None:
        self.binary = binary
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="lychgate-validate-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.stand_ins = StandIns(self.workdir)  # for files only the proxy has
        self.verdicts: dict[str, str | None] = {}
        self.blamed: dict[str, tuple[str, ...]] = {}
        self.runs = 0
        self._lock = asyncio.Lock()

    async def check(self, resources: Resources, known_good: frozenset[str] = frozenset()) -> list[Blocked]:
        """The resources of one snapshot that Envoy would reject. `known_good`:
        content hashes of route entries a proxy accepted before, searched last
        when blaming routes (the culprit is nearly always among the new ones)."""
        units = _units(resources)
        fresh = [u for u in units if u.key not in self.verdicts]
        if fresh:
            async with self._lock:
                await self._settle(fresh)
        blocked = []
        for unit in units:
            error = self.verdicts.get(unit.key)
            if error is not None:
                if unit.key not in self.blamed:
                    self.blamed[unit.key] = await self._blame(unit, known_good) if unit.routes is not None else ()
                blocked.append(Blocked(unit.type_url, unit.name, error, self.blamed[unit.key]))
        return blocked

    async def _settle(self, units: list[_Unit]) -> None:
        error = await self._validate(units)
        if error is None:
            for u in units:
                self.verdicts[u.key] = None
        elif len(units) == 1:
            self.verdicts[units[0].key] = error
        else:
            half = len(units) // 2
            await self._settle(units[:half])
            await self._settle(units[half:])

    async def _blame(self, unit: _Unit, known_good: frozenset[str]) -> tuple[str, ...]:
        """The route entries of a rejected listener that Envoy refuses on their own."""
        assert unit.listener is not None and unit.routes is not None
        routes = _linear(unit.routes)
        unit = _Unit(unit.type_url, unit.name, listener=unit.listener, routes=routes)
        entries = [(vi, ri) for vi, vh in enumerate(routes.virtual_hosts) for ri in range(len(vh.routes))]
        new = [(vi, ri) for vi, ri in entries
               if route_hash(routes.virtual_hosts[vi].routes[ri]) not in known_good]
        culprits: list[str] = []

        if await self._validate([_with_routes(unit, [])]) is not None:
            return ()  # the listener fails without any route: no route is to blame

        async def search(part: list[tuple[int, int]]) -> None:
            if not part or await self._validate([_with_routes(unit, part)]) is None:
                return
            if len(part) == 1:
                vi, ri = part[0]
                culprits.append(routes.virtual_hosts[vi].routes[ri].name)
                return
            half = len(part) // 2
            await search(part[:half])
            await search(part[half:])

        async with self._lock:
            if len(new) < len(entries):
                await search(new)
            if not culprits:
                await search(entries)
        return tuple(dict.fromkeys(culprits))

    async def _validate(self, units: list[_Unit]) -> str | None:
        """Run `envoy --mode validate` on a bootstrap holding the units; None if valid."""
        boot = bootstrap_pb2.Bootstrap()
        boot.CopyFrom(_BASE)
        for unit in units:
            if unit.listener is not None:
                boot.static_resources.listeners.append(_inline_routes(unit.listener, unit.routes))
            if unit.cluster is not None:
                boot.static_resources.clusters.append(self.stand_ins.cluster(unit.cluster))
        path = self.workdir / f"check-{self.runs}.pb"
        path.write_bytes(boot.SerializeToString())
        self.runs += 1
        proc = await asyncio.create_subprocess_exec(
            self.binary, "--mode", "validate", "-c", str(path), "--disable-hot-restart",
            "-l", "critical", "--base-id", str(60000 + self.runs % 1000),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate()
        path.unlink(missing_ok=True)
        if proc.returncode == 0:
            return None
        return _clean_error(out.decode(errors="replace"))


def _base() -> bootstrap_pb2.Bootstrap:
    """What every check's bootstrap has, as a proxy's has it (deploy/bootstrap.py):
    an ADS source, so resources that name it (secrets over SDS, scoped routes)
    validate as they do on a proxy (nothing connects in validate mode), the
    local cluster (Envoy refuses a rate limit shared across the Gateway's
    replicas without one), and the internal listener extension waypoints use."""
    boot = bootstrap_pb2.Bootstrap()
    boot.node.id, boot.node.cluster = "lychgate-preflight", "lychgate-preflight"  # SDS needs a node
    boot.dynamic_resources.ads_config.api_type = boot.dynamic_resources.ads_config.DELTA_GRPC
    boot.dynamic_resources.ads_config.transport_api_version = 2  # V3
    boot.dynamic_resources.ads_config.grpc_services.add().envoy_grpc.cluster_name = XDS_CLUSTER
    xds = boot.static_resources.clusters.add(name=XDS_CLUSTER, type=cluster_pb2.Cluster.STATIC)
    xds.connect_timeout.seconds = 1
    xds.typed_extension_protocol_options[_HTTP_OPTIONS].Pack(
        http_protocol_options_pb2.HttpProtocolOptions(
            explicit_http_config=http_protocol_options_pb2.HttpProtocolOptions.ExplicitHttpConfig(
                http2_protocol_options={})))
    endpoint = xds.load_assignment.endpoints.add().lb_endpoints.add().endpoint
    endpoint.address.socket_address.address, endpoint.address.socket_address.port_value = "127.0.0.1", 1
    xds.load_assignment.cluster_name = XDS_CLUSTER
    boot.cluster_manager.local_cluster_name = LOCAL_CLUSTER
    local = boot.static_resources.clusters.add(name=LOCAL_CLUSTER, type=cluster_pb2.Cluster.EDS)
    local.connect_timeout.seconds = 1
    local.eds_cluster_config.eds_config.ads.SetInParent()
    local.eds_cluster_config.eds_config.resource_api_version = 2  # V3
    internal = boot.bootstrap_extensions.add(name="envoy.bootstrap.internal_listener")
    internal.typed_config.Pack(internal_listener_pb2.InternalListener())
    return boot


def _units(resources: Resources) -> list[_Unit]:
    """A listener with no HTTP chains is one unit; a listener with several HTTPS
    chains is one unit per chain (its routes inlined, the other chains' empty),
    so a rejected route is blamed within its own RouteConfiguration."""
    routes = resources.by_type.get(types.ROUTE, {})
    endpoints = resources.by_type.get(types.ENDPOINT, {})
    units = []
    carrier: listener_pb2.Listener | None = None
    unattached = set(routes)
    for name, packed in resources.by_type.get(types.LISTENER, {}).items():
        listener = as_message(packed)
        names: list[str | None] = [*rds_names(listener)] or [None]
        carrier = carrier or (listener if names != [None] or _scoped(listener) else None)
        for rds in names:
            unattached.discard(rds or "")
            units.append(_Unit(types.LISTENER, name, listener=listener,
                               routes=as_message(routes[rds]) if rds in routes else None))
    # The RouteConfigurations of a scoped table (and any a listener does not
    # name) are checked inside an HTTP listener of the snapshot.
    for rds in sorted(unattached) if carrier is not None else ():
        units.append(_Unit(types.ROUTE, rds, listener=carrier, routes=as_message(routes[rds])))
    for name, cluster in resources.by_type.get(types.CLUSTER, {}).items():
        cla = endpoints.get(name)
        units.append(_Unit(types.CLUSTER, name, cluster=_static_cluster(
            as_message(cluster), as_message(cla) if cla is not None else None)))
    return units


def asked_for(resources: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The route tables a proxy asks for, of a snapshot's packed resources: those its
    listeners' connection managers and scopes name. A snapshot also holds a stand-in
    for each listener's other filter chain (xds/translator/chain_routes.py), sent
    only while a draining chain names it."""
    out = {decode(types.SCOPED_ROUTE, packed).route_configuration_name
           for packed in resources.get(types.SCOPED_ROUTE, {}).values()}
    for packed in resources.get(types.LISTENER, {}).values():
        out.update(rds_names(decode(types.LISTENER, packed)))
    return out


def rds_names(listener: listener_pb2.Listener) -> list[str]:
    return [str(hcm.rds.route_config_name) for hcm in _connection_managers(listener) if hcm.HasField("rds")]


def routes_using(resources: Resources, cluster: str) -> tuple[str, ...]:
    """The route entries that send requests (or mirrors) to a cluster."""
    out = []
    for packed in resources.by_type.get(types.ROUTE, {}).values():
        for vh in as_message(packed).virtual_hosts:
            for route in routes_of(vh):
                action = route.route
                if (action.cluster == cluster
                        or any(w.name == cluster for w in action.weighted_clusters.clusters)
                        or any(m.cluster == cluster for m in action.request_mirror_policies)):
                    out.append(route.name)
    return tuple(dict.fromkeys(out))


def _scoped(listener: listener_pb2.Listener) -> bool:
    return any(hcm.HasField("scoped_routes") for hcm in _connection_managers(listener))


def _connection_managers(listener: listener_pb2.Listener) -> list[hcm_pb.HttpConnectionManager]:
    out = []
    for chain in listener.filter_chains:
        for f in chain.filters:
            if f.typed_config.type_url == HCM_TYPE:
                hcm = hcm_pb.HttpConnectionManager()
                f.typed_config.Unpack(hcm)
                out.append(hcm)
    return out


def _inline_routes(
    listener: listener_pb2.Listener, routes: route_pb2.RouteConfiguration | None
) -> listener_pb2.Listener:
    """The listener with its routes inline (Envoy validates a static bootstrap).
    A scoped table's connection manager takes the given routes as its one table."""
    out = listener_pb2.Listener()
    out.CopyFrom(listener)
    if routes is not None:
        # Units of one listener are checked side by side: names must differ, and so
        # must addresses (Envoy refuses a second listener on one without SO_REUSEPORT):
        # port 0 is never a duplicate, and nothing binds in validate mode.
        out.name = f"{listener.name}/{routes.name}"
        if out.address.HasField("socket_address"):
            out.address.socket_address.port_value = 0
    for chain in out.filter_chains:
        for f in chain.filters:
            if f.typed_config.type_url == HCM_TYPE:
                hcm = hcm_pb.HttpConnectionManager()
                f.typed_config.Unpack(hcm)
                if hcm.HasField("rds"):
                    rds = hcm.rds.route_config_name
                    hcm.route_config.CopyFrom(
                        routes if routes is not None and routes.name == rds
                        else route_pb2.RouteConfiguration(name=rds))
                elif hcm.HasField("scoped_routes"):
                    hcm.route_config.CopyFrom(routes if routes is not None else route_pb2.RouteConfiguration())
                f.typed_config.Pack(hcm)
    return out


def _linear(routes: route_pb2.RouteConfiguration) -> route_pb2.RouteConfiguration:
    """The same routes with each virtual host's matcher tree as a plain list, so
    route entries can be checked one by one (a route is valid or not wherever it
    sits; the tree holds some routes several times)."""
    if not any(vh.HasField("matcher") for vh in routes.virtual_hosts):
        return routes
    out = route_pb2.RouteConfiguration()
    out.CopyFrom(routes)
    for vh in out.virtual_hosts:
        if vh.HasField("matcher"):
            entries = routes_of(vh)
            vh.ClearField("matcher")
            vh.routes.extend(entries)
    return out


def _with_routes(unit: _Unit, keep: list[tuple[int, int]]) -> _Unit:
    """The same listener with only some of its route entries."""
    assert unit.routes is not None
    routes = route_pb2.RouteConfiguration()
    routes.CopyFrom(unit.routes)
    wanted: dict[int, set[int]] = {}
    for vi, ri in keep:
        wanted.setdefault(vi, set()).add(ri)
    for vi, vh in enumerate(routes.virtual_hosts):
        kept = [r for ri, r in enumerate(vh.routes) if ri in wanted.get(vi, set())]
        del vh.routes[:]
        vh.routes.extend(kept)
    return _Unit(unit.type_url, unit.name, listener=unit.listener, routes=routes)


def _static_cluster(
    cluster: cluster_pb2.Cluster, endpoints: endpoint_pb2.ClusterLoadAssignment | None
) -> cluster_pb2.Cluster:
    out = cluster_pb2.Cluster()
    out.CopyFrom(cluster)
    if out.type == cluster_pb2.Cluster.EDS:
        out.type = cluster_pb2.Cluster.STATIC
        out.ClearField("eds_cluster_config")
        out.load_assignment.CopyFrom(endpoints or endpoint_pb2.ClusterLoadAssignment())
        out.load_assignment.cluster_name = cluster.name
    return out


_BASE = _base()


def _clean_error(output: str) -> str:
    """Envoy's complaint without log prefixes, the file name or resource dumps."""
    lines = [line for line in output.splitlines() if line.strip()]
    text = lines[-1] if lines else output
    marker = "error initializing configuration"
    if marker in text:
        text = text.split(marker, 1)[1].split(":", 1)[-1].strip()
    elif "] " in text:
        text = text.rsplit("] ", 1)[-1]
    return text[:MAX_ERROR]
