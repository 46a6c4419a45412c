"""TrafficPolicy attachment: targets, precedence, merging and the status that explains it.

The rules, in the order they are applied to every route rule a Gateway serves:

1. Attachment points, most specific first: the HTTPRoute rule (sectionName =
   rule name), the HTTPRoute, the Gateway listener (sectionName = listener
   name), the Gateway. A field set at a more specific point overrides it.
2. At one point, policies are ordered oldest first (creationTimestamp, then
   namespace/name) and, per field, the oldest that sets it wins.
3. Of the policies attached to one point through `targetRefs`, only the oldest
   is applied; the newer ones contribute nothing (spec §3 rule 1).
4. With `policyMerge.trafficPolicy.<field>: DeepMerge` (extAuth, extProc,
   transformation) that field merges across all of those policies instead,
   the higher-priority value winning where both set the same leaf.
5. A policy whose references cannot be followed (GatewayExtension missing,
   Service missing, ReferenceGrant missing) is valid but not applied.
6. An invalid policy is not applied, and the routes it targets answer 500
   until it is fixed (standard validation, spec §7): a broken auth policy
   must not leave its routes open. Other routes are not affected.

Every outcome is recorded per (policy, target) while routes are resolved, so
the status says what actually reached the proxy, and why not when it did not.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.gateway import GROUP as GATEWAY_GROUP
from lychgate.api.gateway import Gateway, GRPCRoute, HTTPRoute
from lychgate.api.policy import GatewayExtension, TrafficPolicy
from lychgate.log import component_logger
from lychgate.store import Store
from lychgate.translate.conditions import condition
from lychgate.translate.policies.common import CompileContext, Invalid, Unresolved
from lychgate.translate.policies.extensions import (
    EXT_AUTH,
    EXT_PROC,
    RATE_LIMIT,
    ext_auth_service,
    ext_proc_service,
    extension_status,
    extension_type,
    rate_limit_service,
)
from lychgate.translate.policies.fields import FIELDS, UNSUPPORTED, PolicyField
from lychgate.translate.policies.merge import deep_merge_fields

log = component_logger("translate")

CONTROLLER_NAME = "gateway.lychgate.dev/lychgate"
AFFECTED = "gateway.lychgate.dev/TrafficPolicyAffected"
INVALID_POLICY_BODY = "a policy of this route is invalid; see the TrafficPolicy status\n"
MAX_ANCESTORS = 16
_NO_HEADERS = ir.HeaderOps()
TARGET_KINDS = ("Gateway", "HTTPRoute")


@dataclass(frozen=True)
class Target:
    kind: str
    namespace: str
    name: str
    section: str | None = None

    @property
    def level(self) -> int:
        """0 Gateway, 1 listener, 2 HTTPRoute, 3 rule: higher is more specific."""
        return (0 if self.kind == "Gateway" else 2) + (1 if self.section else 0)

    def ancestor_ref(self) -> dict[str, Any]:
        ref: dict[str, Any] = {"group": GATEWAY_GROUP, "kind": self.kind,
                               "namespace": self.namespace, "name": self.name}
        if self.section:
            ref["sectionName"] = self.section
        return ref

    def __str__(self) -> str:
        part = {"Gateway": "listener", "HTTPRoute": "rule"}[self.kind]
        where = f"{self.kind} {self.namespace}/{self.name}"
        return f"{where} {part} {self.section}" if self.section else where


class Outcome:
    """What happened to one policy at one target (or route), over every route rule under it.

    One exists per policy and route, so it is kept small: plain slots, the
    containers only what was recorded.
    """

    __slots__ = ("applied", "blocked_by", "failed_closed", "lost", "merged_into", "merged_with", "routes")

    def __init__(self) -> None:
        self.routes = 0
        self.failed_closed = 0
        self.applied: set[str] = set()
        self.merged_into: dict[str, str] = {}  # field -> winner policy
        self.merged_with: dict[str, set[str]] = {}  # field -> policies merged into this one's value
        self.lost: dict[str, dict[str, None]] = {}  # field -> why it did not apply (ordered set)
        self.blocked_by: set[str] = set()  # invalid policies that made routes answer 500


@dataclass(eq=False)
class PolicyState:
    policy: TrafficPolicy
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    unresolved: Unresolved | None = None
    attachments: list[Attachment] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # selectors that matched nothing, ...
    outcomes: dict[Target, Outcome] = field(default_factory=dict)
    key: str = ""  # "namespace/name"
    order: tuple[datetime, str, str] = (datetime.min, "", "")  # oldest first

    def __post_init__(self) -> None:
        self.key = f"{self.policy.namespace}/{self.policy.name}"
        self.order = (self.policy.created, self.policy.namespace, self.policy.name)

    def outcome(self, target: Target) -> Outcome:
        out = self.outcomes.get(target)
        if out is None:
            out = self.outcomes[target] = Outcome()
        return out


@dataclass(eq=False)
class Attachment:
    state: PolicyState
    target: Target
    via: str
    by_ref: bool
    problem: tuple[str, str] | None = None  # (reason, message) when the target is unusable


@dataclass
class _Resolved:
    policy: ir.RoutePolicy | None
    failed_because: str | None
    clusters: dict[str, ir.Cluster]


class PolicyIndex:
    """Built once per translation pass; `apply` is called for every route a Gateway serves."""

    def __init__(
        self,
        store: Store,
        gateways: Mapping[tuple[str, str], Gateway],
        listeners: Mapping[tuple[str, str], set[str]],
        policy_merge: Mapping[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.gateways = gateways
        self.listeners = listeners
        self.deep = deep_merge_fields(policy_merge)
        self.states: list[PolicyState] = []
        self.by_target: dict[Target, list[Attachment]] = defaultdict(list)
        self.clusters: dict[str, dict[str, ir.Cluster]] = defaultdict(dict)
        self._memo: dict[tuple[Any, ...], _Resolved] = {}
        # (field, contributing policies) -> (route settings, clusters): merged once, not per route
        self._compiled: dict[tuple[str, tuple[str, ...]], tuple[dict[str, Any], dict[str, ir.Cluster]]] = {}
        self._by_contributors: dict[tuple[tuple[str, tuple[str, ...]], ...], _Resolved] = {}
        self._described: Described = {}
        # HTTPRoute key -> policy key -> Outcome on that route's rules
        self._route_outcomes: dict[ObjectKey, dict[str, Outcome]] = defaultdict(dict)
        # Every usable extension gets a filter on every listener (see ir.HTTPListener.extensions).
        self.extensions: tuple[ir.ExtAuthService | ir.ExtProcService | ir.RateLimitService, ...] = ()
        self._extension_clusters: dict[str, ir.Cluster] = {}
        self._index_extensions()
        policies = sorted(store.list(TrafficPolicy), key=lambda p: (p.created, p.namespace, p.name))
        for policy in policies:
            state = PolicyState(policy)
            self._validate(state)
            self._attach(state)
            self.states.append(state)
        for atts in self.by_target.values():
            atts.sort(key=lambda a: a.state.order)
        # Policy filters go into listeners once any TrafficPolicy exists (ir.HTTPListener).
        self.active = bool(self.states)

    def _index_extensions(self) -> None:
        found: list[ir.ExtAuthService | ir.ExtProcService | ir.RateLimitService] = []
        for ext in sorted(self.store.list(GatewayExtension), key=lambda e: (e.namespace, e.name)):
            kind = extension_type(ext)
            try:
                if kind == EXT_AUTH:
                    auth, cluster = ext_auth_service(self.store, ext.namespace, ext.name)
                    found.append(auth)
                elif kind == EXT_PROC:
                    proc, cluster = ext_proc_service(self.store, ext.namespace, ext.name)
                    found.append(proc)
                elif kind == RATE_LIMIT:
                    limit, cluster = rate_limit_service(self.store, ext.namespace, ext.name)
                    found.append(limit)
                else:
                    continue
            except (Invalid, Unresolved):
                continue  # its status says why; policies using it are not applied
            self._extension_clusters[cluster.name] = cluster
        self.extensions = tuple(found)

    def clusters_for(self, gateway_ref: str) -> dict[str, ir.Cluster]:
        """The clusters of every usable extension, and any others the Gateway's routes use."""
        return {**self._extension_clusters, **self.clusters.get(gateway_ref, {})}

    # --- per policy: validity, references, targets -----------------------------------

    def _validate(self, state: PolicyState) -> None:
        spec = state.policy.spec
        for attr, name in UNSUPPORTED.items():
            if getattr(spec, attr) is not None:
                state.errors.append(f"spec.{name}: not supported by lychgate yet")
        ctx = CompileContext(self.store)
        for f in FIELDS:
            value = f.value(state.policy)
            if value is None:
                continue
            state.values[f.name] = value
            try:
                f.compile(ctx, value, f"spec.{f.name}")
            except Invalid as err:
                state.errors.append(str(err))
            except Unresolved as err:
                state.unresolved = state.unresolved or err
        if not spec.target_refs and not spec.target_selectors:
            state.errors.append("spec: targetRefs or targetSelectors must be set")

    def _attach(self, state: PolicyState) -> None:
        policy = state.policy
        ns = policy.namespace
        seen: dict[Target, Attachment] = {}

        def add(target: Target, via: str, by_ref: bool, problem: tuple[str, str] | None = None) -> None:
            if target in seen:
                seen[target].by_ref = seen[target].by_ref or by_ref
                return
            att = Attachment(state, target, via, by_ref, problem)
            seen[target] = att
            state.attachments.append(att)
            if problem is None:
                self.by_target[target].append(att)

        for i, ref in enumerate(policy.spec.target_refs):
            path = f"spec.targetRefs[{i}]"
            if not self._kind_ok(state, ref.group, ref.kind, path):
                continue
            target = Target(ref.kind, ns, ref.name, ref.section_name)
            add(target, path, True, self._target_problem(target))
        for i, sel in enumerate(policy.spec.target_selectors):
            path = f"spec.targetSelectors[{i}]"
            if not self._kind_ok(state, sel.group, sel.kind, path):
                continue
            if not sel.match_labels:
                state.errors.append(f"{path}.matchLabels: at least one label is required")
                continue
            wanted = list(sel.match_labels.items())
            candidates: list[Gateway] | list[HTTPRoute] = (
                self.store.list(Gateway, ns) if sel.kind == "Gateway" else self.store.list(HTTPRoute, ns))
            matched = sorted(
                (o for o in candidates if all(o.metadata.labels.get(k) == v for k, v in wanted)),
                key=lambda o: o.name,
            )
            labels = ",".join(f"{k}={v}" for k, v in sorted(sel.match_labels.items()))
            if not matched:
                state.notes.append(f"{path} matched no {sel.kind} with labels {labels} in namespace {ns}")
                continue
            for obj in matched:
                target = Target(sel.kind, ns, obj.name, sel.section_name)
                add(target, path, False, self._target_problem(target, obj))

    def _kind_ok(self, state: PolicyState, group: str, kind: str, path: str) -> bool:
        if group != GATEWAY_GROUP or kind not in TARGET_KINDS:
            state.errors.append(f"{path}: {group}/{kind} cannot be targeted; use "
                                f"{GATEWAY_GROUP} Gateway or HTTPRoute")
            return False
        return True

    def _target_problem(self, target: Target, obj: Gateway | HTTPRoute | None = None) -> tuple[str, str] | None:
        if target.kind == "HTTPRoute":
            route = obj if isinstance(obj, HTTPRoute) else self.store.get(HTTPRoute, target.namespace, target.name)
            if route is None:
                return ("TargetNotFound", f"HTTPRoute {target.namespace}/{target.name} not found")
            if target.section and not any(r.name == target.section for r in route.spec.rules):
                names = ", ".join(r.name for r in route.spec.rules if r.name) or "none has a name"
                return ("TargetNotFound", f"HTTPRoute {target.namespace}/{target.name} has no rule named "
                                          f"{target.section} (rules: {names})")
            return None
        gw = obj if isinstance(obj, Gateway) else self.store.get(Gateway, target.namespace, target.name)
        if gw is None:
            return ("TargetNotFound", f"Gateway {target.namespace}/{target.name} not found")
        if (target.namespace, target.name) not in self.gateways:
            return ("TargetNotFound", f"Gateway {target.namespace}/{target.name} is not served by lychgate "
                                      f"(gatewayClassName {gw.spec.gateway_class_name})")
        if target.section and target.section not in self.listeners.get((target.namespace, target.name), set()):
            return ("TargetNotFound", f"Gateway {target.namespace}/{target.name} has no listener named "
                                      f"{target.section}")
        return None

    # --- per route ----------------------------------------------------------------------

    def apply(self, gateway: Gateway, listener: str, route: HTTPRoute | GRPCRoute, r: ir.Route) -> ir.Route:
        """The route with its effective policy (or a 500 if an invalid policy targets it)."""
        if not self.by_target:
            return r
        key = (gateway.namespace, gateway.name, listener, route.KIND, route.namespace, route.name, r.source.rule)
        resolved = self._memo.get(key)
        if resolved is None:
            points = []
            if r.source.rule_name:
                points.append(Target(route.KIND, route.namespace, route.name, r.source.rule_name))
            points += [
                Target(route.KIND, route.namespace, route.name),
                Target("Gateway", gateway.namespace, gateway.name, listener),
                Target("Gateway", gateway.namespace, gateway.name),
            ]
            resolved = self._resolve(points, route.key)
            self._memo[key] = resolved
        self.clusters[f"{gateway.namespace}/{gateway.name}"].update(resolved.clusters)
        if resolved.failed_because is not None:
            if isinstance(r.action, ir.DirectResponse) and r.replaced_because:
                return r  # already a 500 for a reason of its own
            return dataclasses.replace(r, action=ir.DirectResponse(500, INVALID_POLICY_BODY),
                                       replaced_because=resolved.failed_because)
        if resolved.policy is None:
            return r
        return dataclasses.replace(r, policy=resolved.policy)

    def _resolve(self, points: list[Target], route_key: ObjectKey) -> _Resolved:
        levels = [(pt, self.by_target.get(pt, [])) for pt in points]
        everything = [a for _, atts in levels for a in atts]
        if not everything:
            return _Resolved(None, None, {})
        route_out = self._route_outcomes[route_key]
        for a in everything:
            a.state.outcome(a.target).routes += 1
            if a.state.key not in route_out:
                route_out[a.state.key] = Outcome()
            route_out[a.state.key].routes += 1

        invalid = [a for a in everything if a.state.errors]
        if invalid:
            names = sorted({a.state.key for a in invalid})
            for a in everything:
                out, rout = a.state.outcome(a.target), route_out[a.state.key]
                for o in (out, rout):
                    o.failed_closed += 1
                    o.blocked_by.update(n for n in names if n != a.state.key)
            first = invalid[0].state
            return _Resolved(None, f"TrafficPolicy {first.key} is invalid: {first.errors[0]}", {})

        # Priority order: most specific point first, oldest first within a point.
        # `shadowed_by`: a newer targetRefs policy at a point where an older one also
        # attaches through targetRefs (only the oldest of those is applied).
        prio: list[tuple[Attachment, Attachment | None]] = []
        for _pt, atts in levels:
            first_ref: Attachment | None = None
            for a in atts:
                if a.state.unresolved is not None:
                    continue
                shadowed_by = None
                if a.by_ref:
                    if first_ref is None:
                        first_ref = a
                    else:
                        shadowed_by = first_ref
                prio.append((a, shadowed_by))

        chosen: list[tuple[PolicyField, list[Attachment]]] = []
        for f in FIELDS:
            setters = [(a, s) for a, s in prio if f.name in a.state.values]
            if not setters:
                continue
            deep = f.deep_mergeable and f.name in self.deep
            eligible = [a for a, s in setters if s is None or deep]
            contributors = eligible if deep else eligible[:1]
            winner = contributors[0] if contributors else None
            for a, shadowed_by in setters:
                self._record(f.name, a, shadowed_by, winner, contributors, route_out[a.state.key])
            if contributors:
                chosen.append((f, contributors))
        # Routes whose fields come from the same policies share one resolution.
        key = tuple((f.name, tuple(a.state.key for a in contributors)) for f, contributors in chosen)
        resolved = self._by_contributors.get(key)
        if resolved is None:
            resolved = self._by_contributors[key] = self._build(chosen)
        return resolved

    def _build(self, chosen: list[tuple[PolicyField, list[Attachment]]]) -> _Resolved:
        ctx = CompileContext(self.store)
        settings: dict[str, Any] = {}
        sources: dict[str, tuple[datetime, str, str]] = {}
        for f, contributors in chosen:
            try:
                settings.update(self._compile_field(ctx, f, contributors))
            except (Invalid, Unresolved) as err:
                # Values valid alone that cannot be served together (a merge): fail closed.
                keys = ", ".join(a.state.key for a in contributors)
                return _Resolved(None, f"{f.name} of TrafficPolicies {keys} cannot be combined: {err}", {})
            for a in contributors:
                sources[a.state.key] = a.state.order
        if all(v is None or v == _NO_HEADERS for v in settings.values()):
            return _Resolved(None, None, ctx.clusters)
        policy = ir.RoutePolicy(**settings, sources=tuple(sorted(sources, key=lambda k: sources[k])))
        return _Resolved(policy, None, ctx.clusters)

    def _compile_field(self, ctx: CompileContext, f: PolicyField, contributors: list[Attachment]) -> dict[str, Any]:
        key = (f.name, tuple(a.state.key for a in contributors))
        cached = self._compiled.get(key)
        if cached is None:
            value = contributors[0].state.values[f.name]
            for a in contributors[1:]:
                value = f.merge(value, a.state.values[f.name])
            own = CompileContext(self.store)
            cached = (f.compile(own, value, f"spec.{f.name}"), own.clusters)
            self._compiled[key] = cached
        ctx.clusters.update(cached[1])
        return cached[0]

    def _record(self, name: str, a: Attachment, shadowed_by: Attachment | None, winner: Attachment | None,
                contributors: list[Attachment], route_out: Outcome) -> None:
        outs = (a.state.outcome(a.target), route_out)
        if winner is not None and a is winner:
            for o in outs:
                o.applied.add(name)
                if len(contributors) > 1:
                    o.merged_with.setdefault(name, set()).update(c.state.key for c in contributors[1:])
            return
        if winner is not None and any(c is a for c in contributors):
            for o in outs:
                o.merged_into[name] = winner.state.key
            return
        if shadowed_by is not None:
            why = (f"only the oldest policy targeting {a.target} through targetRefs is applied: "
                   f"{shadowed_by.state.key}")
        elif winner is None:
            why = "no policy's value could be applied"
        elif winner.target == a.target:
            why = f"overridden by older policy {winner.state.key}"
        elif winner.target.level > a.target.level:
            why = f"overridden by policy {winner.state.key} on the more specific {winner.target}"
        else:
            why = f"overridden by older policy {winner.state.key} on {winner.target}"
        for o in outs:
            o.lost.setdefault(name, {})[why] = None

    # --- status ---------------------------------------------------------------------------

    def write_status(self, status: dict[ObjectKey, dict[str, Any]]) -> None:
        for state in self.states:
            status[state.policy.key] = self._policy_status(state)
        for ext in self.store.list(GatewayExtension):
            status[ext.key] = extension_status(self.store, ext)
        self._affected_conditions(status)

    def _accepted(self, state: PolicyState) -> dict[str, Any]:
        gen = state.policy.generation
        if state.errors:
            shown = "; ".join(state.errors[:5]) + (f"; and {len(state.errors) - 5} more" if len(state.errors) > 5 else "")
            return condition("Accepted", False, "Invalid", f"invalid field {shown}", gen)
        return condition("Accepted", True, "Valid", "the policy is valid", gen)

    def _applied(self, state: PolicyState, att: Attachment) -> tuple[bool, str, str]:
        if state.errors:
            out = state.outcomes.get(att.target)
            tail = ("; the routes it targets answer 500 until it is fixed"
                    if out and out.failed_closed else "")
            return False, "Invalid", f"not applied: the policy is invalid{tail}"
        if att.problem is not None:
            return False, att.problem[0], att.problem[1]
        if state.unresolved is not None:
            return False, state.unresolved.reason, state.unresolved.message
        out = state.outcomes.get(att.target)
        if out is None or out.routes == 0:
            return False, "NoRoutes", _no_routes(att.target)
        return _describe(out, str(att.target), self._described)

    def _policy_status(self, state: PolicyState) -> dict[str, Any]:
        gen = state.policy.generation
        accepted = self._accepted(state)
        ancestors = []
        results = []
        for att in sorted(state.attachments, key=lambda a: (a.target.kind, a.target.name, a.target.section or "")):
            ok, reason, message = self._applied(state, att)
            results.append((ok, reason, message, att))
            ancestors.append({
                "ancestorRef": att.target.ancestor_ref(),
                "controllerName": CONTROLLER_NAME,
                "conditions": [dict(accepted), condition("Applied", ok, reason, message, gen)],
            })
        notes = "; ".join(state.notes)
        if state.errors:
            summary = condition("Applied", False, "Invalid", "not applied: the policy is invalid", gen)
        elif not results:
            unmatched = notes or "no target"
            reason = "NoTargetMatched" if state.notes else "TargetNotFound"
            summary = condition("Applied", False, reason, f"not applied: {unmatched}", gen)
        else:
            applied = [r for r in results if r[0]]
            extra = f"; {notes}" if notes else ""
            if applied:
                where = ", ".join(str(r[3].target) for r in applied)
                reason = "Applied" if len(applied) == len(results) else "PartiallyApplied"
                summary = condition("Applied", True, reason,
                                    f"applied to {len(applied)} of {len(results)} targets ({where}){extra}", gen)
            else:
                first = results[0]
                summary = condition("Applied", False, first[1], f"not applied: {first[2]}{extra}", gen)
        out: dict[str, Any] = {"conditions": [accepted, summary], "ancestors": ancestors[:MAX_ANCESTORS]}
        return out

    def _affected_conditions(self, status: dict[ObjectKey, dict[str, Any]]) -> None:
        """GEP-713's <Kind>Affected condition on the HTTPRoutes and Gateways policies target."""
        routes: dict[ObjectKey, dict[str, str]] = defaultdict(dict)
        gateways: dict[ObjectKey, dict[str, str]] = defaultdict(dict)
        for state in self.states:
            for att in state.attachments:
                cls = HTTPRoute if att.target.kind == "HTTPRoute" else Gateway
                key = ObjectKey(cls.KIND, att.target.namespace, att.target.name)
                bucket = routes if cls is HTTPRoute else gateways
                ok, reason, message = self._applied(state, att)
                if cls is HTTPRoute and key in self._route_outcomes and state.key in self._route_outcomes[key]:
                    continue  # described from what happened on the route's own rules below
                bucket[key][state.key] = _short(ok, reason, message)
        states = {state.key: state for state in self.states}
        for route_key, per_policy in self._route_outcomes.items():
            for policy_key, out in per_policy.items():
                state = states[policy_key]
                if state.errors:
                    routes[route_key][state.key] = (f"invalid, so the route rules it targets answer 500 until it "
                                                    f"is fixed: {state.errors[0]}")
                elif state.unresolved is not None:
                    routes[route_key][state.key] = f"not applied: {state.unresolved.message}"
                else:
                    ok, reason, message = _describe(out, f"HTTPRoute {route_key.ref}", self._described)
                    routes[route_key][state.key] = _short(ok, reason, message)
        for key, entries in routes.items():
            st = status.get(key)
            if st is None:
                continue
            cond = _affected(entries, self._generation(key))
            # A new status object: translation may reuse the old one across passes.
            status[key] = {**st, "parents": [
                {**parent, "conditions": [*parent["conditions"], dict(cond)]} for parent in st.get("parents", [])
            ]}
        for key, entries in gateways.items():
            st = status.get(key)
            if st is not None and "conditions" in st:
                st["conditions"].append(_affected(entries, self._generation(key)))

    def _generation(self, key: ObjectKey) -> int:
        obj = self.store.get_key(key)
        return obj.generation if obj is not None else 1


