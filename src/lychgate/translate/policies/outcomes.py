"""TrafficPolicy status, written from the ledger's tallies (policies/ledger.py).

Each policy gets Accepted and, per target, Applied: what reached the proxy, or
why not. The routes and Gateways policies target get GEP-713's
`TrafficPolicyAffected` condition. Both are kept from pass to pass and
rewritten only for the policies and routes whose tallies changed, so a pass
that touched one route does not describe ten thousand.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lychgate.api.base import ObjectKey
from lychgate.interned import Interned
from lychgate.store import Store
from lychgate.translate.conditions import condition
from lychgate.translate.policies.ledger import Ledger, Tally
from lychgate.translate.policy_status import TargetResult, policy_status

if TYPE_CHECKING:
    from lychgate.translate.policies.attachment import Attachment, PolicyState, Target

AFFECTED = "gateway.lychgate.dev/TrafficPolicyAffected"
ROUTE_KINDS = ("HTTPRoute", "GRPCRoute")
Applied = tuple[bool, str, str]  # ok, reason, message
Described = dict[tuple[Any, ...], Applied]
# Memo entries; the memo starts over beyond. Signatures carry route counts, so churn makes
# new ones: kept small, the memo cannot grow the controller (a few hundred KiB).
_DESCRIBED_MAX = 2_000
# Statuses with a condition kept for sharing before the table first lets go of those no route
# holds any more (then again once it has doubled). It had started over at 4,096: under churn
# each new status stayed until then, 1-2 KiB each.
_WITH_CONDITION_FLOOR = 256


class Outcome:
    """What happened to one policy at one target (or on one route), over every route rule under it."""

    __slots__ = ("applied", "blocked_by", "failed_closed", "lost", "merged_into", "merged_with", "routes")

    def __init__(self, tally: Tally | None = None) -> None:
        self.routes = 0
        self.failed_closed = 0
        self.applied: set[str] = set()
        self.merged_into: dict[str, str] = {}  # field -> winner policy
        self.merged_with: dict[str, set[str]] = {}  # field -> policies merged into this one's value
        self.lost: dict[str, set[str]] = {}  # field -> why it did not apply
        self.blocked_by: set[str] = set()  # invalid policies that made routes answer 500
        for mark, n in (tally or {}).items():
            self.routes += n
            if mark.failed_closed:
                self.failed_closed += n
            self.blocked_by |= mark.blocked_by
            self.applied |= mark.applied
            for f, winner in mark.merged_into:
                # Several winners over different routes: one, the same whatever the order.
                self.merged_into[f] = min(winner, self.merged_into.get(f, winner))
            for f, partners in mark.merged_with:
                self.merged_with.setdefault(f, set()).update(partners)
            for f, why in mark.lost:
                self.lost.setdefault(f, set()).add(why)


class StatusWriter:
    """Policy and Affected status, kept across passes (one per PolicyIndex)."""

    def __init__(self) -> None:
        # policy key -> (the policy's object key, the routes and Gateways its attachments describe)
        self._policies: dict[str, tuple[ObjectKey, set[ObjectKey]]] = {}
        self._policy_status: dict[ObjectKey, dict[str, Any]] = {}
        # target route or Gateway -> policy -> what the policy's attachment there says
        self._targets: dict[ObjectKey, dict[str, str]] = {}
        self._gateways: dict[ObjectKey, dict[str, str]] = {}
        # route -> (policy, what it did there), sorted; equal ones are one tuple (_shared_entries)
        self._tally_entries: dict[ObjectKey, tuple[tuple[str, str], ...]] = {}
        self._written: dict[ObjectKey, dict[str, Any]] = {}  # route -> its status with the condition
        # Equal entries and (route status, condition) -> status with it, shared by the routes
        # alike (a Gateway-wide policy's: all of its routes): built per route, each held a
        # nest of dicts and lists, 0.8 KiB of every route under a Gateway's policy.
        self._entries_pool: Interned[tuple[tuple[str, str], ...]] = Interned()
        self._with_condition: dict[tuple[int, int], tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
        self._with_condition_limit = _WITH_CONDITION_FLOOR
        self._described: Described = {}

    def write(self, store: Store, states: Mapping[str, PolicyState], restated: set[str], ledger: Ledger,
              status: dict[ObjectKey, dict[str, Any]]) -> None:
        """Write the status of every policy and the Affected conditions into `status`,
        redoing only the policies that were `restated` or whose tallies changed."""
        if len(self._described) > _DESCRIBED_MAX:
            self._described.clear()
        if len(self._with_condition) >= self._with_condition_limit:
            self._prune_with_condition()
        retargeted: set[ObjectKey] = set()
        for key in restated | ledger.touched_policies:
            old = self._policies.pop(key, None)
            if old is not None:
                policy_key, old_targets = old
                del self._policy_status[policy_key]
                retargeted |= old_targets
                for target in old_targets:
                    of_kind = self._gateways if target.kind == "Gateway" else self._targets
                    entries = of_kind[target]
                    del entries[key]
                    if not entries:
                        del of_kind[target]
            state = states.get(key)
            if state is None:
                continue
            results = [(att, self._applied(state, att, ledger)) for att in sorted(
                state.attachments, key=lambda a: (a.target.kind, a.target.name, a.target.section or ""))]
            written = policy_status(state.errors, state.notes, [
                TargetResult(*result, str(att.target), att.target.ancestor_ref()) for att, result in results
            ], state.policy.generation)
            targets = set()
            for att, result in results:
                target = ObjectKey(att.target.kind, att.target.namespace, att.target.name)
                of_kind = self._gateways if target.kind == "Gateway" else self._targets
                of_kind.setdefault(target, {})[key] = _short(*result)
                targets.add(target)
            retargeted |= targets
            self._policies[key] = (state.policy.key, targets)
            self._policy_status[state.policy.key] = written
        status.update(self._policy_status)
        self._affected(store, states, ledger, retargeted, status)
        ledger.touched_policies.clear()
        ledger.touched_routes.clear()

    def _applied(self, state: PolicyState, att: Attachment, ledger: Ledger) -> Applied:
        tally = ledger.by_target.get((state.key, att.target))
        if state.errors:
            closed = any(m.failed_closed for m in tally or ())
            return False, "Invalid", "not applied: the policy is invalid" + (
                "; the routes it targets answer 500 until it is fixed" if closed else "")
        if att.problem is not None:
            return False, att.problem[0], att.problem[1]
        if state.unresolved is not None:
            closed = state.closed_by is not None and any(m.failed_closed for m in tally or ())
            return False, state.unresolved.reason, state.unresolved.message + (
                "; the routes it targets answer 500 until it is resolved" if closed else "")
        if not tally:
            return False, "NoRoutes", _no_routes(att.target)
        return describe(Outcome(tally), str(att.target), self._described)

    def _affected(self, store: Store, states: Mapping[str, PolicyState], ledger: Ledger,
                  retargeted: set[ObjectKey], status: dict[ObjectKey, dict[str, Any]]) -> None:
        """GEP-713's <Kind>Affected condition on the routes and Gateways policies target."""
        for key in ledger.touched_routes:
            tallies = ledger.route_tallies(key)
            if tallies:
                said = tuple(sorted((p, self._on_route(key, states[p], tally)) for p, tally in tallies.items()))
                self._tally_entries[key] = self._entries_pool(said)
            else:
                self._tally_entries.pop(key, None)
        # A route's condition changes when its rules were recounted (its virtual hosts were
        # rebuilt: that is also when its own status changes) or when what a policy says of
        # it as a target changed; the others keep the status written before, put back at
        # C speed.
        for key in ledger.touched_routes | retargeted:
            if key.kind == "Gateway":
                continue
            reached = {p for p, _, _ in ledger.by_route.get(key, ())}
            # Routes a policy reached are described from what happened on their rules.
            entries = dict(self._tally_entries.get(key, ()))
            entries.update({p: text for p, text in self._targets.get(key, {}).items() if p not in reached})
            base = status.get(key)
            if not entries or base is None:
                self._written.pop(key, None)
                continue
            self._written[key] = self._with(base, _affected(entries, _generation(store, key)))
        status.update(self._written)
        for key, entries in self._gateways.items():
            if (st := status.get(key)) is not None and "conditions" in st:
                st["conditions"].append(_affected(entries, _generation(store, key)))

    def _with(self, base: dict[str, Any], cond: dict[str, Any]) -> dict[str, Any]:
        """`base` (a route's status) with `cond` added to each parent: a new status object (the
        base is kept by translation across passes), one for all the routes with these very
        base and condition objects (both are shared: translate/status_pool.py, _affected)."""
        found = self._with_condition.get((id(base), id(cond)))
        if found is not None and found[0] is base and found[1] is cond:
            return found[2]
        written = {**base, "parents": [
            {**parent, "conditions": [*parent["conditions"], cond]} for parent in base.get("parents", [])]}
        # (holding base and cond keeps their ids from being reused while the entry lives)
        self._with_condition[(id(base), id(cond))] = (base, cond, written)
        return written

    def _prune_with_condition(self) -> None:
        """Let go of the statuses no route holds any more."""
        kept = self._with_condition
        for key in list(kept):
            if sys.getrefcount(kept[key][2]) <= 2:  # (the entry's reference, and getrefcount's)
                del kept[key]
        self._with_condition_limit = max(_WITH_CONDITION_FLOOR, 2 * len(kept))

    def _on_route(self, route: ObjectKey, state: PolicyState, tally: Tally) -> str:
        if state.errors:
            return f"invalid, so the route rules it targets answer 500 until it is fixed: {state.errors[0]}"
        if state.unresolved is not None:
            tail = "; the route rules it targets answer 500" if state.closed_by else ""
            return f"not applied: {state.unresolved.message}{tail}"
        return _short(*describe(Outcome(tally), f"{route.kind} {route.ref}", self._described))


