"""Route delegation, as kgateway does it.

A platform team's parent HTTPRoute hands path prefixes to application teams'
child HTTPRoutes: a parent rule's backendRef of kind HTTPRoute names the
children (by name, `name: "*"` for every HTTPRoute of a namespace, or kgateway's
label form: group delegation.kgateway.dev, kind label, name = the value of the
child's `delegation.kgateway.dev/label` label, namespace `all` for any). The
children's rules are served under the parent's Gateways and hostnames, and
compiled as part of the parent (so a change to a child re-translates its
parents, found through what the parent's compilation read).

A child is taken when it has no parentRefs or one of them names the parent
route; its hostnames must be unset (it inherits the parent's). Each child
match must fall inside the parent rule's match (kgateway's rules: the parent
matches a PathPrefix that starts the child's path, the child repeats the
parent's header and query matches and method), or, with the child's
`delegation.kgateway.dev/inherit-parent-matcher: "true"` annotation, is joined
onto it. Matches outside are dropped, then rules left without a match, then
children left without a rule. A parent rule left without any child answers
500 and says so in ResolvedRefs (BackendNotFound). A child reached again on its
own delegation chain is a cycle: it is skipped and reported, never followed.

What the parent puts on its delegating rule reaches the children's rules
(kgateway's inheritance): its header modifier, URL rewrite (hostname, full
path) and CORS filters and its timeouts, retry and sessionPersistence, where the
child rule does not set the same; TrafficPolicies on the parent (on the route,
the rule, or in an ExtensionRef filter of the rule) below the child's own
(translate/policies/attachment.py). The parent's
`kgateway.dev/inherited-policy-priority` annotation turns that around
(ShallowMergePreferParent, DeepMergePreferParent: the parent's win) and says
whether fields that merge combine (DeepMerge...); kgateway's older
`delegation.kgateway.dev/inherited-policy-priority` (PreferChild, PreferParent)
is read too.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.gateway import (
    GROUP,
    BackendObjectReference,
    HTTPRoute,
    HTTPRouteFilter,
    HTTPRouteMatch,
    HTTPRouteRule,
    PathMatch,
)
from lychgate.api.policy import is_policy_ref
from lychgate.translate.conditions import CONTROLLER_NAME, condition

if TYPE_CHECKING:
    from lychgate.store import Store

LABEL_GROUP = "delegation.kgateway.dev"
LABEL = "delegation.kgateway.dev/label"
INHERIT_MATCHER = "delegation.kgateway.dev/inherit-parent-matcher"
ROUTE_WEIGHT = "kgateway.dev/route-weight"
PRIORITY = "kgateway.dev/inherited-policy-priority"
OLD_PRIORITY = "delegation.kgateway.dev/inherited-policy-priority"
# value -> (prefer parent, deep merge)
PRIORITIES = {"ShallowMergePreferChild": (False, False), "ShallowMergePreferParent": (True, False),
              "DeepMergePreferChild": (False, True), "DeepMergePreferParent": (True, True)}
OLD_PRIORITIES = {"PreferChild": (False, False), "PreferParent": (True, False)}
# Filters of a delegating rule its children inherit; the others name objects in the
# parent's namespace, or rewrite relative to the parent's match, and are refused there.
INHERITED_FILTERS = frozenset({"RequestHeaderModifier", "ResponseHeaderModifier", "URLRewrite", "CORS"})
CYCLE = "cyclic reference detected"
HOSTNAMES_SET = "spec.hostnames must be unset on a delegatee route as they are inherited from the parent route"


def is_delegation(ref: BackendObjectReference) -> bool:
    return (ref.group == GROUP and ref.kind == "HTTPRoute") or (ref.group == LABEL_GROUP and ref.kind == "label")


def route_weight(route: HTTPRoute) -> int:
    """kgateway's route-weight annotation: a higher weight sorts a route's rules
    first in a virtual host, before the Gateway API's match precedence. Not a
    number: 0, the default."""
    try:
        return int(route.metadata.annotations.get(ROUTE_WEIGHT, "0"))
    except ValueError:
        return 0


def priority(route: HTTPRoute) -> tuple[bool, bool, str | None]:
    """(prefer parent, deep merge, a problem with the annotation) of a delegating route."""
    annotations = route.metadata.annotations
    for name, values in ((PRIORITY, PRIORITIES), (OLD_PRIORITY, OLD_PRIORITIES)):
        if name in annotations:
            value = annotations[name]
            if value in values:
                return (*values[value], None)
            return False, False, (f"annotation {name}: {value!r} is not one of {', '.join(values)}; "
                                  "ShallowMergePreferChild applies")
    return False, False, None


def hop(parent: HTTPRoute, rule_index: int, rule: HTTPRouteRule) -> ir.DelegationHop:
    prefer_parent, deep, _ = priority(parent)
    return ir.DelegationHop(parent.namespace, parent.name, rule_index, rule.name, prefer_parent, deep)


def delegating_rule_problem(rule: HTTPRouteRule) -> str | None:
    """Why a rule cannot delegate as written, or None."""
    if not all(is_delegation(ref) for ref in rule.backend_refs):
        return "a rule that delegates to HTTPRoutes cannot also have other backendRefs"
    for i, f in enumerate(rule.filters):
        if f.type == "ExtensionRef" and f.extension_ref and is_policy_ref(f.extension_ref.group, f.extension_ref.kind):
            continue  # the policy applies to the delegated rules (attachment.py)
        if f.type not in INHERITED_FILTERS:
            return (f"filters[{i}]: a {f.type} filter on a rule that delegates to HTTPRoutes is not supported; "
                    f"put it on the child rules (inherited: {', '.join(sorted(INHERITED_FILTERS))}, and "
                    "ExtensionRefs naming TrafficPolicies)")
        rewrite = f.url_rewrite
        if f.type == "URLRewrite" and rewrite and rewrite.path and rewrite.path.type == "ReplacePrefixMatch":
            return (f"filters[{i}].urlRewrite.path: ReplacePrefixMatch on a rule that delegates to HTTPRoutes "
                    "is not supported (it would rewrite each child's own prefix); put it on the child rules")
    return None


def _inherited(parent: HTTPRouteRule, child: HTTPRouteRule, prefer_parent: bool) -> dict[str, Any]:
    """The parent rule's filters, timeouts, retry and sessionPersistence the child rule gets."""
    update: dict[str, Any] = {}
    own = {f.type for f in child.filters}
    passed: list[HTTPRouteFilter] = [f for f in parent.filters if f.type in INHERITED_FILTERS]
    if passed:
        if prefer_parent:
            theirs = {f.type for f in passed}
            update["filters"] = passed + [f for f in child.filters if f.type not in theirs]
        else:
            update["filters"] = child.filters + [f for f in passed if f.type not in own]
    for attr in ("timeouts", "retry", "session_persistence"):
        value = getattr(parent, attr)
        if value is not None and (prefer_parent or getattr(child, attr) is None):
            update[attr] = value
    return update


