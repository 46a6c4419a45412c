"""buffer → Envoy's buffer filter: whole request bodies up to a size, 413 beyond.

A listener has one buffer filter (a route's setting reaches it by the filter's
name), off by default and turned on by the routes with a buffer policy. Its
place is kgateway's: by default after authentication, authorization and rate
limiting, so a request those refuse is refused before its body is waited for;
`filterStage` moves it, and when routes ask for different places the earliest
wins (the placement that enforces in most cases, whatever order the policies
come in).
"""

from __future__ import annotations

from collections.abc import Iterable

from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.buffer.v3 import buffer_pb2

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.filter_stage import SOURCES, Placed, Position, earliest
from lychgate.xds.translator.policy_filters import enable_on_route, policies

FILTER = "envoy.filters.http.buffer"
DEFAULT: Position = ("RateLimit", "After")


def _placed(listener: ir.HTTPListener) -> Iterable[Placed]:
    if not listener.policy_filters:
        return ()
    asked = {p.buffer_stage or DEFAULT for p in policies(listener) if p.buffer_max_bytes is not None}
    # max_request_bytes is required here; every route that enables the filter sets its own.
    return (Placed(earliest(asked or {DEFAULT}), FILTER, buffer_pb2.Buffer(max_request_bytes={"value": 1})),)


class Buffer(Feature):
    name = "buffer"

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        size = route.policy.buffer_max_bytes if route.policy is not None else None
        if size is not None:
            enable_on_route(out, FILTER, buffer_pb2.BufferPerRoute(
                buffer=buffer_pb2.Buffer(max_request_bytes={"value": size})))


SOURCES.append(_placed)
register(Buffer())
