"""buffer → Envoy's buffer filter: whole request bodies up to a size, 413 beyond."""

from __future__ import annotations

from envoy.extensions.filters.http.buffer.v3 import buffer_pb2

from lychgate.xds.translator.features import register
from lychgate.xds.translator.policy_filters import PolicyFilter

FILTER = "envoy.filters.http.buffer"


class Buffer(PolicyFilter):
    name, filter, field = "buffer", FILTER, "buffer_max_bytes"
    order = 30

    def listener_config(self) -> object:
        # max_request_bytes is required here; every route that enables the filter sets its own.
        return buffer_pb2.Buffer(max_request_bytes={"value": 1})

    def route_config(self, value: int) -> object:
        return buffer_pb2.BufferPerRoute(buffer=buffer_pb2.Buffer(max_request_bytes={"value": value}))


register(Buffer())
