"""csrf → Envoy's csrf filter, off by default; a route enables it with its policy.

Envoy compares the Origin (or Referer) of non-safe requests (POST, PUT,
DELETE, PATCH) with the request's host and the additional origins, and answers
403 `Invalid origin` on a mismatch (or only counts it in shadow mode).
"""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.csrf.v3 import csrf_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from envoy.type.v3 import percent_pb2

from lychgate import ir
from lychgate.xds.translator.features import register
from lychgate.xds.translator.policy_filters import (
    PolicyFilter,
)

FILTER = "envoy.filters.http.csrf"


def _percent(value: int) -> base_pb2.RuntimeFractionalPercent:
    return base_pb2.RuntimeFractionalPercent(default_value=percent_pb2.FractionalPercent(numerator=value))


def string_matcher(m: ir.OriginMatch) -> string_pb2.StringMatcher:
    if m.kind == "safe_regex":
        return string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=m.value))
    out = string_pb2.StringMatcher(ignore_case=m.ignore_case)
    setattr(out, m.kind, m.value)
    return out


def policy(c: ir.Csrf) -> csrf_pb2.CsrfPolicy:
    return csrf_pb2.CsrfPolicy(filter_enabled=_percent(c.enabled_percent), shadow_enabled=_percent(c.shadow_percent),
                               additional_origins=[string_matcher(o) for o in c.additional_origins])


class Csrf(PolicyFilter):
    name, filter, field = "csrf", FILTER, "csrf"
    order = 12  # after CORS, whose preflights are not state-changing requests

    def listener_config(self) -> object:
        return csrf_pb2.CsrfPolicy(filter_enabled=_percent(0))

    def route_config(self, value: ir.Csrf) -> object:
        return policy(value)


register(Csrf())
