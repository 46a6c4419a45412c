"""cors: answer CORS preflights and decorate responses (Envoy's cors filter)."""

from __future__ import annotations

from typing import Any

from lychgate import envoy_limits, ir
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, Invalid, envoy_check, header_name

_METHODS = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "*"}


class CorsField(PolicyField):
    name, attr = "cors", "cors"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if "disable" in value:
            return {"cors": None}
        origins = value.get("allowOrigins") or []
        for i, origin in enumerate(origins):
            if not envoy_limits.ORIGIN.match(origin):
                raise Invalid(f"{path}.allowOrigins[{i}]",
                              f"{origin!r} is not an origin like https://example.com, https://*.example.com, "
                              "https://a.b.* or *")
            if "*" in origin and origin != "*":
                envoy_check(envoy_limits.regex, envoy_limits.wildcard_origin_regex(origin), f"{path}.allowOrigins[{i}]")
        if not origins:
            raise Invalid(f"{path}.allowOrigins", "at least one origin is required")
        methods = value.get("allowMethods") or []
        for i, method in enumerate(methods):
            if method not in _METHODS:
                raise Invalid(f"{path}.allowMethods[{i}]", f"{method!r} is not an HTTP method or *")
        for attr in ("allowHeaders", "exposeHeaders"):
            for i, name in enumerate(value.get(attr) or []):
                if name != "*":
                    header_name(name, f"{path}.{attr}[{i}]")
        if value.get("allowCredentials") and "*" in origins:
            raise Invalid(f"{path}.allowCredentials", "cannot be true when allowOrigins contains *")
        return {"cors": ir.Cors(
            allow_origins=tuple(origins), allow_methods=tuple(methods),
            allow_headers=tuple(value.get("allowHeaders") or []),
            expose_headers=tuple(value.get("exposeHeaders") or []),
            max_age_s=value.get("maxAge"), allow_credentials=value.get("allowCredentials"),
        )}


register(CorsField())