def children(store: Store, parent: HTTPRoute, ref: BackendObjectReference) -> list[HTTPRoute]:
    """The HTTPRoutes a delegating backendRef selects, in name order."""
    ns = ref.namespace or parent.namespace
    if ref.group == LABEL_GROUP:
        pool = store.list(HTTPRoute, None if ns == "all" else ns)
        found = [r for r in pool if r.metadata.labels.get(LABEL) == ref.name]
    elif ref.name == "*":
        found = store.list(HTTPRoute, ns)
    else:
        one = store.get(HTTPRoute, ns, ref.name)
        found = [one] if one is not None else []
    return sorted(found, key=lambda r: (r.namespace, r.name))


def selector(ref: BackendObjectReference, parent: HTTPRoute) -> str:
    ns = ref.namespace or parent.namespace
    if ref.group == LABEL_GROUP:
        return f"HTTPRoutes labelled {LABEL}={ref.name} in " + ("any namespace" if ns == "all" else f"namespace {ns}")
    return f"every HTTPRoute of namespace {ns}" if ref.name == "*" else f"HTTPRoute {ns}/{ref.name}"


def can_attach(child: HTTPRoute, parent: HTTPRoute) -> bool:
    """A child without parentRefs accepts any parent; one with parentRefs, only
    an HTTPRoute they name."""
    refs = child.spec.parent_refs
    return not refs or any(
        r.group == GROUP and r.kind == "HTTPRoute" and r.name == parent.name
        and (r.namespace or child.namespace) == parent.namespace for r in refs)


def _path(m: HTTPRouteMatch) -> PathMatch:
    return m.path or PathMatch()


def _normal(p: PathMatch) -> str:
    # "/a/" and "/a" are the same prefix.
    return p.value.rstrip("/") or "/" if p.type == "PathPrefix" else p.value


def inside(parent: HTTPRouteMatch, child: HTTPRouteMatch) -> bool:
    """A child match within a parent match (kgateway's rule, without inheritance)."""
    pp, cp = _path(parent), _path(child)
    if pp.type != "PathPrefix" or not _normal(cp).startswith(_normal(pp).rstrip("/")):
        return False
    heads = {(h.name.lower(), h.type, h.value) for h in child.headers}
    if any((h.name.lower(), h.type, h.value) not in heads for h in parent.headers):
        return False
    queries = {(q.name, q.type, q.value) for q in child.query_params}
    if any((q.name, q.type, q.value) not in queries for q in parent.query_params):
        return False
    return parent.method is None or parent.method == child.method


