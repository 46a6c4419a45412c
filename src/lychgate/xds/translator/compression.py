"""compression → Envoy's compressor filters (one per codec and settings), off by
default, turned on per route; and its decompressor filters.

Every listener with policy filters has the default gzip compressor, off; a
route asking for other codecs or settings brings compressors of its own into
its listener. When several are on for a route, Envoy picks the codec by the
client's `Accept-Encoding` (highest quality, then filter order). The
decompressor has no per-route switch: as in kgateway, a route asking for it puts
it in its listener, on for every request body in that codec there.
"""

from __future__ import annotations

import hashlib

from envoy.config.core.v3 import extension_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.compression.brotli.compressor.v3 import brotli_pb2 as brotli_compressor_pb2
from envoy.extensions.compression.brotli.decompressor.v3 import (
    brotli_pb2 as brotli_decompressor_pb2,
)
from envoy.extensions.compression.gzip.compressor.v3 import gzip_pb2 as gzip_compressor_pb2
from envoy.extensions.compression.gzip.decompressor.v3 import gzip_pb2 as gzip_decompressor_pb2
from envoy.extensions.compression.zstd.compressor.v3 import zstd_pb2 as zstd_compressor_pb2
from envoy.extensions.compression.zstd.decompressor.v3 import zstd_pb2 as zstd_decompressor_pb2
from envoy.extensions.filters.http.compressor.v3 import compressor_pb2
from envoy.extensions.filters.http.decompressor.v3 import decompressor_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.type.matcher.v3 import string_pb2
from google.protobuf import unknown_fields

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import (
    add_disabled_filter,
    enable_on_route,
    pack,
    policies,
)
from lychgate.xds.translator.wire import repeated_field

COMPRESSOR = "envoy.filters.http.compressor"
DECOMPRESSOR = "envoy.filters.http.decompressor"
# The textual types kgateway compresses.
CONTENT_TYPES = ("application/javascript", "application/json", "application/xhtml+xml", "image/svg+xml",
                 "text/css", "text/html", "text/plain", "text/xml")
_COMPRESSORS = {"Gzip": ("gzip", gzip_compressor_pb2.Gzip), "Brotli": ("brotli", brotli_compressor_pb2.Brotli),
                "Zstd": ("zstd", zstd_compressor_pb2.Zstd)}
# Named as Envoy names the extensions, as kgateway does: the name is part of the filter's
# stats (http.<listener>.decompressor.envoy.compression.gzip.decompressor.gzip.request.decompressed).
_DECOMPRESSORS = {library: (f"envoy.compression.{library.lower()}.decompressor", message) for library, message in
                  (("Gzip", gzip_decompressor_pb2.Gzip), ("Brotli", brotli_decompressor_pb2.Brotli),
                   ("Zstd", zstd_decompressor_pb2.Zstd))}
DEFAULT = ir.ResponseCompression()

Setting = tuple[str, int | None, tuple[str, ...]]  # codec, min length, content types


def _settings(c: ir.ResponseCompression) -> list[Setting]:
    return [(library, c.min_content_length, c.content_types) for library in c.libraries]


def filter_name(setting: Setting) -> str:
    """The default gzip compressor keeps the plain name; others say codec and settings."""
    library, min_length, types = setting
    if setting == ("Gzip", None, ()):
        return COMPRESSOR
    suffix = "" if min_length is None and not types else "/" + hashlib.sha256(
        repr((min_length, types)).encode()).hexdigest()[:8]
    return f"{COMPRESSOR}/{library.lower()}{suffix}"


def compressor(setting: Setting) -> compressor_pb2.Compressor:
    library, min_length, types = setting
    name, message = _COMPRESSORS[library]
    out = compressor_pb2.Compressor(compressor_library=extension_pb2.TypedExtensionConfig(
        name=name, typed_config=pack(message())))
    common = out.response_direction_config.common_config
    common.MergeFromString(_content_type_matchers(types or CONTENT_TYPES))
    if min_length is not None:
        common.min_content_length.value = min_length
    # Requests are never compressed on the way to the backend.
    out.request_direction_config.common_config.enabled.default_value.value = False
    out.request_direction_config.common_config.enabled.runtime_key = "lychgate_request_compression"
    return out


def _content_type_matchers(types: tuple[str, ...]) -> bytes:
    """`common_config.content_type_matcher` (field 4: one exact StringMatcher per type) as wire bytes:
    Envoy 1.40 deprecates `content_type` for it, and the xds-protos lychgate builds with predate it (the
    message keeps it as an unknown field and serializes it as written; JSON dumps leave it out)."""
    return repeated_field(4, [string_pb2.StringMatcher(exact=t).SerializeToString() for t in types])


def content_type_matchers(compressor: compressor_pb2.Compressor) -> list[dict[str, str]]:
    """The response `content_type_matcher` list written above, as Envoy's JSON dump shows it
    (the protobuf JSON printer cannot: to it the field is unknown)."""
    common = compressor.response_direction_config.common_config
    return [{"exact": string_pb2.StringMatcher.FromString(field.data).exact}
            for field in unknown_fields.UnknownFieldSet(common) if field.field_number == 4]


def decompressor(library: str) -> decompressor_pb2.Decompressor:
    name, message = _DECOMPRESSORS[library]
    out = decompressor_pb2.Decompressor(decompressor_library=extension_pb2.TypedExtensionConfig(
        name=name, typed_config=pack(message())))
    out.response_direction_config.common_config.enabled.default_value.value = False
    out.response_direction_config.common_config.enabled.runtime_key = "lychgate_response_decompression"
    return out


class Compression(Feature):
    name = "compression"
    order = 25  # decompress before body-reading filters; compress what the backend answers

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if not listener.policy_filters:
            return
        used = list(policies(listener))
        for library in sorted({lib for p in used for lib in p.request_decompression}):
            name = DECOMPRESSOR if library == "Gzip" else f"{DECOMPRESSOR}/{library.lower()}"
            hcm.http_filters.append(hcm_pb.HttpFilter(name=name, typed_config=pack(decompressor(library))))
        settings = dict.fromkeys([*_settings(DEFAULT), *(s for p in used if p.response_compression is not None
                                                          for s in _settings(p.response_compression))])
        for setting in settings:
            add_disabled_filter(hcm, filter_name(setting), compressor(setting))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if route.policy is None or route.policy.response_compression is None:
            return
        for setting in _settings(route.policy.response_compression):
            # An empty override: the filter's own settings, switched on for this route.
            enable_on_route(out, filter_name(setting), compressor_pb2.CompressorPerRoute(
                overrides=compressor_pb2.CompressorOverrides()))


register(Compression())
