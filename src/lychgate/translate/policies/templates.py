"""Transformation templates: text with `{{ ... }}` placeholders, compiled to parts.

The syntax is the subset of Inja that kgateway users write, so their
templates carry over, plus a few helpers for what Inja left to extractors:

    {{ header("x-user") }}          a header of the message being transformed
    {{ request_header("x-user") }}  a request header (also in response templates)
    {{ path() }}                    the request path, without the query
    {{ method() }}                  the request method
    {{ query_param("page") }}       a query parameter of the request, URL-decoded
    {{ body() }}                    the body of the message, as text
    {{ user.name }}  {{ items.0 }}  a field of the JSON body (needs body.parseAs: AsJson)
    {{ json(user.name) }}           any of the above as a JSON literal: quoted and
                                    escaped, null when missing (for JSON bodies)

Values are inserted as they are, as Inja does: a header value with a quote in
it breaks a JSON body built around "{{ ... }}", so build JSON with json(...).
A missing header, parameter or field renders as the empty string; a field
holding an object or array renders as JSON. Control blocks ({% ... %}) are not
supported: a template using them is reported on the policy's status.
"""

from __future__ import annotations

import re

from lychgate import ir
from lychgate.translate.policies.common import Invalid

FUNCTIONS_WITH_NAME = {"header": "header", "request_header": "request_header", "query_param": "query"}
FUNCTIONS_WITHOUT_ARGS = {"path": "path", "method": "method", "body": "body"}

_CALL = re.compile(r"""^([A-Za-z_][A-Za-z0-9_]*)\s*\(\s*(?:(["'])(.*?)\2)?\s*\)$""")
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*(?:\.(?:[A-Za-z0-9_\-]+))*$")


def compile_template(text: str, path: str) -> ir.Template:
    parts: list[ir.TemplatePart] = []
    pos = 0
    if "{%" in text or "{#" in text:
        raise Invalid(path, "only {{ ... }} placeholders are supported, not {% ... %} or {# ... #} blocks")
    while True:
        start = text.find("{{", pos)
        if start < 0:
            if pos < len(text):
                parts.append(("text", text[pos:]))
            break
        end = text.find("}}", start + 2)
        if end < 0:
            raise Invalid(path, f"unclosed '{{{{' at character {start}")
        if start > pos:
            parts.append(("text", text[pos:start]))
        parts.append(_expression(text[start + 2:end].strip(), path))
        pos = end + 2
    # Adjacent text parts are joined so equal templates compile to equal parts.
    merged: list[ir.TemplatePart] = []
    for part in parts:
        if merged and part[0] == "text" and merged[-1][0] == "text":
            merged[-1] = ("text", merged[-1][1] + part[1])
        else:
            merged.append(part)
    return tuple(merged)


_JSON = re.compile(r"^json\s*\((.*)\)$")


def _expression(expr: str, path: str) -> ir.TemplatePart:
    if not expr:
        raise Invalid(path, "empty placeholder {{ }}")
    wrapped = _JSON.match(expr)
    if wrapped:
        kind, arg = _expression(wrapped.group(1).strip(), path)
        if kind.startswith("json:"):
            raise Invalid(path, "json(json(...)) is not needed")
        return (f"json:{kind}", arg)
    call = _CALL.match(expr)
    if call:
        func, arg = call.group(1), call.group(3)
        if func in FUNCTIONS_WITH_NAME:
            if not arg:
                raise Invalid(path, f'{func}() needs a name, as in {func}("x-example")')
            return (FUNCTIONS_WITH_NAME[func], arg.lower() if func != "query_param" else arg)
        if func in FUNCTIONS_WITHOUT_ARGS:
            if arg:
                raise Invalid(path, f"{func}() takes no argument")
            return (FUNCTIONS_WITHOUT_ARGS[func], "")
        known = ", ".join(f"{f}()" for f in [*FUNCTIONS_WITH_NAME, *FUNCTIONS_WITHOUT_ARGS, "json"])
        raise Invalid(path, f"unknown function {func}() in {{{{ {expr} }}}}; known: {known}")
    if _FIELD.match(expr):
        return ("field", expr)
    raise Invalid(path, f"cannot read {{{{ {expr} }}}}: use a function such as header(\"name\") "
                        "or a JSON body field such as user.name")


def uses(template: ir.Template, kind: str) -> bool:
    return any(k.removeprefix("json:") == kind for k, _ in template)
