"""A route's tracing overrides and per-route stats (TrafficPolicy `tracing`, `statPrefix`)."""

from __future__ import annotations

import re

from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.type.v3 import percent_pb2

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.tracing import custom_tag

_TOKEN = re.compile(r"\{\{\s*(route_name|route_namespace|rule_name)\s*\}\}")


def _percent(value: int) -> percent_pb2.FractionalPercent:
    return percent_pb2.FractionalPercent(numerator=value, denominator=percent_pb2.FractionalPercent.HUNDRED)


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
        if t.disabled:  # nothing sampled, whatever the listener says
            for field in (out.tracing.client_sampling, out.tracing.random_sampling, out.tracing.overall_sampling):
                field.CopyFrom(_percent(0))
            return
        for value, field in ((t.client_sampling, out.tracing.client_sampling),
                             (t.random_sampling, out.tracing.random_sampling),
                             (t.overall_sampling, out.tracing.overall_sampling)):
            if value is not None:
                field.CopyFrom(_percent(value))
        out.tracing.custom_tags.extend(custom_tag(tag) for tag in t.tags)


register(RouteStats())
