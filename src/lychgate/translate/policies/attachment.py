"""TrafficPolicy attachment: targets, precedence, merging and the status that explains it.

The rules, in the order they are applied to every route rule a Gateway serves:

1. Attachment points, most specific first: a rule's ExtensionRef filter, the
   HTTPRoute rule (sectionName = rule name), the HTTPRoute, a ListenerSet's
   listener, the ListenerSet, the Gateway listener (sectionName = listener
   name), the Gateway. A field set at a more specific point overrides it, but
   for fields that layer across tiers (headerModifiers: PolicyField.
   layers_across_tiers) the most specific value of each tier applies.
2. At one point, policies are ordered oldest first (creationTimestamp, then
   namespace/name) and, per field, the oldest that sets it wins: spec §3 rule 1
   ("only the oldest is applied") holds field by field, as in kgateway, so a
   newer policy's `buffer` still applies beside an older one's `transformation`,
   and the newer policy's status names each field it lost and to whom.
3. With `policyMerge.trafficPolicy.<field>: DeepMerge` (extAuth, extProc,
   transformation) that field merges across all of those policies instead,
   the higher-priority value winning where both set the same leaf (extProc
   keeps one entry per GatewayExtension, so each extension named runs:
   PolicyField.superseded says which values take part).
4. A TrafficPolicy without targets that an HTTPRoute rule names in an
   `ExtensionRef` filter applies to that rule alone (kgateway's way to put a
   policy on one rule), as the most specific attachment point.
5. A policy whose references cannot be followed (GatewayExtension missing,
   Service missing, ReferenceGrant missing) is valid but not applied.
6. An invalid policy is not applied. Where it sets a field no valid policy at
   the same or a more specific point supplies for a route rule, that rule
   answers 500 until it is fixed (standard validation, spec §7): a broken auth
   policy must not leave its routes open. Where valid policies there supply
   every field it sets, they apply (kgateway). Other routes are not affected.
7. Likewise a policy whose security field (PolicyField.security: extAuth,
   jwtAuth, ...) cannot be resolved: rule 5 would publish the route without
   the authentication it asks for, so its routes answer 500 instead.

Every outcome is recorded per (policy, target) while routes are resolved
(policies/ledger.py), so the status says what actually reached the proxy, and
why not when it did not (policies/outcomes.py). The index is kept from pass to
pass: a change redoes the policies it reaches, and only the route rules under
the targets whose policies changed are resolved again.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.gateway import GROUP as GATEWAY_GROUP
from lychgate.api.gateway import X_GROUP as X_GATEWAY_GROUP
from lychgate.api.gateway import (
    Gateway,
    GRPCRoute,
    GRPCRouteFilter,
    GRPCRouteRule,
    HTTPRoute,
    HTTPRouteFilter,
    HTTPRouteRule,
    ListenerSet,
)
from lychgate.api.policy import GatewayExtension, TrafficPolicy, is_policy_ref
from lychgate.store import Read, Store, reached
from lychgate.translate.policies.extensions import SERVICES as EXTENSION_SERVICES
from lychgate.translate.policies.extensions import extension_status, extension_type
from lychgate.translate.policies.fields import FIELDS, PolicyField
from lychgate.translate.policies.ledger import Ledger, Mark, Owner, Record
from lychgate.translate.policies.outcomes import StatusWriter
from lychgate.translate.rule_filters import REPLACED_ROUTE_BODY
from lychgate.translate.values import CompileContext, Invalid, Unresolved

# kgateway's words first (its suites look for them), then where to look.
INVALID_POLICY_BODY = (f"{REPLACED_ROUTE_BODY}A policy of this route is invalid; see the TrafficPolicy status.\n")
ROUTE_KINDS: dict[str, type[HTTPRoute] | type[GRPCRoute]] = {"HTTPRoute": HTTPRoute, "GRPCRoute": GRPCRoute}
# What targetRefs may name, by group: the experimental XListenerSet is a ListenerSet here.
TARGET_KINDS = {(GATEWAY_GROUP, "Gateway"): "Gateway", (GATEWAY_GROUP, "HTTPRoute"): "HTTPRoute",
                (GATEWAY_GROUP, "GRPCRoute"): "GRPCRoute", (GATEWAY_GROUP, "ListenerSet"): "ListenerSet",
                (X_GATEWAY_GROUP, "XListenerSet"): "ListenerSet"}
_LEVELS = {"Gateway": 0, "ListenerSet": 2, "HTTPRoute": 4, "GRPCRoute": 4}
_TIERS = {"Gateway": "Gateway", "ListenerSet": "ListenerSet", "HTTPRoute": "route", "GRPCRoute": "route"}


@dataclass(frozen=True)
class Target:
    """An attachment point. `section` is a listener (Gateway, ListenerSet) or a rule name
    (routes); `rule` is set for a rule whose ExtensionRef filter names the policy."""

    kind: str
    namespace: str
    name: str
    section: str | None = None
    rule: int | None = None

    @property
    def level(self) -> int:
        """Gateway 0, its listener 1, ListenerSet 2, its listener 3, route 4, rule 5, a rule's
        ExtensionRef 6: higher is more specific."""
        return _LEVELS[self.kind] + (1 if self.section else 0) + (2 if self.rule is not None else 0)

    def ancestor_ref(self) -> dict[str, Any]:
        ref: dict[str, Any] = {"group": GATEWAY_GROUP, "kind": self.kind,
                               "namespace": self.namespace, "name": self.name}
        if self.section:
            ref["sectionName"] = self.section
        return ref

    def __str__(self) -> str:
        where = f"{self.kind} {self.namespace}/{self.name}"
        if self.rule is not None:
            return f"{where} rules[{self.rule}] (ExtensionRef)"
        part = "rule" if self.kind in ROUTE_KINDS else "listener"
        return f"{where} {part} {self.section}" if self.section else where


@dataclass(eq=False)
class PolicyState:
    policy: TrafficPolicy
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    unresolved: Unresolved | None = None
    closed_by: Unresolved | None = None  # an unresolved security field: its routes answer 500
    attachments: list[Attachment] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # selectors that matched nothing, ...
    # What validating and attaching read from the store: a change to any of it redoes that step.
    validation_reads: frozenset[Read] = frozenset()
    attach_reads: frozenset[Read] = frozenset()
    key: str = ""  # "namespace/name"
    order: tuple[datetime, str, str] = (datetime.min, "", "")  # oldest first

    def __post_init__(self) -> None:
        self.key = f"{self.policy.namespace}/{self.policy.name}"
        self.order = (self.policy.created, self.policy.namespace, self.policy.name)

    def reached(self) -> set[tuple[Target, bool]]:
        """(target, usable) of each attachment: what resolution depends on."""
        return {(a.target, a.problem is None) for a in self.attachments}


@dataclass(eq=False)
class Attachment:
    state: PolicyState
    target: Target
    via: str
    problem: tuple[str, str] | None = None  # (reason, message) when the target is unusable


@dataclass(frozen=True)
class Resolved:
    """The effective policy of a route rule, or why it answers 500 instead."""

    policy: ir.RoutePolicy | None
    failed_because: str | None
    clusters: dict[str, ir.Cluster]


_NOTHING = Resolved(None, None, {})


class _Marking:
    """One attachment's mark, while a route rule is resolved (ledger.Mark once done)."""

    __slots__ = ("applied", "lost", "merged_into", "merged_with")

    def __init__(self) -> None:
        self.applied: set[str] = set()
        self.merged_into: dict[str, str] = {}
        self.merged_with: dict[str, set[str]] = {}
        self.lost: set[tuple[str, str]] = set()

    def mark(self) -> Mark:
        return Mark(applied=frozenset(self.applied), merged_into=tuple(sorted(self.merged_into.items())),
                    merged_with=tuple(sorted((f, frozenset(p)) for f, p in self.merged_with.items())),
                    lost=tuple(sorted(self.lost)))


