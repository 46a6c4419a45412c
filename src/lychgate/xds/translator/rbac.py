"""rbac → Envoy's rbac filter with a matcher tree, off by default; a route enables its own.

The tree, first match wins:
  1. the client's address is in blockedCIDRs            → deny
  2. (client in allowedCIDRs) AND (any CEL expression)  → the policy's action
  otherwise                                             → the opposite action
CEL runs on Envoy's request attributes (`request.headers`, `request.path`,
`source.address`, ...) and dynamic metadata: a verified JWT's claims are
`metadata.filter_metadata['envoy.filters.http.jwt_authn']['payload']`.
"""

from __future__ import annotations

from cel.expr import syntax_pb2
from envoy.config.rbac.v3 import rbac_pb2 as rbac_config
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2
from envoy.extensions.matching.common_inputs.network.v3 import network_inputs_pb2
from envoy.extensions.matching.input_matchers.ip.v3 import ip_pb2
from xds.core.v3 import (
    cidr_pb2,  # noqa: F401  (the Ip matcher's CidrRange type)
    extension_pb2,
)
from xds.type.matcher.v3 import cel_pb2 as cel_matcher_pb2
from xds.type.matcher.v3 import http_inputs_pb2
from xds.type.matcher.v3 import matcher_pb2 as m
from xds.type.v3 import cel_pb2

from lychgate import cel, ir
from lychgate.xds.translator.features import register
from lychgate.xds.translator.policy_filters import (
    PolicyFilter,
    pack,
)

FILTER = "envoy.filters.http.rbac"
from typing import TypeAlias  # noqa: E402

Predicate: TypeAlias = m.Matcher.MatcherList.Predicate
FieldMatcher: TypeAlias = m.Matcher.MatcherList.FieldMatcher


def _extension(name: str, message: object) -> extension_pb2.TypedExtensionConfig:
    return extension_pb2.TypedExtensionConfig(name=name, typed_config=pack(message))


def action(name: str, allow: bool) -> m.Matcher.OnMatch:
    action = rbac_config.Action(name=name, action=rbac_config.RBAC.ALLOW if allow else rbac_config.RBAC.DENY)
    return m.Matcher.OnMatch(action=_extension("envoy.filters.rbac.action", action))


def source_in(cidrs: tuple[str, ...]) -> Predicate:
    ranges = []
    for c in cidrs:
        prefix, _, length = c.partition("/")
        ranges.append({"address_prefix": prefix, "prefix_len": {"value": int(length)}})
    return Predicate(single_predicate=Predicate.SinglePredicate(
        input=_extension("envoy.matching.inputs.source_ip", network_inputs_pb2.SourceIPInput()),
        custom_match=_extension("envoy.matching.matchers.ip", ip_pb2.Ip(cidr_ranges=ranges, stat_prefix="rbac"))))


def _cel(expr: str) -> Predicate:
    return Predicate(single_predicate=Predicate.SinglePredicate(
        input=_extension("envoy.matching.inputs.cel_data_input", http_inputs_pb2.HttpAttributesCelMatchInput()),
        custom_match=_extension("envoy.matching.matchers.cel_matcher", cel_matcher_pb2.CelMatcher(
            expr_match=cel_pb2.CelExpression(cel_expr_parsed=syntax_pb2.ParsedExpr.FromString(cel.parse(expr))),
            description=expr))))


def _all(preds: list[Predicate]) -> Predicate:
    return preds[0] if len(preds) == 1 else Predicate(and_matcher=Predicate.PredicateList(predicate=preds))


def _any(preds: list[Predicate]) -> Predicate:
    return preds[0] if len(preds) == 1 else Predicate(or_matcher=Predicate.PredicateList(predicate=preds))


def matcher(policy: ir.Rbac) -> m.Matcher:
    allow = policy.action == "Allow"
    rules: list[FieldMatcher] = []
    if policy.blocked_cidrs:
        rules.append(FieldMatcher(
            predicate=source_in(policy.blocked_cidrs), on_match=action("blocked-cidrs", False)))
    parts = []
    if policy.allowed_cidrs:
        parts.append(source_in(policy.allowed_cidrs))
    if policy.expressions:
        parts.append(_any([_cel(e) for e in policy.expressions]))
    if parts:
        rules.append(FieldMatcher(predicate=_all(parts), on_match=action("policy", allow)))
    # Only blockedCIDRs and Allow: everything not blocked passes.
    no_match_allows = (not allow) or not parts
    return m.Matcher(matcher_list=m.Matcher.MatcherList(matchers=rules),
                     on_no_match=action("default", no_match_allows))


class Rbac(PolicyFilter):
    name, filter, field = "rbac", FILTER, "rbac"
    order = 38  # after authentication (jwt_authn puts the claims it reads in metadata)

    def listener_config(self) -> object:
        return rbac_pb2.RBAC()

    def route_config(self, value: ir.Rbac) -> object:
        return rbac_pb2.RBACPerRoute(rbac=rbac_pb2.RBAC(matcher=matcher(value)))


register(Rbac())