def _no_routes(target: Target) -> str:
    if target.kind == "HTTPRoute":
        what = "is not attached to any lychgate Gateway listener"
        return f"{target} {what}, so there is nothing to apply the policy to"
    return f"{target} has no attached routes yet, so there is nothing to apply the policy to"


Described = dict[tuple[Any, ...], tuple[bool, str, str]]


def _describe(out: Outcome, where: str, memo: Described) -> tuple[bool, str, str]:
    """(applied?, reason, message) for one policy's outcome at one target (memoized: the
    same outcome on thousands of routes is described once)."""
    signature = (
        out.failed_closed == out.routes, where if out.failed_closed else "", frozenset(out.applied),
        tuple(sorted(out.merged_into.items())), tuple(sorted((f, tuple(sorted(p))) for f, p in out.merged_with.items())),
        tuple(sorted((f, tuple(sorted(w))) for f, w in out.lost.items())),
        (out.failed_closed, out.routes, tuple(sorted(out.blocked_by))) if out.failed_closed else None,
    )
    cached = memo.get(signature)
    if cached is None:
        cached = memo[signature] = _describe_uncached(out, where)
    return cached


def _describe_uncached(out: Outcome, where: str) -> tuple[bool, str, str]:
    if out.failed_closed and out.failed_closed == out.routes:
        blockers = ", ".join(sorted(out.blocked_by)) or "another policy"
        return False, "Invalid", (f"not applied: TrafficPolicy {blockers} is invalid, so the routes of "
                                  f"{where} answer 500 until it is fixed")
    applied = sorted(out.applied)
    merged = sorted(out.merged_into)
    lost = {f: _join(whys) for f, whys in out.lost.items() if f not in out.applied and f not in out.merged_into}
    parts = []
    if applied:
        detail = []
        for f in applied:
            partners = out.merged_with.get(f)
            detail.append(f"{f} (deep-merged with {', '.join(sorted(partners))})" if partners else f)
        parts.append("applied: " + ", ".join(detail))
    if merged:
        parts.append("deep-merged into older or more specific policies: "
                     + ", ".join(f"{f} (with {out.merged_into[f]})" for f in merged))
    if lost:
        by_why: dict[str, list[str]] = defaultdict(list)
        for f, why in sorted(lost.items()):
            by_why[why].append(f)
        parts.append("; ".join(f"{', '.join(fs)} {why}" if why.startswith("overridden") else f"{', '.join(fs)}: {why}"
                               for why, fs in by_why.items()))
    partial = {f: _join(whys) for f, whys in out.lost.items() if f in out.applied}
    if partial:
        parts.append("on some routes " + "; ".join(f"{f} {why}" for f, why in sorted(partial.items())))
    if out.failed_closed:
        parts.append(f"{out.failed_closed} of {out.routes} route rules answer 500 because "
                     f"TrafficPolicy {', '.join(sorted(out.blocked_by))} is invalid")
    message = "; ".join(parts) or "applied"
    if not applied and not merged:
        reason = "Overridden" if lost else "Applied"
        return (not lost), reason, message if lost else "applied"
    if lost:
        return True, "PartiallyApplied", message
    if merged:
        return True, "Merged", message
    return True, "Applied", message


def _join(whys: dict[str, None]) -> str:
    """Several reasons a field lost, in a stable order and without repeating 'overridden by'."""
    ordered = sorted(whys)
    prefix = "overridden by "
    if len(ordered) > 1 and all(w.startswith(prefix) for w in ordered):
        return prefix + ", ".join(w.removeprefix(prefix) for w in ordered)
    return "; ".join(ordered)


def _short(ok: bool, reason: str, message: str) -> str:
    return message if message.startswith(("applied", "not applied", "invalid")) or ok else f"not applied ({reason}): {message}"


def _affected(entries: dict[str, str], generation: int) -> dict[str, Any]:
    text = "; ".join(f"TrafficPolicy {key}: {what}" for key, what in sorted(entries.items()))
    any_applied = any(v.startswith(("applied", "deep-merged")) for v in entries.values())
    reason = "Applied" if any_applied else "NotApplied"
    return condition(AFFECTED, True, reason, text, generation)