class PolicyIndex:
    """The TrafficPolicies and where they attach, kept from pass to pass (translate/aggregate.py
    holds one): `refresh` redoes only the policies a change reaches and says which targets
    changed; `apply` is called for every route rule a Gateway serves."""

    def __init__(self) -> None:
        self.store = Store()
        self.gateways: Mapping[tuple[str, str], Gateway] = {}
        self.listeners: Mapping[tuple[str, str], set[str]] = {}
        self.deep: frozenset[str] = frozenset()
        self._states: dict[ObjectKey, PolicyState] = {}
        self.by_key: dict[str, PolicyState] = {}  # by "namespace/name"
        self.restated: set[str] = set()  # policies whose state changed since the status was written
        self._readers: dict[Read, set[ObjectKey]] = {}  # read token -> policies that read it
        self.by_target: dict[Target, list[Attachment]] = {}
        self.ledger = Ledger()
        self.status = StatusWriter()
        # (field, contributing policies) -> (route settings, clusters): merged once, not per route
        self._compiled: dict[tuple[str, tuple[str, ...]], tuple[dict[str, Any], dict[str, ir.Cluster]]] = {}
        self._by_contributors: dict[tuple[tuple[str, tuple[str, ...]], ...], Resolved] = {}
        # the attachments at a rule's points (by identity) -> its resolution; emptied whenever
        # a policy changes (new attachment objects: an id of a dropped one may come back)
        self._by_attachments: dict[Hashable, tuple[Resolved, tuple[Record, ...]]] = {}
        self._marks: dict[Mark, Mark] = {}  # one object per distinct mark (thousands of rules share a few)
        # Every usable extension gets a filter on every listener (see ir.HTTPListener.extensions).
        self.extensions: tuple[ir.ExtensionService, ...] = ()
        self._extension_clusters: dict[str, ir.Cluster] = {}
        self._extension_reads: frozenset[Read] | None = None  # None: not indexed yet
        self.active = False  # any TrafficPolicy exists (see filters_for)
        self.global_namespace = ""  # kgateway's globalPolicyNamespace: its selectors reach every namespace
        # ExtensionRef filters naming TrafficPolicies: route -> (policy, rule, field path), and
        # (namespace, policy) -> (route kind, route, rule, field path)
        self._route_refs: dict[ObjectKey, frozenset[tuple[str, int, str]]] = {}
        self._referrers: dict[tuple[str, str], set[tuple[str, str, int, str]]] = {}

    def filters_for(self, vhosts: Iterable[ir.VirtualHost]) -> tuple[tuple[ir.ExtensionService, ...], bool]:
        """The extension services and whether the policy filters go into the chain of a
        listener serving `vhosts`: only once one of its routes has a policy, so a
        listener without policies carries no filter it does not use. From then on
        every usable extension and policy filter is there (off by default), and
        later policies change only routes (see ir.HTTPListener.extensions)."""
        used = self.active and any(vh.policies for vh in vhosts)
        return (self.extensions if used else ()), used

    def refresh(self, store: Store, gateways: Mapping[tuple[str, str], Gateway],
                listeners: Mapping[tuple[str, str], set[str]], deep: frozenset[str],
                changes: set[Read] | None, global_namespace: str = "") -> set[Target]:
        """Bring the policies up to date with the store: `changes` are the read tokens
        touched since the last refresh (None: redo everything). Returns the targets whose
        policies or attachments changed: the route rules under them must be resolved again.
        Policies in `global_namespace` select targets in every namespace."""
        if global_namespace != self.global_namespace:
            self.global_namespace, changes = global_namespace, None
        self.store, self.gateways, self.listeners, self.deep = store, gateways, listeners, deep
        touched = reached(changes) if changes is not None else None
        if self._extension_reads is None or touched is None or not self._extension_reads.isdisjoint(touched):
            self._index_extensions()
        referenced = {ObjectKey(TrafficPolicy.KIND, ns, name) for ns, name in self._update_referrers(changes)}
        if touched is None:
            candidates = self._states.keys() | {p.key for p in store.list(TrafficPolicy)}
        else:  # the policies that changed, those that read something that changed, and those
            # that route rules started or stopped naming in ExtensionRef filters
            candidates = {ident for what, ident in changes or ()
                          if isinstance(ident, ObjectKey) and ident.kind == TrafficPolicy.KIND} | referenced
            for token in touched:
                candidates |= self._readers.get(token, set())
        changed: set[Target] = set()
        content_changed = False
        for key in candidates:
            old = self._states.get(key)
            policy = store.get_key(key)
            if not isinstance(policy, TrafficPolicy):
                if old is not None:
                    changed |= {t for t, _ in old.reached()}
                    self._forget(old)
                    content_changed = True
                continue
            if old is None or old.policy is not policy or touched is None \
                    or not old.validation_reads.isdisjoint(touched):
                state = PolicyState(policy)
                self._validate(state)
                self._attach(state)
                changed |= {t for t, _ in state.reached() | (old.reached() if old else set())}
                content_changed = True
            elif key in referenced or not old.attach_reads.isdisjoint(touched):
                state = dataclasses.replace(old, attachments=[], notes=[])
                self._attach(state)
                changed |= {t for t, _ in state.reached() ^ old.reached()}
            else:
                continue
            if old is not None:
                self._forget(old)
            self._remember(state)
        if content_changed:
            self._compiled.clear()
            self._by_contributors.clear()
            self._marks.clear()
        if self.restated:
            self._by_attachments.clear()
        self.active = bool(self._states)
        return changed

    def _update_referrers(self, changes: set[Read] | None) -> set[tuple[str, str]]:
        """Keep `_referrers` (which route rules name which policy in an ExtensionRef filter)
        up to date with the routes that changed; returns the (namespace, policy) pairs whose
        referrers changed. Kept here, from the routes' side, so that a policy does not read
        every route of its namespace, and a route edit re-attaches only the policies it names."""
        if changes is None:
            keys = set(self._route_refs) | {r.key for cls in ROUTE_KINDS.values() for r in self.store.list(cls)}
        else:
            keys = {ident for what, ident in changes
                    if what == "key" and isinstance(ident, ObjectKey) and ident.kind in ROUTE_KINDS}
        changed: set[tuple[str, str]] = set()
        for key in keys:
            route = self.store.get_key(key)
            new = frozenset(_extension_refs(route)) if isinstance(route, (HTTPRoute, GRPCRoute)) else frozenset()
            old = self._route_refs.pop(key, frozenset())
            if new:
                self._route_refs[key] = new
            for name, rule, via in old - new:
                referrers = self._referrers[(key.namespace, name)]
                referrers.discard((key.kind, key.name, rule, via))
                if not referrers:
                    del self._referrers[(key.namespace, name)]
            for name, rule, via in new - old:
                self._referrers.setdefault((key.namespace, name), set()).add((key.kind, key.name, rule, via))
            changed |= {(key.namespace, name) for name, _, _ in old ^ new}
        return changed

    def _remember(self, state: PolicyState) -> None:
        key = state.policy.key
        self._states[key] = state
        self.by_key[state.key] = state
        self.restated.add(state.key)
        for token in state.validation_reads | state.attach_reads:
            self._readers.setdefault(token, set()).add(key)
        for att in state.attachments:
            if att.problem is None:  # each target's policies stay in priority order: oldest first
                bisect.insort(self.by_target.setdefault(att.target, []), att, key=lambda a: a.state.order)

    def _forget(self, state: PolicyState) -> None:
        del self._states[state.policy.key]
        del self.by_key[state.key]
        self.restated.add(state.key)
        for att in state.attachments:
            if att.problem is None:
                atts = self.by_target[att.target]
                atts.remove(att)
                if not atts:
                    del self.by_target[att.target]
        # A state and its attachments point at each other: freed at once without the cyclic
        # collector, which never sees what the first pass froze (controlplane: gc.freeze).
        state.attachments = []
        for token in state.validation_reads | state.attach_reads:
            readers = self._readers.get(token)
            if readers is not None:
                readers.discard(state.policy.key)
                if not readers:
                    del self._readers[token]

    def _index_extensions(self) -> None:
        with self.store.tracking() as reads:
            self._index_extensions_reading()
        self._extension_reads = frozenset(reads)

    def _index_extensions_reading(self) -> None:
        found: list[ir.ExtensionService] = []
        self._extension_clusters = {}
        for ext in sorted(self.store.list(GatewayExtension), key=lambda e: (e.namespace, e.name)):
            build = EXTENSION_SERVICES.get(extension_type(ext) or "")
            if build is None:
                continue
            try:
                service, clusters = build(self.store, ext.namespace, ext.name)
            except (Invalid, Unresolved):
                continue  # its status says why; policies using it are not applied
            found.append(service)
            self._extension_clusters.update((c.name, c) for c in clusters)
        self.extensions = tuple(found)

    def clusters_for(self, gateway_ref: str) -> dict[str, ir.Cluster]:
        """The clusters of every usable extension, and any others the Gateway's routes use."""
        return {**self._extension_clusters, **self.ledger.clusters(gateway_ref)}

    # --- per policy: validity, references, targets -----------------------------------

    def _validate(self, state: PolicyState) -> None:
        with self.store.tracking() as reads:
            self._check(state)
        state.validation_reads = frozenset(reads)

    def _attach(self, state: PolicyState) -> None:
        with self.store.tracking() as reads:
            self._find_targets(state)
        state.attach_reads = frozenset(reads)

    def _check(self, state: PolicyState) -> None:
        spec = state.policy.spec
        ctx = CompileContext(self.store)
        kinds = {TARGET_KINDS.get((t.group, t.kind), t.kind) for t in spec.target_refs}
        kinds |= {TARGET_KINDS.get((t.group, t.kind), t.kind) for t in spec.target_selectors}
        for f in FIELDS:
            value = f.value(state.policy)
            if value is None:
                continue
            state.values[f.name] = value
            if f.target_kinds is not None and not kinds <= f.target_kinds:
                state.errors.append(f"spec.{f.name}: can only be used when targeting "
                                    f"{' or '.join(sorted(f.target_kinds))} resources")
            try:
                f.compile(ctx, value, f"spec.{f.name}")
            except Invalid as err:
                state.errors.append(str(err))
            except Unresolved as err:
                state.unresolved = state.unresolved or err
                if f.security:
                    state.closed_by = state.closed_by or err

    def _find_targets(self, state: PolicyState) -> None:
        policy = state.policy
        ns = policy.namespace
        seen: set[Target] = set()

        def add(target: Target, via: str, problem: tuple[str, str] | None = None) -> None:
            if target not in seen:
                seen.add(target)
                state.attachments.append(Attachment(state, target, via, problem))

        for i, ref in enumerate(policy.spec.target_refs):
            path = f"spec.targetRefs[{i}]"
            kind = self._kind(state, ref.group, ref.kind, path)
            if kind is None:
                continue
            target = Target(kind, ns, ref.name, ref.section_name)
            add(target, path, self._target_problem(target))
        for i, sel in enumerate(policy.spec.target_selectors):
            path = f"spec.targetSelectors[{i}]"
            kind = self._kind(state, sel.group, sel.kind, path)
            if kind is None:
                continue
            if not sel.match_labels:
                state.errors.append(f"{path}.matchLabels: at least one label is required")
                continue
            wanted = list(sel.match_labels.items())
            where = None if ns == self.global_namespace else ns
            candidates: list[Gateway] | list[ListenerSet] | list[HTTPRoute | GRPCRoute] = (
                self.store.list(Gateway, where) if kind == "Gateway"
                else self.store.list(ListenerSet, where) if kind == "ListenerSet"
                else self.store.list(ROUTE_KINDS[kind], where))
            matched = sorted(
                (o for o in candidates if all(o.metadata.labels.get(k) == v for k, v in wanted)),
                key=lambda o: (o.namespace, o.name),
            )
            labels = ",".join(f"{k}={v}" for k, v in sorted(sel.match_labels.items()))
            if not matched:
                scope = "in any namespace" if where is None else f"in namespace {ns}"
                state.notes.append(f"{path} matched no {sel.kind} with labels {labels} {scope}")
                continue
            for obj in matched:
                target = Target(kind, obj.namespace, obj.name, sel.section_name)
                add(target, path, self._target_problem(target, obj))
        # Rules that name the policy in an ExtensionRef filter (kept by refresh, not read here).
        for kind, route, rule, via in sorted(self._referrers.get((ns, policy.name), ())):
            add(Target(kind, ns, route, rule=rule), via)
        if not state.attachments and not policy.spec.target_refs and not policy.spec.target_selectors:
            state.notes.append("no targetRefs or targetSelectors, and no HTTPRoute rule names the policy in "
                               "an ExtensionRef filter, so it applies nowhere")

    def _kind(self, state: PolicyState, group: str, kind: str, path: str) -> str | None:
        """The kind a target reference reaches, or None (an error on the policy)."""
        found = TARGET_KINDS.get((group, kind))
        if found is None:
            state.errors.append(f"{path}: {group}/{kind} cannot be targeted; use {GATEWAY_GROUP} Gateway, "
                                f"ListenerSet, HTTPRoute or GRPCRoute (or {X_GATEWAY_GROUP} XListenerSet)")
        return found

    def _target_problem(self, target: Target, obj: Gateway | ListenerSet | HTTPRoute | GRPCRoute | None = None
                        ) -> tuple[str, str] | None:
        if target.kind in ROUTE_KINDS:
            cls = ROUTE_KINDS[target.kind]
            route = obj if isinstance(obj, cls) else self.store.get(cls, target.namespace, target.name)
            if route is None:
                return ("TargetNotFound", f"{target.kind} {target.namespace}/{target.name} not found")
            if target.section and not any(r.name == target.section for r in route.spec.rules):
                names = ", ".join(r.name for r in route.spec.rules if r.name) or "none has a name"
                return ("TargetNotFound", f"{target.kind} {target.namespace}/{target.name} has no rule named "
                                          f"{target.section} (rules: {names})")
            return None
        if target.kind == "ListenerSet":
            ls = obj if isinstance(obj, ListenerSet) else self.store.get(ListenerSet, target.namespace, target.name)
            if ls is None:
                return ("TargetNotFound", f"ListenerSet {target.namespace}/{target.name} not found")
            if target.section and not any(lst.name == target.section for lst in ls.spec.listeners):
                return ("TargetNotFound", f"ListenerSet {target.namespace}/{target.name} has no listener named "
                                          f"{target.section}")
            parent = (ls.spec.parent_ref.namespace or ls.namespace, ls.spec.parent_ref.name)
            if parent not in self.gateways:
                return ("TargetNotFound", f"ListenerSet {target.namespace}/{target.name} belongs to Gateway "
                                          f"{parent[0]}/{parent[1]}, which lychgate does not serve")
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

    def apply(self, owner: Owner, gateway: Gateway, listener: str, route: HTTPRoute | GRPCRoute,
              r: ir.Route) -> ir.Route:
        """The route with its effective policy (or a 500 if an invalid policy targets it).
        `owner` is what uses it (a virtual host): the ledger keeps the resolution while
        its owners stay (Ledger.release)."""
        if not self.by_target:
            return r
        src = r.source
        key = self.ledger.key((gateway.namespace, gateway.name, listener),
                              ObjectKey(route.KIND, route.namespace, route.name), src)
        resolved = self.ledger.lookup(owner, key)
        if resolved is None:
            found = self._resolve(_points(gateway, listener, route, src))
            self.ledger.add(owner, key, found)
            resolved = found[0]
        if resolved.failed_because is not None:
            if isinstance(r.action, ir.DirectResponse) and r.replaced_because:
                return r  # already a 500 for a reason of its own
            return dataclasses.replace(r, action=ir.DirectResponse(500, INVALID_POLICY_BODY),
                                       replaced_because=resolved.failed_because)
        if resolved.policy is None:
            return r
        return dataclasses.replace(r, policy=resolved.policy)

    def _resolve(self, tiers: tuple[Tier, ...]) -> tuple[Resolved, tuple[Record, ...]]:
        """A route rule's effective policy from the policies at its attachment points, and
        what that did to each of them. It depends on those policies (and how delegating
        parents merge) only: the rules under the same ones (most rules of a Gateway) share
        one answer."""
        lists = [self.by_target.get(pt, ()) for tier in tiers for pt in tier.points]
        key = (tuple(tuple(map(id, atts)) for atts in lists),
               tuple((t.hop.prefer_parent, t.hop.deep_merge) for t in tiers if t.hop is not None))
        found = self._by_attachments.get(key)
        if found is None:
            found = self._by_attachments[key] = self._resolve_uncached(tiers, [a for atts in lists for a in atts])
        return found

    def _resolve_uncached(self, tiers: tuple[Tier, ...], everything: list[Attachment]
                          ) -> tuple[Resolved, tuple[Record, ...]]:
        if not everything:
            return _NOTHING, ()
        # Priority order: the attachment points by precedence (_precedence), oldest first
        # within a point. Invalid policies (and those whose security field cannot be
        # resolved) contribute nothing.
        points = [pt for tier in _precedence(tiers) for pt in tier.points]
        rank = {pt: i for i, pt in enumerate(points)}
        prio = [a for pt in points for a in self.by_target.get(pt, ())
                if a.state.unresolved is None and not a.state.errors]
        deep_hops = any(t.hop is not None and t.hop.deep_merge for t in tiers)

        marking = {id(a): _Marking() for a in everything}
        chosen: list[tuple[PolicyField, list[Attachment]]] = []
        for f in FIELDS:
            setters = [a for a in prio if f.name in a.state.values]
            if not setters:
                continue
            superseded_by: dict[int, tuple[Attachment, str]] = {}
            if f.combines_across_delegation and deep_hops and f.name not in self.deep:
                contributors = _fold(tiers, setters)
            elif f.deep_mergeable and f.name in self.deep:
                over = f.superseded([a.state.values[f.name] for a in setters])
                contributors = [a for a, o in zip(setters, over, strict=True) if o is None]
                superseded_by = {id(a): (setters[o[0]], o[1]) for a, o in zip(setters, over, strict=True) if o}
            elif f.merges_within_tier:
                route_tier = setters[0].target.level >= _LEVELS["HTTPRoute"]
                contributors = [a for a in setters if (a.target.level >= _LEVELS["HTTPRoute"]) == route_tier]
            elif f.layers_across_tiers:  # the winner of each tier: route, ListenerSet, Gateway
                per_tier: dict[str, Attachment] = {}
                for a in setters:
                    per_tier.setdefault(_TIERS[a.target.kind], a)
                contributors = list(per_tier.values())
            else:
                contributors = setters[:1]
            for a in setters:
                if f.layers_across_tiers and a in contributors:
                    marking[id(a)].applied.add(f.name)  # each tier's value applies in full
                else:
                    _record(f.name, a, contributors, marking[id(a)], superseded_by.get(id(a)))
            chosen.append((f, contributors))

        # A field an invalid (or unresolvable security) policy sets would be served without
        # what it asks for: the rule answers 500 instead (fail closed). Where a valid policy
        # at the same or a more specific point supplies the field, that one applies
        # (kgateway's valid-and-invalid ACL case) and the invalid policy is reported, not
        # served; a looser one further up never stands in for it.
        served_at = {f.name: rank[contributors[0].target] for f, contributors in chosen}
        blocking = [a for a in everything if (a.state.errors or a.state.closed_by)
                    and any(served_at.get(name, len(rank)) > rank[a.target] for name in a.state.values)]
        if blocking:
            names = sorted({a.state.key for a in blocking})
            records = tuple((a.state.key, a.target, self._intern(Mark(
                failed_closed=True, blocked_by=frozenset(n for n in names if n != a.state.key)))) for a in everything)
            first = blocking[0].state
            if first.closed_by is not None:
                return Resolved(None, f"TrafficPolicy {first.key} cannot be applied: {first.closed_by.message}",
                                {}), records
            return Resolved(None, f"TrafficPolicy {first.key} is invalid: {first.errors[0]}", {}), records

        records = tuple((a.state.key, a.target, self._intern(marking[id(a)].mark())) for a in everything)
        # Routes whose fields come from the same policies share one resolution.
        key = tuple((f.name, tuple(a.state.key for a in contributors)) for f, contributors in chosen)
        resolved = self._by_contributors.get(key)
        if resolved is None:
            resolved = self._by_contributors[key] = self._build(chosen)
        return resolved, records

    def _intern(self, mark: Mark) -> Mark:
        return self._marks.setdefault(mark, mark)

    def _build(self, chosen: list[tuple[PolicyField, list[Attachment]]]) -> Resolved:
        ctx = CompileContext(self.store)
        settings: dict[str, Any] = {}
        for f, contributors in chosen:
            try:
                settings.update(self._compile_field(ctx, f, contributors))
            except (Invalid, Unresolved) as err:
                # Values valid alone that cannot be served together (a merge): fail closed.
                keys = ", ".join(a.state.key for a in contributors)
                return Resolved(None, f"{f.name} of TrafficPolicies {keys} cannot be combined: {err}", {})
        if all(v is None or v == () or v == ir.NO_HEADERS for v in settings.values()):
            return Resolved(None, None, ctx.clusters)
        return Resolved(ir.shared_policy(ir.RoutePolicy(**settings)), None, ctx.clusters)

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

    # --- status ---------------------------------------------------------------------------

    def write_status(self, status: dict[ObjectKey, dict[str, Any]]) -> None:
        self.status.write(self.store, self.by_key, self.restated, self.ledger, status)
        self.restated.clear()
        for ext in self.store.list(GatewayExtension):
            status[ext.key] = extension_status(self.store, ext)


