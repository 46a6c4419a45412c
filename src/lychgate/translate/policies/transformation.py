"""transformation: change request and response headers, bodies and dynamic metadata from templates."""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.policies.templates import compile_template
from lychgate.translate.values import CompileContext, header_name


def _message(value: dict[str, Any], path: str) -> ir.MessageTransform:
    body = value.get("body") or {}
    parse_as = body.get("parseAs") or "AsString"
    entries: dict[str, list[tuple[str, ir.Template]]] = {"set": [], "add": []}
    for op in ("set", "add"):
        for i, h in enumerate(value.get(op) or []):
            where = f"{path}.{op}[{i}]"
            # Pseudo-headers both ways, as kgateway: `:method` on requests, `:status` on responses.
            name = header_name(h.get("name"), f"{where}.name", pseudo=True)
            entries[op].append((name, compile_template(h.get("value") or "", f"{where}.value")))
    remove = tuple(header_name(name, f"{path}.remove[{i}]") for i, name in enumerate(value.get("remove") or []))
    body_template = None
    # With parseAs None the body is never buffered, so a body template is ignored (as kgateway).
    if body.get("value") is not None and parse_as != "None":
        body_template = compile_template(body["value"], f"{path}.body.value")
    metadata = tuple(
        (m["namespace"], m["key"], compile_template(m["value"]["stringValue"], f"{path}.dynamicMetadata[{i}].value.stringValue"))
        for i, m in enumerate(value.get("dynamicMetadata") or []))
    return ir.MessageTransform(
        set=tuple(entries["set"]), add=tuple(entries["add"]), remove=remove,
        body=body_template, parse_as=parse_as, dynamic_metadata=metadata,
    )


class TransformationField(PolicyField):
    name, attr, deep_mergeable = "transformation", "transformation", True

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        request = _message(value["request"], f"{path}.request") if value.get("request") else None
        response = _message(value["response"], f"{path}.response") if value.get("response") else None
        if request is None and response is None:
            return {"transformation": None}
        return {"transformation": ir.Transformation(request, response)}


register(TransformationField())