def _generation(store: Store, key: ObjectKey) -> int:
    obj = store.get_key(key)
    return obj.generation if obj is not None else 1


def _no_routes(target: Target) -> str:
    if target.kind in ROUTE_KINDS:
        return f"{target} is not attached to any lychgate Gateway listener, so there is nothing to apply the policy to"
    return f"{target} has no attached routes yet, so there is nothing to apply the policy to"


def describe(out: Outcome, where: str, memo: Described) -> Applied:
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
        cached = memo[signature] = _describe(out, where)
    return cached


def _describe(out: Outcome, where: str) -> Applied:
    if out.failed_closed and out.failed_closed == out.routes:
        blockers = ", ".join(sorted(out.blocked_by)) or "another policy"
        return False, "Invalid", (f"not applied: TrafficPolicy {blockers} is invalid or cannot be applied, "
                                  f"so the routes of {where} answer 500 until it is fixed")
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
                     f"TrafficPolicy {', '.join(sorted(out.blocked_by))} is invalid or cannot be applied")
    message = "; ".join(parts) or "applied"
    if not applied and not merged:
        reason = "Overridden" if lost else "Applied"
        return (not lost), reason, message if lost else "applied"
    if lost:
        return True, "PartiallyApplied", message
    if merged:
        return True, "Merged", message
    return True, "Applied", message


