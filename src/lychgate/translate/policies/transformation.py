"""transformation: change request and response headers and bodies from templates."""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.translate.policies.common import CompileContext, Invalid, header_name
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.policies.templates import compile_template, uses


def _message(value: dict[str, Any], path: str, response: bool) -> ir.MessageTransform:
    body = value.get("body")
    parse_json = bool(body and body.get("parseAs") == "AsJson")
    entries: dict[str, list[tuple[str, ir.Template]]] = {"set": [], "add": []}
    templates: list[tuple[str, ir.Template]] = []
    for op in ("set", "add"):
        for i, h in enumerate(value.get(op) or []):
            where = f"{path}.{op}[{i}]"
            name = header_name(h.get("name"), f"{where}.name", pseudo=not response)
            template = compile_template(h.get("value", ""), f"{where}.value")
            entries[op].append((name, template))
            templates.append((f"{where}.value", template))
    remove = []
    for i, name in enumerate(value.get("remove") or []):
        remove.append(header_name(name, f"{path}.remove[{i}]"))
    body_template = None
    if body and body.get("value") is not None:
        body_template = compile_template(body["value"], f"{path}.body.value")
        templates.append((f"{path}.body.value", body_template))
    for where, template in templates:
        if uses(template, "field") and not parse_json:
            field = next(a for k, a in template if k.removeprefix("json:") == "field")
            raise Invalid(where, f"reads the JSON body field {field!r}, which needs {path}.body.parseAs: AsJson")
    return ir.MessageTransform(
        set=tuple(entries["set"]), add=tuple(entries["add"]), remove=tuple(remove),
        body=body_template, parse_json=parse_json,
    )


class TransformationField(PolicyField):
    name, attr, deep_mergeable = "transformation", "transformation", True

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        request = _message(value["request"], f"{path}.request", False) if value.get("request") else None
        response = _message(value["response"], f"{path}.response", True) if value.get("response") else None
        if request is None and response is None:
            return {"transformation": None}
        return {"transformation": ir.Transformation(request, response)}


register(TransformationField())