def inherit(parent: HTTPRouteMatch, child: HTTPRouteMatch) -> HTTPRouteMatch:
    """A child match joined onto its parent's (the inherit-parent-matcher
    annotation): the parent's path then the child's, the parent's headers, query
    params and method winning over the child's of the same name."""
    pp, cp = _path(parent), _path(child)
    if pp.type == "RegularExpression":
        anchored = pp.value.endswith("$")
        base = pp.value.removesuffix("$")
        if cp.type == "RegularExpression":
            base += cp.value.removeprefix("^").removesuffix("$")
        elif cp.type == "Exact":
            base += re.escape(cp.value)
        else:
            base += re.escape(cp.value) + "(?:/.*)?"
        path = PathMatch(type="RegularExpression", value=base + ("$" if anchored else ""))
    else:
        joined = posixpath.normpath(posixpath.join(pp.value, cp.value.lstrip("/")))
        path = PathMatch(type=cp.type, value=joined if joined.startswith("/") else "/" + joined)
    heads = {h.name.lower(): h for h in child.headers} | {h.name.lower(): h for h in parent.headers}
    queries = {q.name: q for q in child.query_params} | {q.name: q for q in parent.query_params}
    return HTTPRouteMatch(path=path, headers=[heads[k] for k in sorted(heads)],
                          query_params=[queries[k] for k in sorted(queries)],
                          method=parent.method or child.method)


def inherits(child: HTTPRoute) -> bool:
    return child.metadata.annotations.get(INHERIT_MATCHER, "").lower() in ("true", "yes", "enabled")


def selected_rules(parent: HTTPRouteRule, child: HTTPRoute, prefer_parent: bool = False
                   ) -> list[tuple[int, HTTPRouteRule]]:
    """The child's rules under a parent rule, each with just its matches that
    fall inside (or are joined onto) one of the parent's, and what it inherits
    from the parent rule; rules left with no match are dropped."""
    out: list[tuple[int, HTTPRouteRule]] = []
    joined = inherits(child)
    for i, rule in enumerate(child.spec.rules):
        matches: list[HTTPRouteMatch] = []
        for pm in parent.matches:
            if joined:
                matches.extend(inherit(pm, cm) for cm in rule.matches)
            else:
                matches.extend(cm for cm in rule.matches if inside(pm, cm))
        if matches:
            out.append((i, rule.model_copy(update={"matches": matches, **_inherited(parent, rule, prefer_parent)})))
    return out


@dataclass
class Report:
    """What delegation did, per (child, parent) pair, for the child's status
    parents (parentRef: the parent HTTPRoute)."""

    taken: dict[tuple[ObjectKey, ObjectKey], list[str]] = field(default_factory=dict)
    refused: dict[tuple[ObjectKey, ObjectKey], list[tuple[str, str]]] = field(default_factory=dict)
    unresolved: dict[tuple[ObjectKey, ObjectKey], list[tuple[str, str]]] = field(default_factory=dict)
    generations: dict[ObjectKey, int] = field(default_factory=dict)

    def take(self, child: HTTPRoute, parent: HTTPRoute, what: str) -> None:
        self.generations[child.key] = child.generation
        self.taken.setdefault((child.key, parent.key), []).append(what)

    def refuse(self, child: HTTPRoute, parent: HTTPRoute, reason: str, why: str) -> None:
        self.generations[child.key] = child.generation
        self.refused.setdefault((child.key, parent.key), []).append((reason, why))

    def unresolve(self, child: HTTPRoute, parent: HTTPRoute, reason: str, why: str) -> None:
        self.generations[child.key] = child.generation
        self.unresolved.setdefault((child.key, parent.key), []).append((reason, why))

    def update(self, other: Report) -> None:
        for mine, theirs in ((self.taken, other.taken), (self.refused, other.refused),
                             (self.unresolved, other.unresolved)):
            for k, v in theirs.items():
                mine.setdefault(k, []).extend(v)  # type: ignore[arg-type]
        self.generations.update(other.generations)

    def entries(self) -> tuple[tuple[ObjectKey, dict[str, Any]], ...]:
        """(child, status parent entry) for every pair, accepted when any of the
        parent's rules took the child."""
        out: list[tuple[ObjectKey, dict[str, Any]]] = []
        for pair in sorted(self.taken.keys() | self.refused.keys() | self.unresolved.keys()):
            child, parent = pair
            gen = self.generations[child]
            taken, refused = self.taken.get(pair, []), self.refused.get(pair, [])
            if taken:
                accepted = condition("Accepted", True, "Accepted",
                                     f"delegated from HTTPRoute {parent.namespace}/{parent.name}: "
                                     + "; ".join(dict.fromkeys(taken)), gen)
            else:
                accepted = condition("Accepted", False, refused[0][0], "; ".join(
                    dict.fromkeys(why for _, why in refused)), gen)
            problems = self.unresolved.get(pair, [])
            resolved = (condition("ResolvedRefs", False, problems[0][0],
                                  "; ".join(dict.fromkeys(why for _, why in problems)), gen) if problems
                        else condition("ResolvedRefs", True, "ResolvedRefs", "all references are resolved", gen))
            out.append((child, {
                "parentRef": {"group": GROUP, "kind": "HTTPRoute", "namespace": parent.namespace,
                              "name": parent.name},
                "controllerName": CONTROLLER_NAME,
                "conditions": [accepted, resolved],
            }))
        return tuple(out)
