"""What the attached routes add up to, per Gateway, kept from pass to pass.

A full pass adds every route; after that, a pass that only saw routes,
Services, EndpointSlices, ReferenceGrants or policies change removes and
re-adds just the routes those changes can reach (found through what each route
read), and rebuilds just the virtual hosts they touch: those of the changed
routes, and those under the targets of the TrafficPolicies that changed (the
PolicyIndex kept here says which). At 10,000 routes one changed route or
route policy then costs one route's work instead of ten thousand.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.gateway import GRPCRoute, HTTPRoute
from lychgate.store.store import Read
from lychgate.translate.cluster_users import ClusterUsers
from lychgate.translate.delegation_cache import SubtreeCache
from lychgate.translate.policies import PolicyIndex, Target
from lychgate.translate.status_pool import StatusPool

GatewayKey = tuple[str, str]
AnyRoute = HTTPRoute | GRPCRoute
# (gateway, route table, hostname); a route table is one RouteConfiguration:
# "http-80" for all plain HTTP listeners of a port, "https-443-<listener>" for
# each HTTPS listener.
VHostKey = tuple[GatewayKey, str, str]
Entry = tuple[AnyRoute, ir.Route, str]  # route, one of its IR routes, the listener it came through

# Kinds whose changes reach only the routes that read them; any other change
# (a Gateway, a class, a namespace's labels, a Secret, GatewayParameters) means a full pass.
ROUTE_LEVEL_KINDS = frozenset({"HTTPRoute", "GRPCRoute", "Service", "EndpointSlice", "ReferenceGrant",
                               "InferencePool", "Pod", "ConfigMap",
                               # What a route's backends and filters read (their absence too: Store.count).
                               "Backend", "BackendConfigPolicy", "BackendTLSPolicy", "DirectResponse",
                               # Redone on every pass, and reaching no HTTP route: layer-4 routes,
                               # listener policies (applied to each pass's listeners).
                               "TLSRoute", "TCPRoute", "UDPRoute", "ListenerPolicy", "HTTPListenerPolicy"})
# "There is no object of this kind" (Store.count), which every backendRef asks of
# these: a set holding every route per token held 1.4 MiB at 5,000 routes. Their readers
# are counted instead, and the first object of the kind re-adds every route.
WIDE_READS: dict[Read, Read] = {t: t for t in (("list", ("BackendTLSPolicy", None)),
                                               ("list", ("BackendConfigPolicy", None)))}
# Kinds whose changes reach routes through the policy targets (PolicyIndex.refresh).
POLICY_KINDS = frozenset({"TrafficPolicy", "GatewayExtension"})
# Kinds the aggregate holds (the layer-4 routes are few and redone every pass).
AGGREGATED_KINDS = frozenset({"HTTPRoute", "GRPCRoute"})


@dataclass(frozen=True, slots=True)  # one per route: a dict each held 0.5 MiB at 5,000 routes
class Contribution:
    """One route's share: where it attaches, what it routes, what status it has."""

    # (gateway, listener name, route table, hostnames)
    attachments: tuple[tuple[GatewayKey, str, str, tuple[str, ...]], ...]
    routes: tuple[ir.Route, ...]
    clusters: tuple[ir.Cluster, ...]
    status: dict[str, Any] | None
    # Status parent entries for the child HTTPRoutes it delegates to (translate/delegation.py)
    delegated: tuple[tuple[ObjectKey, dict[str, Any]], ...] = ()


