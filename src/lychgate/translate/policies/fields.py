"""The policy feature registry: one PolicyField per TrafficPolicy feature.

A feature module registers a PolicyField that knows its spec field, how two
values of it merge, and how a (merged) value compiles into settings of
ir.RoutePolicy. The attachment code never names a feature: adding one is a
module here plus one in xds/translator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lychgate.api.policy import TrafficPolicy
from lychgate.translate.values import CompileContext


def deep_merge(high: Any, low: Any) -> Any:
    """Merge two values of a field; `high` wins wherever both set a leaf.

    Maps merge key by key; lists of named entries (`set: [{name, value}]`)
    merge by name; lists of strings are joined without duplicates.
    """
    if isinstance(high, dict) and isinstance(low, dict):
        out = dict(low)
        for key, value in high.items():
            out[key] = deep_merge(value, low[key]) if key in low else value
        return out
    if isinstance(high, list) and isinstance(low, list):
        if all(isinstance(v, dict) and "name" in v for v in high + low):
            names = {v["name"].lower() for v in high}
            return high + [v for v in low if v["name"].lower() not in names]
        if all(isinstance(v, str) for v in high + low):
            return high + [v for v in low if v not in high]
    return high


class PolicyField:
    """One TrafficPolicy feature. Subclasses set `name` and implement compile."""

    name = ""  # the spec field, camelCase as users write it ("extAuth")
    attr = ""  # the model attribute ("ext_auth")
    # Policies at one tier (Gateway and its listeners; routes and their rules) merge this
    # field (merge()) without a policyMerge setting; a route-tier value replaces the Gateway's.
    merges_within_tier = False
    # The most specific value of each tier (route, ListenerSet, Gateway) applies, layered by
    # merge(route's, outer tier's): kgateway applies headerModifiers of every tier.
    layers_across_tiers = False
    deep_mergeable = False  # policyMerge.trafficPolicy.<name>: DeepMerge is allowed
    # A delegating parent's DeepMerge... priority combines this field with its children's
    # (each GatewayExtension named runs). kgateway concatenates transformations too, but the
    # first that applies is the only one Envoy runs: the preferred side's, whole.
    combines_across_delegation = False
    # Authentication / authorization: when its references cannot be resolved the
    # routes the policy targets answer 500 instead of serving unprotected.
    security = False
    # The target kinds the field may be used with (kgateway's CRD rules); None: any.
    target_kinds: frozenset[str] | None = None

    def value(self, policy: TrafficPolicy) -> dict[str, Any] | None:
        """The field as the user wrote it (plain data), with references made absolute."""
        model = getattr(policy.spec, self.attr)
        if model is None:
            return None
        value: dict[str, Any] = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
        return self.normalize(policy, value)

    def normalize(self, policy: TrafficPolicy, value: dict[str, Any]) -> dict[str, Any]:
        return value

    def merge(self, high: dict[str, Any], low: dict[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = deep_merge(high, low)
        return merged

    def superseded(self, values: Sequence[dict[str, Any]]) -> list[tuple[int, str] | None]:
        """Deep merge: for each value (highest priority first) None when it takes part in
        the merge, else (index of the value that supersedes it, why). By default all do."""
        return [None] * len(values)

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        """Settings of ir.RoutePolicy for this value; raises Invalid or Unresolved."""
        raise NotImplementedError


FIELDS: list[PolicyField] = []


def register(field: PolicyField) -> PolicyField:
    FIELDS.append(field)
    return field

