"""tracing and statPrefix: what a route reports. `tracing` overrides the listener's
sampling for the routes the policy covers and adds span attributes; `statPrefix`
gives those routes Envoy per-route stats (`vhost.<vhost>.route.<prefix>.*`)."""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.api.policy import RouteTracing, TrafficPolicy
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.tracing import trace_tag
from lychgate.translate.values import CompileContext


class TracingField(PolicyField):
    name, attr = "tracing", "tracing"
    target_kinds = frozenset({"HTTPRoute", "GRPCRoute"})

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        spec = RouteTracing.model_validate(value)
        if spec.disable is not None:
            return {"tracing": ir.RouteTracing(disabled=True)}
        return {"tracing": ir.RouteTracing(
            client_sampling=spec.client_sampling, random_sampling=spec.random_sampling,
            overall_sampling=spec.overall_sampling,
            tags=tuple(trace_tag(a, f"{path}.attributes[{i}]") for i, a in enumerate(spec.attributes)))}


class StatPrefixField(PolicyField):
    name, attr = "statPrefix", "stat_prefix"
    target_kinds = frozenset({"HTTPRoute", "GRPCRoute"})

    def value(self, policy: TrafficPolicy) -> dict[str, Any] | None:
        # A plain string field: wrapped so it merges and compiles like the others.
        prefix = policy.spec.stat_prefix
        return None if prefix is None else {"prefix": prefix}

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        return {"stat_prefix": value["prefix"]}


register(TracingField())
register(StatPrefixField())
