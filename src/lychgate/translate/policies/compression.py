"""compression: gzip responses for clients that send `Accept-Encoding: gzip`
(Envoy's compressor filter), and gunzip request bodies sent with
`Content-Encoding: gzip` (its decompressor filter); `disable: {}` turns an
inherited setting off."""

from __future__ import annotations

from typing import Any

from lychgate.translate.policies.common import CompileContext
from lychgate.translate.policies.fields import PolicyField, register


def _toggle(value: dict[str, Any] | None) -> bool | None:
    return None if value is None else "disable" not in value


class CompressionField(PolicyField):
    name, attr = "compression", "compression"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        return {"response_compression": _toggle(value.get("responseCompression")),
                "request_decompression": _toggle(value.get("requestDecompression"))}


register(CompressionField())
