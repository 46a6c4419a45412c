"""Transformation templates: what compiles to what, and how mistakes are reported."""

from __future__ import annotations

import pytest
from google.protobuf import json_format

from lychgate import ir
from lychgate.translate.policies.common import Invalid
from lychgate.translate.policies.templates import compile_template
from lychgate.xds.translator import transformation


@pytest.mark.parametrize(("text", "parts"), [
    ("plain", (("text", "plain"),)),
    ("", ()),
    ('{{ header("X-User") }}', (("header", "x-user"),)),
    ("{{request_header('x-a')}}!", (("request_header", "x-a"), ("text", "!"))),
    ('{{ path() }}?{{ query_param("Page") }}', (("path", ""), ("text", "?"), ("query", "Page"))),
    ("{{ method() }} {{ body() }}", (("method", ""), ("text", " "), ("body", ""))),
    ("{{ user.name }}/{{ items.0.id }}", (("field", "user.name"), ("text", "/"), ("field", "items.0.id"))),
    ('{"n": {{ json(user.name) }}, "h": {{ json(header("x")) }}}',
     (("text", '{"n": '), ("json:field", "user.name"), ("text", ', "h": '), ("json:header", "x"), ("text", "}"))),
])
def test_templates_compile_to_parts(text: str, parts: tuple[tuple[str, str], ...]) -> None:
    assert compile_template(text, "spec.x") == parts


@pytest.mark.parametrize(("text", "message"), [
    ("{{ header() }}", 'header() needs a name, as in header("x-example")'),
    ("{{ path('x') }}", "path() takes no argument"),
    ("{{ upper(x) }}", "cannot read {{ upper(x) }}"),
    ("{{ shout() }}", "unknown function shout() in {{ shout() }}; known: header(), request_header(), "
                      "query_param(), path(), method(), body(), json()"),
    ("{{ a b }}", "cannot read {{ a b }}"),
    ("{{ }}", "empty placeholder {{ }}"),
    ("hello {{ name", "unclosed '{{' at character 6"),
    ("{% if x %}y{% endif %}", "only {{ ... }} placeholders are supported"),
    ("{{ json(json(a)) }}", "json(json(...)) is not needed"),
])
def test_template_mistakes_name_the_field(text: str, message: str) -> None:
    with pytest.raises(Invalid) as err:
        compile_template(text, "spec.transformation.request.body.value")
    assert err.value.path == "spec.transformation.request.body.value"
    assert err.value.message.startswith(message), err.value.message


def test_transformations_reach_envoy_as_data_never_code() -> None:
    # Whatever a user writes travels in the route's filter_context, read by the
    # listener's fixed Lua runtime; no route carries Lua source.
    t = ir.Transformation(request=ir.MessageTransform(
        set=(("x-a", compile_template(']] end os.exit() --[[ {{ header("x") }}', "v")),)))
    per_route = transformation.per_route(t)
    assert not per_route.HasField("source_code") and not per_route.name
    assert json_format.MessageToDict(per_route.filter_context) == {"transformation": [
        [[["x-a", [["text", "]] end os.exit() --[[ "], ["header", "x"]]]], [], [], False, False, False],
        False, False]}
