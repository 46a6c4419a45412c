"""compression → Envoy's gzip compressor filter, off by default in every listener
with policy filters and turned on per route; and its decompressor filter."""

from __future__ import annotations

from envoy.config.core.v3 import extension_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.compression.gzip.compressor.v3 import gzip_pb2 as gzip_compressor_pb2
from envoy.extensions.compression.gzip.decompressor.v3 import gzip_pb2 as gzip_decompressor_pb2
from envoy.extensions.filters.http.compressor.v3 import compressor_pb2
from envoy.extensions.filters.http.decompressor.v3 import decompressor_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import (
    add_disabled_filter,
    enable_on_route,
    pack,
    policies,
)

COMPRESSOR = "envoy.filters.http.compressor"
DECOMPRESSOR = "envoy.filters.http.decompressor"
# The textual types kgateway compresses.
CONTENT_TYPES = ("application/javascript", "application/json", "application/xhtml+xml", "image/svg+xml",
                 "text/css", "text/html", "text/plain", "text/xml")


def compressor() -> compressor_pb2.Compressor:
    out = compressor_pb2.Compressor(compressor_library=extension_pb2.TypedExtensionConfig(
        name="gzip", typed_config=pack(gzip_compressor_pb2.Gzip())))
    out.response_direction_config.common_config.content_type.extend(CONTENT_TYPES)
    # Requests are never compressed on the way to the backend.
    out.request_direction_config.common_config.enabled.default_value.value = False
    out.request_direction_config.common_config.enabled.runtime_key = "lychgate_request_compression"
    return out


def decompressor() -> decompressor_pb2.Decompressor:
    out = decompressor_pb2.Decompressor(decompressor_library=extension_pb2.TypedExtensionConfig(
        name="gzip", typed_config=pack(gzip_decompressor_pb2.Gzip())))
    out.response_direction_config.common_config.enabled.default_value.value = False
    out.response_direction_config.common_config.enabled.runtime_key = "lychgate_response_decompression"
    return out


class Compression(Feature):
    name = "compression"
    order = 25  # decompress before body-reading filters; compress what the backend answers

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if not listener.policy_filters:
            return
        # The decompressor has no per-route configuration: as in kgateway, a route
        # asking for it puts it in its listener, on for every gzip request body there.
        if any(p.request_decompression for p in policies(listener)):
            hcm.http_filters.append(hcm_pb.HttpFilter(name=DECOMPRESSOR, typed_config=pack(decompressor())))
        add_disabled_filter(hcm, COMPRESSOR, compressor())

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if route.policy is not None and route.policy.response_compression:
            # An empty override: the filter's own settings, switched on for this route.
            enable_on_route(out, COMPRESSOR, compressor_pb2.CompressorPerRoute(
                overrides=compressor_pb2.CompressorOverrides()))


register(Compression())
