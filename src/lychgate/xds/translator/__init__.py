"""IR → Envoy resources for one Gateway's proxy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2

from lychgate import ir
from lychgate.xds import types

# Policy features register themselves on import (their `order` is the HTTP filter order).
from lychgate.xds.translator import (  # noqa: F401
    buffer,
    cors,
    ext_authz,
    ext_proc,
    inference,
    local_ratelimit,
    route_policy,
    transformation,
    waypoint,
)
from lychgate.xds.translator.cluster import envoy_cluster, load_assignment
from lychgate.xds.translator.features import FEATURES
from lychgate.xds.translator.listener import envoy_listeners
from lychgate.xds.translator.route import route_configuration
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


def build(gateway: ir.GatewayIR, cache: WireCache | None = None) -> Resources:
    """Envoy resources for a Gateway. A `cache` kept across calls serializes each
    unchanged virtual host and cluster only once."""
    cache = cache or WireCache()
    out = Resources(by_type={t: {} for t in (types.CLUSTER, types.ENDPOINT, types.LISTENER, types.ROUTE)})
    for listener in envoy_listeners(gateway):
        out.add(types.LISTENER, listener.name, listener)
    for http in gateway.listeners:
        out.add(types.ROUTE, http.name,
                route_configuration(http, cache, key=(gateway.namespace, gateway.name, http.name)))
    for cluster in gateway.clusters:
        out.add(types.CLUSTER, cluster.name,
                _cached(cache, cluster, "cluster", cluster_pb2.Cluster, envoy_cluster))
        out.add(types.ENDPOINT, cluster.name,
                _cached(cache, cluster, "endpoints", endpoint_pb2.ClusterLoadAssignment, load_assignment))
    for feature in FEATURES:
        for type_url, name, message in feature.resources(gateway):
            out.add(type_url, name, message)
    return out
