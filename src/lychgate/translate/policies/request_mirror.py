"""requestMirror: the Host header of the copies a route's RequestMirror filters send.

kgateway's shape: `disableShadowHostSuffixAppend` (Envoy names a copy's Host
"<host>-shadow" unless this is true) and `hostRewriteLiteral` (the copies'
Host, a port included if the mirror backend needs one). A route without
RequestMirror filters has nothing for it to change.
"""

from __future__ import annotations

import re
from typing import Any

from lychgate import ir
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, Invalid

# A DNS name, an IPv4 address or a bracketed IPv6 address, with an optional port.
_HOST = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*"
                   r"|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$")


class RequestMirrorField(PolicyField):
    name, attr = "requestMirror", "request_mirror"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        host = value.get("hostRewriteLiteral")
        if host is not None and not _HOST.match(host):
            raise Invalid(f"{path}.hostRewriteLiteral", f"{host!r} is not a host name or address (with an optional port)")
        return {"request_mirror": ir.RequestMirror(keep_host=value.get("disableShadowHostSuffixAppend"), host=host)}


register(RequestMirrorField())