def _join(whys: set[str]) -> str:
    """Several reasons a field lost, in a stable order and without repeating 'overridden by'."""
    ordered = sorted(whys)
    prefix = "overridden by "
    if len(ordered) > 1 and all(w.startswith(prefix) for w in ordered):
        return prefix + ", ".join(w.removeprefix(prefix) for w in ordered)
    return "; ".join(ordered)


def _short(ok: bool, reason: str, message: str) -> str:
    return message if message.startswith(("applied", "not applied", "invalid")) or ok else f"not applied ({reason}): {message}"


def _affected(entries: dict[str, str], generation: int) -> dict[str, Any]:
    """One condition object for every route the same policies say the same of (a
    Gateway-wide policy: all its routes), as statuses are never mutated: 4 MiB at
    5,000 routes held as one dict and text per route. Kept while a route holds it (an
    lru_cache of 4,096 had kept every condition of a churn of policy edits, ~1 MiB
    over 1,000 edits)."""
    said = tuple(sorted(entries.items()))
    return _AFFECTED.made((said, generation), lambda: _affected_condition(said, generation))


_AFFECTED: Interned[dict[str, Any]] = Interned()


def _affected_condition(entries: tuple[tuple[str, str], ...], generation: int) -> dict[str, Any]:
    text = "; ".join(f"TrafficPolicy {key}: {what}" for key, what in entries)
    any_applied = any(v.startswith(("applied", "deep-merged")) for _, v in entries)
    reason = "Applied" if any_applied else "NotApplied"
    return condition(AFFECTED, True, reason, text, generation)
