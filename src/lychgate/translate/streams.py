"""TLSRoute, TCPRoute and UDPRoute → layer-4 filter chains, with their status.

These routes are few and cheap, so every pass translates them all (the
aggregate that makes HTTP routes incremental is not needed here). On a
TCP or UDP listener one route is served: the oldest, as the Gateway API's
conflict rule asks; TLSRoutes share a TLS listener by hostname (SNI).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.gateway import TCPRoute, TLSRoute, UDPRoute
from lychgate.store import Store
from lychgate.translate.aggregate import GatewayKey
from lychgate.translate.conditions import condition, resolved_refs
from lychgate.translate.listeners import ListenerState
from lychgate.translate.parents import (
    GatewayCtx,
    attach,
    find_parent,
    missing_parent,
    parent_status,
)
from lychgate.translate.routes import CompiledRoute, resolve_backend

L4Route = TLSRoute | TCPRoute | UDPRoute


@dataclass
class _Served:
    route: L4Route
    listener: ListenerState
    hosts: list[str]
    backends: tuple[ir.WeightedCluster, ...]


@dataclass
class Streams:
    status: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)
    attached: dict[tuple[GatewayKey, str], int] = field(default_factory=lambda: defaultdict(int))
    clusters: dict[GatewayKey, dict[str, ir.Cluster]] = field(default_factory=lambda: defaultdict(dict))
    served: dict[GatewayKey, list[_Served]] = field(default_factory=lambda: defaultdict(list))

    def listeners(self, gw: GatewayKey, address: str) -> tuple[ir.TCPListener | ir.UDPListener, ...]:
        out: list[ir.TCPListener | ir.UDPListener] = []
        claimed: set[tuple[int, str]] = set()  # (port, SNI name): first route wins
        taken: set[tuple[str, int]] = set()  # (transport, port) of TCP/UDP listeners
        for s in self.served.get(gw, []):
            spec = s.listener.spec
            name = f"{spec.protocol.lower()}-{spec.port}-{s.listener.id}"
            if spec.protocol == "TLS":
                names = tuple(h for h in s.hosts if (spec.port, h) not in claimed)
                claimed.update((spec.port, h) for h in names)
                if names:
                    out.append(ir.TCPListener(
                        name=f"{name}-{s.route.namespace}-{s.route.name}", address=address, port=spec.port,
                        backends=s.backends, server_names=tuple(h for h in names if h != "*"),
                        tls=s.listener.tls, sni=True))
            elif (spec.protocol, spec.port) not in taken:
                taken.add((spec.protocol, spec.port))
                if spec.protocol == "TCP":
                    out.append(ir.TCPListener(name=name, address=address, port=spec.port, backends=s.backends))
                else:
                    out.append(ir.UDPListener(name=name, address=address, port=spec.port, backends=s.backends))
        return tuple(out)


def translate_streams(store: Store, ctxs: dict[GatewayKey, GatewayCtx]) -> Streams:
    out = Streams()
    routes: list[L4Route] = [*store.list(TLSRoute), *store.list(TCPRoute), *store.list(UDPRoute)]
    for route in sorted(routes, key=lambda r: (r.created, r.namespace, r.name)):
        parents = []
        resolved: tuple[tuple[ir.WeightedCluster, ...], CompiledRoute] | None = None  # once per route
        for ref in route.spec.parent_refs:
            found = find_parent(store, route, ref, ctxs)
            if found is None:
                continue
            ctx, ns = found
            if ctx is None:
                parents.append(missing_parent(route, ref, ns))
                continue
            hostnames = list(route.spec.hostnames) if isinstance(route, TLSRoute) else None
            refused, attached = attach(store, route, ref, ctx, hostnames)
            if resolved is None:
                resolved = _backends(store, route)
            backends, compiled = resolved
            gen = route.generation
            conds = [refused or condition("Accepted", True, "Accepted",
                                          f"attached to {', '.join(l.name for l, _ in attached)}", gen),
                     resolved_refs(compiled.unresolved_reason, compiled.unresolved, gen)]
            parents.append(parent_status(route, ref, conds))
            gw_key = (ctx.gateway.namespace, ctx.gateway.name)
            for listener, hosts in attached:
                out.attached[(gw_key, listener.id)] += 1
                if listener.serving:
                    out.served[gw_key].append(_Served(route, listener, hosts, backends))
                    out.clusters[gw_key].update(compiled.clusters)
        if parents:
            out.status[route.key] = {"parents": parents}
    return out


def _backends(store: Store, route: L4Route) -> tuple[tuple[ir.WeightedCluster, ...], CompiledRoute]:
    """The route's weighted backends (a cluster of None: unresolved, its share refused)."""
    compiled = CompiledRoute()
    backends: list[ir.WeightedCluster] = []
    for ref in route.spec.rules[0].backend_refs:
        cluster = resolve_backend(store, route, ref, compiled).cluster
        if ref.weight:
            backends.append(ir.WeightedCluster(cluster.name if cluster else None, ref.weight))
    if isinstance(route, UDPRoute) and len(backends) > 1:
        merged = _merged(route, backends, compiled.clusters)
        compiled.clusters[merged.name] = merged
        backends = [ir.WeightedCluster(merged.name, 1)]
    return tuple(backends) or (ir.WeightedCluster(None, 1),), compiled


def _merged(route: UDPRoute, backends: list[ir.WeightedCluster], clusters: dict[str, ir.Cluster]) -> ir.Cluster:
    """Envoy's UDP proxy sends a session to one cluster; weights between Services
    become endpoint weights in one cluster holding all of them."""
    endpoints: list[ir.Endpoint] = []
    for b in backends:
        cluster = clusters.get(b.cluster or "")
        if cluster is None or not cluster.endpoints:
            continue
        share = max(1, b.weight * 1000 // len(cluster.endpoints))
        endpoints += [ir.Endpoint(e.address, e.port, e.ready, weight=share) for e in cluster.endpoints]
    return ir.Cluster(name=f"udproute/{route.namespace}/{route.name}", endpoints=tuple(endpoints))
