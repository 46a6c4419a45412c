"""IR → Envoy resources for one Gateway's proxy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lychgate import ir
from lychgate.xds import types

# Policy features register themselves on import (their `order` is the HTTP filter order).
from lychgate.xds.translator import (  # noqa: F401
    buffer,
    cors,
    ext_authz,
    ext_proc,
    local_ratelimit,
    route_policy,
    transformation,
)
from lychgate.xds.translator.cluster import envoy_cluster, load_assignment
from lychgate.xds.translator.features import FEATURES
from lychgate.xds.translator.listener import envoy_listener
from lychgate.xds.translator.route import VirtualHostCache, route_configuration
from lychgate.xds.translator.wire import as_message


@dataclass
class Resources:
    """Envoy messages by type URL and resource name."""

    by_type: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, type_url: str, name: str, message: Any) -> None:
        self.by_type.setdefault(type_url, {})[name] = message

    def message(self, type_url: str, name: str) -> Any:
        """The resource as a protobuf message (some are kept as bytes)."""
        return as_message(self.by_type[type_url][name])


def build(gateway: ir.GatewayIR, hosts: VirtualHostCache | None = None) -> Resources:
    """Envoy resources for a Gateway; `hosts` keeps serialized virtual hosts across calls."""
    out = Resources(by_type={t: {} for t in (types.CLUSTER, types.ENDPOINT, types.LISTENER, types.ROUTE)})
    for listener in gateway.listeners:
        out.add(types.LISTENER, listener.name, envoy_listener(listener))
        out.add(types.ROUTE, listener.name, route_configuration(listener, hosts))
    for cluster in gateway.clusters:
        out.add(types.CLUSTER, cluster.name, envoy_cluster(cluster))
        out.add(types.ENDPOINT, cluster.name, load_assignment(cluster))
    for feature in FEATURES:
        for type_url, name, message in feature.resources(gateway):
            out.add(type_url, name, message)
    return out
