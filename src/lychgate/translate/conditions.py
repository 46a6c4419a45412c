"""Status conditions as translation computes them.

lastTransitionTime is left out here: the status layer stamps it, keeping the
old time when a condition did not change, so that recomputing status from
scratch on every pass does not look like a flurry of transitions.
"""

from __future__ import annotations

from typing import Any

# The controllerName lychgate writes into route and policy status.
CONTROLLER_NAME = "gateway.lychgate.dev/lychgate"


def condition(
    type_: str, status: bool, reason: str, message: str, generation: int
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }


def resolved_refs(reason: str | None, problems: list[str], generation: int) -> dict[str, Any]:
    """A route's ResolvedRefs: False with the first problem's reason and every message."""
    if problems:
        return condition("ResolvedRefs", False, reason or "BackendNotFound", "; ".join(problems), generation)
    return condition("ResolvedRefs", True, "ResolvedRefs", "all backend references resolved", generation)
