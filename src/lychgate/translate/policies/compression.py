"""compression: responses compressed for clients whose `Accept-Encoding` accepts
one of the offered codecs (gzip by default; brotli and zstd on request; Envoy's
compressor filters negotiate), and request bodies with a known
`Content-Encoding` decompressed; `disable: {}` turns an inherited setting off."""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, Invalid


def _libraries(value: dict[str, Any], path: str) -> tuple[str, ...]:
    libraries = tuple(value.get("libraries") or ("Gzip",))
    if len(set(libraries)) != len(libraries):
        raise Invalid(f"{path}.libraries", "libraries must not contain duplicates")
    return libraries


class CompressionField(PolicyField):
    name, attr = "compression", "compression"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        out: dict[str, Any] = {"response_compression": None, "request_decompression": ()}
        response = value.get("responseCompression")
        if response is not None and "disable" not in response:
            out["response_compression"] = ir.ResponseCompression(
                libraries=_libraries(response, f"{path}.responseCompression"),
                min_content_length=response.get("minContentLengthBytes"),
                content_types=tuple(response.get("contentTypes") or ()))
        request = value.get("requestDecompression")
        if request is not None and "disable" not in request:
            out["request_decompression"] = _libraries(request, f"{path}.requestDecompression")
        return out


register(CompressionField())