@dataclass(frozen=True)
class Tier:
    """Attachment points of one route rule that rank together, most specific first: the
    rule's own route, a delegating parent's (with `hop`: how it merges with the tiers
    before it), or the listener and Gateway the rule is served on."""

    points: tuple[Target, ...]
    hop: ir.DelegationHop | None = None


def _points(gateway: Gateway, listener: str, route: HTTPRoute | GRPCRoute, src: ir.RouteSource) -> tuple[Tier, ...]:
    """The attachment points of a route rule (src), by tier: the rule's ExtensionRef filter,
    the rule, its route; for a rule delegated to (translate/delegation.py), the same of
    each delegating parent rule, nearest first; then the listener (of a ListenerSet, and
    the set) and the Gateway."""

    def own(kind: str, namespace: str, name: str, rule: int, rule_name: str | None) -> tuple[Target, ...]:
        named = (Target(kind, namespace, name, rule_name),) if rule_name else ()
        return (Target(kind, namespace, name, rule=rule), *named, Target(kind, namespace, name))

    tiers = [Tier(own(src.kind, src.namespace, src.name, src.rule, src.rule_name))]
    tiers += [Tier(own(route.KIND, h.namespace, h.name, h.rule, h.rule_name), h) for h in src.delegated_by]
    # A ListenerSet's listener is "namespace/set/listener" (ListenerState.id).
    set_ns, _, rest = listener.partition("/")
    if rest:
        set_name, _, listener_name = rest.partition("/")
        outer = [Target("ListenerSet", set_ns, set_name, listener_name), Target("ListenerSet", set_ns, set_name)]
    else:
        outer = [Target("Gateway", gateway.namespace, gateway.name, listener)]
    tiers.append(Tier((*outer, Target("Gateway", gateway.namespace, gateway.name))))
    return tuple(tiers)


