"""IR → Envoy resources for one Gateway's proxy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2

from lychgate import ir
from lychgate.identity import unchanged_ends
from lychgate.xds import types

# Policy features register themselves on import (their `order` is the HTTP filter order).
from lychgate.xds.translator import (  # noqa: F401
    access_log,
    acl,
    ai_gateway,
    api_key_auth,
    aws_lambda,
    backend_cluster,
    basic_auth,
    buffer,
    chain_routes,
    cluster_policy,
    compression,
    cors,
    csrf,
    direct_response,
    edge,
    ext_authz,
    ext_proc,
    fault,
    gcp_authn,
    grpc_stats,
    header_stage,
    http_upgrade,
    inference,
    jwt_authn,
    listener_settings,
    local_ratelimit,
    local_reply,
    mcp_gateway,
    oauth2,
    priority_groups,
    rate_limit_quota,
    ratelimit,
    rbac,
    request_mirror,
    rewrite,
    route_policy,
    route_stats,
    scoped,
    stateful_session,
    tracing,
    transformation,
    tunnel,
    waypoint,
)
from lychgate.xds.translator.cluster import envoy_cluster, load_assignment
from lychgate.xds.translator.features import FEATURES
from lychgate.xds.translator.listener import envoy_listeners
from lychgate.xds.translator.route import route_configuration, route_table
from lychgate.xds.translator.wire import RawMessage, WireCache, as_message


@dataclass
class Resources:
    """Envoy messages by type URL and resource name."""

    by_type: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, type_url: str, name: str, message: Any) -> None:
        self.by_type.setdefault(type_url, {})[name] = message

    def message(self, type_url: str, name: str) -> Any:
        """The resource as a protobuf message (some are kept as bytes)."""
        return as_message(self.by_type[type_url][name])


def _cached(cache: WireCache, obj: object, kind: str, cls: Any, make: Any) -> RawMessage:
    data, digest = cache.get(obj, kind, lambda o: make(o).SerializeToString(deterministic=True))
    return RawMessage(cls, data, digest.hex())


def _add_scopes(out: Resources, http: ir.HTTPListener, cache: WireCache, key: tuple[str, str, str],
                threshold: int, native_key: bool) -> int:
    """Add a scoped route table's scopes and their RouteConfigurations, and
    return the bits of its scope key; 0 when the table stays one
    RouteConfiguration. Envoy finds a request's scope before it looks the route
    up, so the route's own filters (policies, endpoint pickers) and upgrades
    apply in a split table as in a whole one."""
    table = cache.tables.get(key)
    floor = threshold if table is None or not table.active else scoped.keep_below(threshold)
    if table is not None:
        table.update(http.virtual_hosts)  # its counts follow the hosts that changed (counting all: 1 ms at 3,000)
        routes = table.exact_routes + table.shared_routes
    else:
        routes = sum(len(vh.routes) for vh in http.virtual_hosts)
    if threshold <= 0 or len(http.virtual_hosts) < scoped.MIN_HOSTS or routes < floor:
        cache.tables.pop(key, None)
        return 0
    if table is None or table.native != native_key:  # (the key decides the hash: buckets differ)
        table = cache.tables[key] = scoped.ScopedTable(native_key)
        table.update(http.virtual_hosts)
    cache.keep(len(http.virtual_hosts))
    if not table.scoped(threshold):
        return 0
    base = chain_routes.routes_name(http)
    for i in table.stale_scopes():
        name = scoped.scope_name(base, i)
        table.built[name] = route_table(name, table.scope(i), cache, (*key, i), remove_headers=(scoped.SCOPE_HEADER,))
    # (At C speed: a table of 256 scopes is 512 resources, and a change rebuilds one.)
    out.by_type.setdefault(types.ROUTE, {}).update(table.built)
    out.by_type.setdefault(types.SCOPED_ROUTE, {}).update(scoped.scope_resources(base, table.bits))
    return table.bits


def _cluster_resources(gateway: ir.GatewayIR, cache: WireCache) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Gateway's Clusters and ClusterLoadAssignments by name. The clusters at both
    ends that are the very objects of its last build keep the resources built then
    (found at C speed), only those between are looked up: at 3,000 clusters, looking
    each one up again took 12 ms of every change to one route."""
    ref = f"{gateway.namespace}/{gateway.name}"
    kept = cache.clusters.get(ref)
    if kept is None:
        old: tuple[ir.Cluster, ...] = ()
        clusters: dict[str, Any] = {}
        endpoints: dict[str, Any] = {}
        head = tail = 0
    else:
        old, clusters, endpoints = kept
        head, tail = unchanged_ends(gateway.clusters, old)
        for cluster in old[head:len(old) - tail]:
            clusters.pop(cluster.name, None)
            endpoints.pop(cluster.name, None)
    cache.keep(2 * (head + tail))
    for cluster in gateway.clusters[head:len(gateway.clusters) - tail]:
        clusters[cluster.name] = _cached(cache, cluster, "cluster", cluster_pb2.Cluster, envoy_cluster)
        if cluster.discovery == "eds":
            endpoints[cluster.name] = _cached(cache, cluster, "endpoints", endpoint_pb2.ClusterLoadAssignment,
                                              load_assignment)
    # Its own dicts, changed in place next time: the snapshot gets copies.
    cache.clusters[ref] = (tuple(gateway.clusters), clusters, endpoints)
    return clusters, endpoints


def build(gateway: ir.GatewayIR, cache: WireCache | None = None,
          scope_threshold: int = 0, native_key: bool = False) -> Resources:
    """Envoy resources for a Gateway. A `cache` kept across calls serializes each
    unchanged virtual host and cluster only once. Route tables with at least
    `scope_threshold` routes are split into scopes (scoped.py; 0: never), keyed
    by lychgate's Envoy module with `native_key` (scoped.native_key), else CEL."""
    cache = cache or WireCache()
    out = Resources(by_type={t: {} for t in (types.CLUSTER, types.ENDPOINT, types.LISTENER, types.ROUTE)})
    scoped_tables: dict[str, int] = {}  # table -> bits of its scope key
    for http in gateway.listeners:
        # Keyed by the table's name, which follows the listener's filter chain
        # (chain_routes.py): what was built under the other name is not reused.
        key = (gateway.namespace, gateway.name, chain_routes.routes_name(http))
        bits = _add_scopes(out, http, cache, key, scope_threshold, native_key)
        if bits:
            scoped_tables[http.name] = bits
        else:
            out.add(types.ROUTE, chain_routes.routes_name(http), route_configuration(http, cache, key))
        stand_in = chain_routes.other_routes_name(http)
        out.add(types.ROUTE, stand_in, chain_routes.stand_in(stand_in))
        cache.forget((gateway.namespace, gateway.name, stand_in))
    for listener in envoy_listeners(gateway, scoped_tables, native_key):
        out.add(types.LISTENER, listener.name, listener)
    clusters, endpoints = _cluster_resources(gateway, cache)
    out.by_type[types.CLUSTER].update(clusters)
    out.by_type[types.ENDPOINT].update(endpoints)
    if gateway.ai_extension_port:  # AI Backends call the AI extension beside the proxy
        out.add(types.CLUSTER, ai_gateway.EXTENSION_CLUSTER, ai_gateway.extension_cluster(gateway.ai_extension_port))
    for feature in FEATURES:
        for type_url, name, message in feature.resources(gateway):
            out.add(type_url, name, message)
    return out