@dataclass
class Aggregate:
    revision: int | None = None  # store revision of the last pass; None: start over
    signature: Any = None  # inputs outside the store that every route depends on
    routes: dict[ObjectKey, tuple[AnyRoute, Contribution]] = field(default_factory=dict)
    readers: dict[Read, set[ObjectKey]] = field(default_factory=lambda: defaultdict(set))
    # What each route read, its tokens the ones kept here (`tokens`, each token read by any
    # route, as itself): the store makes a new token at every read, so 5,000 routes held
    # 5,000 equal ("list", ("BackendTLSPolicy", None)) tuples, and each route a frozenset.
    reads: dict[ObjectKey, tuple[Read, ...]] = field(default_factory=dict)
    tokens: dict[Read, Read] = field(default_factory=dict)
    wide: dict[Read, int] = field(default_factory=dict)  # how many routes read each of WIDE_READS
    # The routes of each virtual host, in the order they came: one route's key as itself
    # (most hosts have one), more as a dict used as an ordered set. Their entries are built
    # from `routes` when the host is: a dict and a list of (route, ir.Route, listener) per
    # route held 2.4 MiB at 5,000 routes.
    buckets: dict[VHostKey, ObjectKey | dict[ObjectKey, None]] = field(default_factory=dict)
    hosts: dict[tuple[GatewayKey, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    listener_routes: dict[tuple[GatewayKey, str], set[ObjectKey]] = field(default_factory=lambda: defaultdict(set))
    cluster_users: dict[GatewayKey, ClusterUsers] = field(default_factory=lambda: defaultdict(ClusterUsers))
    statuses: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)
    delegated: dict[ObjectKey, tuple[tuple[ObjectKey, dict[str, Any]], ...]] = field(default_factory=dict)
    dirty: set[VHostKey] = field(default_factory=set)
    # The virtual hosts of each (gateway, route table) in host order, kept in
    # step with the buckets: a host that comes or goes is inserted or deleted in
    # place, so a pass never walks the hosts it did not touch.
    tables: dict[tuple[GatewayKey, str], RouteTable] = field(default_factory=dict)
    requested: set[tuple[GatewayKey, str]] = field(default_factory=set)  # tables asked for this pass
    policies: PolicyIndex = field(default_factory=PolicyIndex)  # kept with the routes it resolved
    subtrees: SubtreeCache = field(default_factory=SubtreeCache)  # delegated children, compiled
    status_pool: StatusPool = field(default_factory=StatusPool)  # equal route statuses, shared
    # The Cluster of each name last seen, which routes resolving to an equal one share:
    # each route resolving a Service builds its own Cluster, endpoints and all.
    cluster_pool: dict[str, ir.Cluster] = field(default_factory=dict)
    # (namespace, name) of each Gateway routes attach to, one tuple each: every route's
    # attachments hold it (starting over on a full pass, as a Gateway change brings).
    gateway_keys: dict[GatewayKey, GatewayKey] = field(default_factory=dict)

    def reset(self) -> None:
        fresh = Aggregate()
        self.__dict__.update(fresh.__dict__)

    def affected(self, changes: Iterable[Read]) -> set[ObjectKey]:
        """Routes that changed themselves or read something that changed."""
        out: set[ObjectKey] = set()
        every = False  # a change read by every route (WIDE_READS)
        for what, ident in changes:
            if what == "key":
                key: ObjectKey = ident  # type: ignore[assignment]
                if key.kind in AGGREGATED_KINDS:
                    out.add(key)
                out |= self.readers.get(("key", key), set())
                out |= self.readers.get(("list", (key.kind, key.namespace)), set())
                out |= self.readers.get(("list", (key.kind, None)), set())
                every = every or ("list", (key.kind, None)) in self.wide
            else:
                out |= self.readers.get((what, ident), set())
                every = every or (what, ident) in self.wide
        return out | self.routes.keys() if every else out

    def touch_targets(self, targets: Iterable[Target]) -> None:
        """Mark dirty the virtual hosts that serve route rules under these policy targets
        (a Gateway or one of its listeners: all of the Gateway's; a ListenerSet: the routes
        attached through it)."""
        gateways: set[GatewayKey] = set()
        for t in targets:
            if t.kind == "Gateway":
                gateways.add((t.namespace, t.name))
            elif t.kind == "ListenerSet":
                self._touch_listener_set(t.namespace, t.name)
            else:
                key = ObjectKey(t.kind, t.namespace, t.name)
                # A delegated child is served under its parents' virtual hosts.
                for route in [key, *(p for p, entries in self.delegated.items() if any(c == key for c, _ in entries))]:
                    if (entry := self.routes.get(route)) is not None:
                        for gw, _, table, names in entry[1].attachments:
                            self.dirty.update((gw, table, host) for host in names)
        if gateways:
            for (gw, table), served in self.hosts.items():
                if gw in gateways:
                    self.dirty.update((gw, table, host) for host in served)

    def _touch_listener_set(self, namespace: str, name: str) -> None:
        """The virtual hosts of the routes attached through a ListenerSet's listeners (their
        ids are "namespace/set/listener", ListenerState.id)."""
        prefix = f"{namespace}/{name}/"
        for (gw, listener), keys in self.listener_routes.items():
            if not listener.startswith(prefix):
                continue
            for key in keys:
                if (entry := self.routes.get(key)) is not None:
                    self.dirty.update((g, table, host) for g, through, table, names in entry[1].attachments
                                      if g == gw and through == listener for host in names)

    def remove(self, key: ObjectKey) -> None:
        old = self.routes.pop(key, None)
        for token in self.reads.pop(key, ()):
            if token in WIDE_READS:
                if (left := self.wide.get(token, 0) - 1) > 0:
                    self.wide[token] = left
                else:
                    self.wide.pop(token, None)
                continue
            readers = self.readers.get(token)
            if readers is not None:
                readers.discard(key)
                if not readers:  # routes come and go under new names: keep no empty entries
                    del self.readers[token], self.tokens[token]
        self.statuses.pop(key, None)
        self.delegated.pop(key, None)
        if old is None:
            return
        _, contribution = old
        for gw, listener, table, hosts in contribution.attachments:
            self.listener_routes[(gw, listener)].discard(key)
            for host in hosts:
                vkey = (gw, table, host)
                bucket = self.buckets.get(vkey)
                if bucket is None:
                    continue
                if isinstance(bucket, dict):
                    if key not in bucket:
                        continue
                    del bucket[key]
                    self.dirty.add(vkey)
                    if len(bucket) == 1:  # back to a key of its own
                        self.buckets[vkey] = next(iter(bucket))
                elif bucket == key:
                    self.dirty.add(vkey)
                    del self.buckets[vkey]
                    self.hosts[(gw, table)].discard(host)
                    if (built := self.tables.get((gw, table))) is not None:
                        built.remove(host)
            users = self.cluster_users[gw]
            for cluster in contribution.clusters:
                users.remove(key, cluster.name)

    def add(self, key: ObjectKey, route: AnyRoute, contribution: Contribution, reads: Iterable[Read]) -> None:
        self.routes[key] = (route, contribution)
        self.reads[key] = kept = tuple(map(self._token, reads))
        for token in kept:
            if token in WIDE_READS:
                self.wide[token] = self.wide.get(token, 0) + 1
            else:
                self.readers[token].add(key)
        if contribution.status is not None:
            self.statuses[key] = contribution.status
        if contribution.delegated:
            self.delegated[key] = contribution.delegated
        for gw, listener, table, hosts in contribution.attachments:
            self.listener_routes[(gw, listener)].add(key)
            for host in hosts:
                vkey = (gw, table, host)
                bucket = self.buckets.get(vkey)
                if bucket is None:
                    self.buckets[vkey] = key
                elif isinstance(bucket, dict):
                    bucket[key] = None
                elif bucket != key:
                    self.buckets[vkey] = {bucket: None, key: None}
                if host not in self.hosts[(gw, table)]:
                    self.hosts[(gw, table)].add(host)
                    if (built := self.tables.get((gw, table))) is not None:
                        built.insert(host)
                self.dirty.add(vkey)
            users = self.cluster_users[gw]
            for cluster in contribution.clusters:
                users.add(key, cluster)

    def gateway_key(self, namespace: str, name: str) -> GatewayKey:
        key = (namespace, name)
        return self.gateway_keys.setdefault(key, key)

    def shared_cluster(self, cluster: ir.Cluster) -> ir.Cluster:
        """`cluster`, or an equal one of the same name a route holds already."""
        kept = self.cluster_pool.get(cluster.name)
        if kept is not None and (kept is cluster or kept == cluster):
            return kept
        self.cluster_pool[cluster.name] = cluster
        return cluster

    def _token(self, token: Read) -> Read:
        kept = WIDE_READS.get(token) or self.tokens.get(token)
        if kept is None:
            kept = self.tokens[token] = token
        return kept

    def virtual_hosts(
        self, gw: GatewayKey, table: str, build: Callable[[str, str, list[Entry]], ir.VirtualHost]
    ) -> list[ir.VirtualHost]:
        """The virtual hosts of a route table, rebuilding only the touched ones."""
        self.requested.add((gw, table))
        built = self.tables.get((gw, table))
        if built is None:
            built = self.tables[(gw, table)] = RouteTable(sorted(self.hosts.get((gw, table), ())))
            touched: Iterable[str] = built.hosts
        else:
            touched = [host for g, t, host in self.dirty if g == gw and t == table and host in self.hosts[(gw, table)]]
        for host in touched:
            built.put(host, build(table, host, self.entries(gw, table, host)))
        return built.vhosts  # type: ignore[return-value]  # every slot is filled now

    def entries(self, gw: GatewayKey, table: str, host: str) -> list[Entry]:
        """(route, one of its IR routes, the listener it came through) for each route of a
        virtual host, in the order the routes came."""
        bucket = self.buckets[(gw, table, host)]
        out: list[Entry] = []
        for key in (bucket if isinstance(bucket, dict) else (bucket,)):
            route, contribution = self.routes[key]
            for g, listener, t, hosts in contribution.attachments:
                if t == table and g == gw and host in hosts:
                    out.extend((route, r, listener) for r in contribution.routes)
        return out

    def route_statuses(self) -> dict[ObjectKey, dict[str, Any]]:
        """Each route's status, with the parent entries its delegating parents wrote
        for it (a child route delegated to has them beside its own Gateway parents)."""
        if not self.delegated:
            return self.statuses
        out = dict(self.statuses)
        for entries in self.delegated.values():
            for child, entry in entries:
                status = out.get(child) or {}
                out[child] = {**status, "parents": [*status.get("parents", []), entry]}
        return out

    def drop_unrequested(self) -> None:
        """After the tables of a pass are built, before policy status is written: a table
        no listener asked for (its Gateway has no address, say) serves nothing, and may
        miss changes: it is built afresh when asked again."""
        dropped = self.tables.keys() - self.requested
        for key in dropped:
            del self.tables[key]
        if dropped:
            self.policies.ledger.release_where(lambda owner: owner[:2] not in dropped)

    def settle(self, revision: int) -> None:
        """End of a pass: everything is built for `revision`."""
        self.requested.clear()
        self.dirty.clear()
        self.revision = revision
        # Names no route uses any more: let their Clusters go once they are as many as the rest.
        if len(self.cluster_pool) > 64 and len(self.cluster_pool) > 2 * sum(len(u.users) for u in self.cluster_users.values()):
            self.cluster_pool = {name: c for users in self.cluster_users.values() for name, c in users.served.items()}


class RouteTable:
    """The hosts of one route table in sorted order, and the virtual host built
    for each (None until the pass that inserted the host builds it)."""

    __slots__ = ("hosts", "vhosts")

    def __init__(self, hosts: list[str]) -> None:
        self.hosts = hosts
        self.vhosts: list[ir.VirtualHost | None] = [None] * len(hosts)

    def insert(self, host: str) -> None:
        at = bisect.bisect_left(self.hosts, host)
        self.hosts.insert(at, host)
        self.vhosts.insert(at, None)

    def remove(self, host: str) -> None:
        at = bisect.bisect_left(self.hosts, host)
        del self.hosts[at]
        del self.vhosts[at]

    def put(self, host: str, vhost: ir.VirtualHost) -> None:
        self.vhosts[bisect.bisect_left(self.hosts, host)] = vhost
