"""The feature registry: how an Envoy feature plugs into the xDS translator.

Each feature is one module that registers a Feature. The core translator
builds listeners, routes and clusters and then lets every feature patch them,
so adding a feature (ext_authz, CORS, rate limits, ...) never touches the core
loop. This is the shape of Envoy Gateway's xDS translator, in Python.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate import ir


class Feature:
    """Override what the feature needs; every hook defaults to doing nothing."""

    name = "feature"
    # Features run (and add HTTP filters) in this order, lowest first.
    order: float = 100

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        """Add HTTP filters or settings to a listener's connection manager."""

    def patch_listener(self, gateway: ir.GatewayIR, port: int, listener: listener_pb2.Listener) -> None:
        """Change the Envoy listener of a TCP port (all its filter chains)."""

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        """Change one Envoy route built from `route`."""

    def patch_weighted_cluster(
        self, backend: ir.WeightedCluster, out: route_pb.WeightedCluster.ClusterWeight
    ) -> None:
        """Change one backend of a weighted route."""

    def resources(self, gateway: ir.GatewayIR) -> Iterable[tuple[str, str, Any]]:
        """Extra (type_url, name, message) resources the feature needs."""
        return ()


FEATURES: list[Feature] = []


def register(feature: Feature) -> Feature:
    FEATURES.append(feature)
    FEATURES.sort(key=lambda f: f.order)  # stable: equal orders keep registration order
    return feature
