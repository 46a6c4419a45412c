"""buffer → Envoy's buffer filter: whole request bodies up to a size, 413 beyond."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.buffer.v3 import buffer_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route

FILTER = "envoy.filters.http.buffer"


class Buffer(Feature):
    name = "buffer"
    order = 30

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if not listener.policy_filters:
            return
        # max_request_bytes is required here; every route that enables the filter sets its own.
        add_disabled_filter(hcm, FILTER, buffer_pb2.Buffer(max_request_bytes={"value": 1}))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if route.policy is not None and route.policy.buffer_max_bytes:
            enable_on_route(out, FILTER, buffer_pb2.BufferPerRoute(
                buffer=buffer_pb2.Buffer(max_request_bytes={"value": route.policy.buffer_max_bytes})))


register(Buffer())