def _precedence(tiers: tuple[Tier, ...]) -> list[Tier]:
    """Tiers from the highest priority down: a delegating parent ranks below what it
    delegated to, or above it with a PreferParent priority (kgateway folds each parent
    into what is below it with the parent's inherited-policy-priority); the listener
    and Gateway last."""
    order = [tiers[0]]
    for tier in tiers[1:-1]:
        if tier.hop is not None and tier.hop.prefer_parent:
            order.insert(0, tier)
        else:
            order.append(tier)
    return [*order, tiers[-1]]


def _fold(tiers: tuple[Tier, ...], setters: list[Attachment]) -> list[Attachment]:
    """A field that combines (PolicyField.combines_across_delegation), across a delegation
    chain with a DeepMerge priority: each tier's oldest value, combined up the chain (the
    preferred side first), a shallow parent taking all or nothing (kgateway's MergePolicies
    across hierarchy levels)."""
    def first(tier: Tier) -> list[Attachment]:
        points = set(tier.points)
        return next(([a] for a in setters if a.target in points), [])

    acc = first(tiers[0])
    for tier in tiers[1:]:
        mine = first(tier)
        if not mine or not acc:
            acc = acc or mine
            continue
        hop = tier.hop
        if hop is not None and hop.deep_merge:
            acc = mine + acc if hop.prefer_parent else acc + mine
        elif hop is not None and hop.prefer_parent:
            acc = mine
    return acc


