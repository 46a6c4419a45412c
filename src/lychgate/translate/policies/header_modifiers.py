"""headerModifiers: set, add and remove request and response headers (route header ops)."""

from __future__ import annotations

from typing import Any

from lychgate import envoy_limits, ir
from lychgate.translate.policies.common import CompileContext, Invalid, envoy_check, header_name
from lychgate.translate.policies.fields import PolicyField, register


def _ops(value: dict[str, Any] | None, path: str) -> ir.HeaderOps:
    if not value:
        return ir.HeaderOps()
    lists: dict[str, list[tuple[str, str]]] = {"set": [], "add": []}
    for op in ("set", "add"):
        for i, h in enumerate(value.get(op) or []):
            name = header_name(h["name"], f"{path}.{op}[{i}].name")
            envoy_check(envoy_limits.modifiable_header, name, f"{path}.{op}[{i}].name")
            envoy_check(envoy_limits.header_value, h["value"], f"{path}.{op}[{i}].value")
            lists[op].append((name, h["value"]))
    remove = []
    for i, n in enumerate(value.get("remove") or []):
        remove.append(header_name(n, f"{path}.remove[{i}]"))
        envoy_check(envoy_limits.removable_header, n, f"{path}.remove[{i}]")
    return ir.HeaderOps(set=tuple(lists["set"]), add=tuple(lists["add"]), remove=tuple(remove))


class HeaderModifiersField(PolicyField):
    name, attr = "headerModifiers", "header_modifiers"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if not value.get("request") and not value.get("response"):
            raise Invalid(path, "at least one of request or response must be set")
        return {"request_headers": _ops(value.get("request"), f"{path}.request"),
                "response_headers": _ops(value.get("response"), f"{path}.response")}


register(HeaderModifiersField())
