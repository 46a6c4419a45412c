"""The status every policy kind writes (GEP-713 ancestors): Accepted, Applied per target, a
StatusSummary ancestor for targets that do not exist (kgateway's), and a summary.

TrafficPolicy (policies/attachment.py) and ListenerPolicy (listener_policy.py)
decide differently what applied where; they say it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lychgate.api.lychgate import GROUP
from lychgate.translate.conditions import CONTROLLER_NAME, condition

MAX_ANCESTORS = 16
TARGET_NOT_FOUND = "TargetNotFound"
STATUS_SUMMARY = {"group": GROUP, "kind": "StatusSummary", "name": "StatusSummary"}


@dataclass(frozen=True)
class TargetResult:
    """Whether a policy applied at one target, and why (the target's ancestor entry)."""

    ok: bool
    reason: str
    message: str
    target: str  # as a person reads it: "Gateway default/gw listener http"
    ancestor_ref: dict[str, Any]


def policy_status(errors: list[str], notes: list[str], results: list[TargetResult], generation: int) -> dict[str, Any]:
    """`errors`: why the policy is invalid (field paths); `notes`: selectors that matched nothing."""
    if errors:
        shown = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        accepted = condition("Accepted", False, "Invalid", f"invalid field {shown}", generation)
    else:
        accepted = condition("Accepted", True, "Valid", "the policy is valid", generation)
    # Targets that do not exist have no ancestor of their own: kgateway reports them together
    # on a StatusSummary ancestor (Accepted=False, TargetNotFound), beside the targets' entries.
    missing = [r for r in results if r.reason == TARGET_NOT_FOUND]
    ancestors = [{"ancestorRef": r.ancestor_ref, "controllerName": CONTROLLER_NAME,
                  "conditions": [dict(accepted), condition("Applied", r.ok, r.reason, r.message, generation)]}
                 for r in results if r.reason != TARGET_NOT_FOUND]
    if missing:
        unresolved = "; ".join(r.message for r in missing)
        ancestors.append({"ancestorRef": STATUS_SUMMARY, "controllerName": CONTROLLER_NAME, "conditions": [
            condition("Accepted", False, TARGET_NOT_FOUND, unresolved, generation),
            condition("Attached", False, TARGET_NOT_FOUND,
                      "Policy is not attached to targets that could not be resolved", generation),
            condition("Applied", False, TARGET_NOT_FOUND, f"not applied: {unresolved}", generation)]})
    noted = "; ".join(notes)
    if errors:
        summary = condition("Applied", False, "Invalid", "not applied: the policy is invalid", generation)
    elif not results:
        summary = condition("Applied", False, "NoTargetMatched" if notes else "TargetNotFound",
                            f"not applied: {noted or 'no target'}", generation)
    else:
        applied = [r for r in results if r.ok]
        extra = f"; {noted}" if noted else ""
        if applied:
            where = ", ".join(r.target for r in applied)
            reason = "Applied" if len(applied) == len(results) else "PartiallyApplied"
            summary = condition("Applied", True, reason,
                                f"applied to {len(applied)} of {len(results)} targets ({where}){extra}", generation)
        else:
            summary = condition("Applied", False, results[0].reason, f"not applied: {results[0].message}{extra}",
                                generation)
    return {"conditions": [accepted, summary], "ancestors": ancestors[:MAX_ANCESTORS]}