def _record(name: str, a: Attachment, contributors: list[Attachment], marking: _Marking,
            superseded_by: tuple[Attachment, str] | None = None) -> None:
    """What resolving one field of one route rule did to attachment `a` (`superseded_by`:
    the policy whose value left `a`'s out of a deep merge, and why)."""
    winner = contributors[0]
    if a is winner:
        marking.applied.add(name)
        if len(contributors) > 1:
            marking.merged_with.setdefault(name, set()).update(c.state.key for c in contributors[1:])
        return
    if any(c is a for c in contributors):
        marking.merged_into[name] = winner.state.key
        return
    because = ""
    if superseded_by is not None:
        winner, reason = superseded_by
        because = f", {reason}"
    if winner.target == a.target:
        why = f"overridden by older policy {winner.state.key}"
    elif winner.target.level > a.target.level:
        why = f"overridden by policy {winner.state.key} on the more specific {winner.target}"
    else:
        why = f"overridden by older policy {winner.state.key} on {winner.target}"
    marking.lost.add((name, why + because))


def _extension_refs(route: HTTPRoute | GRPCRoute) -> Iterator[tuple[str, int, str]]:
    """(policy name, rule index, field path) of each ExtensionRef filter naming a TrafficPolicy:
    the rule's, and its only backendRef's (routes.py refuses one on one of several backends)."""
    rules: Sequence[HTTPRouteRule | GRPCRouteRule] = route.spec.rules
    for i, rule in enumerate(rules):
        places: list[tuple[str, Sequence[HTTPRouteFilter | GRPCRouteFilter]]] = [(f"rules[{i}]", rule.filters)]
        if len(rule.backend_refs) == 1:
            places.append((f"rules[{i}].backendRefs[0]", rule.backend_refs[0].filters))
        for where, filters in places:
            for j, f in enumerate(filters):
                ref = f.extension_ref
                if f.type == "ExtensionRef" and ref is not None and is_policy_ref(ref.group, ref.kind):
                    yield ref.name, i, f"{route.KIND} {route.namespace}/{route.name} {where}.filters[{j}].extensionRef"
