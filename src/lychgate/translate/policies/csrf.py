"""csrf: refuse cross-site state-changing requests (Envoy csrf).

kgateway's shape: `percentageEnabled` (enforced; 100 when neither percentage
is set), or `percentageShadowed` (checked and counted in Envoy's
`csrf.request_invalid` stats, never refused), and `additionalOrigins` trusted
besides the request's own host.
"""

from __future__ import annotations

from typing import Any

from lychgate import envoy_limits, ir
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, Invalid, envoy_check

_KINDS = {"exact": "exact", "prefix": "prefix", "suffix": "suffix", "contains": "contains", "safeRegex": "safe_regex"}


def string_match(value: dict[str, Any], path: str) -> ir.OriginMatch:
    kinds = [k for k in _KINDS if k in value]
    if len(kinds) != 1:
        raise Invalid(path, "exactly one of exact, prefix, suffix, contains or safeRegex must be set")
    text = value[kinds[0]]
    if kinds[0] == "safeRegex":
        envoy_check(envoy_limits.regex, text, f"{path}.safeRegex")
    return ir.OriginMatch(_KINDS[kinds[0]], text, bool(value.get("ignoreCase")))  # type: ignore[arg-type]


class CsrfField(PolicyField):
    name, attr = "csrf", "csrf"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        enabled, shadowed = value.get("percentageEnabled"), value.get("percentageShadowed")
        if enabled is not None and shadowed is not None:
            raise Invalid(path, "at most one of percentageEnabled or percentageShadowed may be set")
        origins = tuple(string_match(o, f"{path}.additionalOrigins[{i}]")
                        for i, o in enumerate(value.get("additionalOrigins") or []))
        if shadowed is not None:
            return {"csrf": ir.Csrf(0, shadowed, origins)}
        return {"csrf": ir.Csrf(100 if enabled is None else enabled, 0, origins)}


register(CsrfField())
