"""A route's tracing overrides and per-route stats (TrafficPolicy `tracing`, `statPrefix`)."""

from __future__ import annotations

import re

from envoy.config.route.v3 import route_components_pb2 as route_pb

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import percent
from lychgate.xds.translator.tracing import custom_tag

_TOKEN = re.compile(r"\{\{\s*(route_name|route_namespace|rule_name)\s*\}\}")


def stat_prefix(template: str, source: ir.RouteSource) -> str:
    """The prefix with its tokens filled in from the route it is on (kgateway's three)."""
    values = {"route_name": source.name, "route_namespace": source.namespace, "rule_name": source.rule_name or ""}
    return _TOKEN.sub(lambda m: values[m.group(1)], template)


class RouteStats(Feature):
    name = "route_stats"

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        p = route.policy
        if p is None:
            return
        if p.stat_prefix is not None:
            out.stat_prefix = stat_prefix(p.stat_prefix, route.source)
        t = p.tracing
        if t is None:
            return
        for attr in ("client_sampling", "random_sampling", "overall_sampling"):
            value = 0 if t.disabled else getattr(t, attr)  # disabled: nothing sampled, whatever the listener says
            if value is not None:
                getattr(out.tracing, attr).CopyFrom(percent(value))
        out.tracing.custom_tags.extend(custom_tag(tag) for tag in t.tags)


register(RouteStats())
