"""Kubernetes label selectors (matchLabels AND matchExpressions)."""

from __future__ import annotations

from typing import Any


def matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """True when labels satisfy the selector; an empty selector matches all."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True
