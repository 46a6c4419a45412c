"""Transformation templates: what compiles to what, and how mistakes are reported."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import json_format

from lychgate import ir
from lychgate.api.policy import Transform
from lychgate.translate.policies.templates import compile_template
from lychgate.translate.values import Invalid
from lychgate.xds.translator import transformation
from lychgate.xds.translator.template_uses import uses

HEADER_X = ("f", "header", (("s", "x"),))


@pytest.mark.parametrize(("text", "nodes"), [
    ("plain", (("t", "plain"),)),
    ("", ()),
    ('{{ header("X-User") }}', (("o", ("f", "header", (("s", "X-User"),))),)),
    ("{{request_header('x-a')}}!", (("o", ("f", "request_header", (("s", "x-a"),))), ("t", "!"))),
    # Inja's dotted paths: dashes in names, numeric indexes; Jinja's subscripts: the same nodes
    ("{{ headers.X-Id.0 }}", (("o", ("a", ("a", ("v", "headers"), ("s", "X-Id")), ("n", 0))),)),
    ('{{ headers["X-Id"][0] }}', (("o", ("a", ("a", ("v", "headers"), ("s", "X-Id")), ("n", 0))),)),
    ("{{ a - b }}{{ a-1 }}", (("o", ("op", "-", ("v", "a"), ("v", "b"))), ("o", ("op", "-", ("v", "a"), ("n", 1))))),
    ("{{ items.0.1 }}", (("o", ("a", ("a", ("v", "items"), ("n", 0)), ("n", 1))),)),
    # filters are functions of their input; methods too
    ('{{ name | upper | default("x") }}', (("o", ("f", "default", (("f", "upper", (("v", "name"),)), ("s", "x")))),)),
    ("{{ o.items() }}", (("o", ("f", "items", (("v", "o"),))),)),
    ("{{ 1 + 2 * 3 }}", (("o", ("op", "+", ("n", 1), ("op", "*", ("n", 2), ("n", 3)))),)),
    ("{{ not a and b or c }}", (("o", ("or", ("and", ("not", ("v", "a")), ("v", "b")), ("v", "c"))),)),
    ("{{ x is not defined }}", (("o", ("not", ("is", "defined", ("v", "x"), ()))),)),
    ("{{ 'a' if x else 'b' }}", (("o", ("cond", ("v", "x"), ("s", "a"), ("s", "b"))),)),
    ('{{ "q\\"t" ~ [1, 2.5, true, none] }}',
     (("o", ("op", "~", ("s", 'q"t'), ("list", (("n", 1), ("n", 2.5), ("b", True), ("null",))))),)),
    ('{% if header("x") == "y" %}a{% elif x %}b{% else %}c{% endif %}',
     (("if", ((("op", "==", HEADER_X, ("s", "y")), (("t", "a"),)), (("v", "x"), (("t", "b"),))), (("t", "c"),)),)),
    ("{% for k, v in o %}{{ k }}{% else %}none{% endfor %}",
     (("for", ("k", "v"), ("v", "o"), (("o", ("v", "k")),), (("t", "none"),)),)),
    ("{% set n = 2 %}{{ n }}", (("set", "n", ("n", 2)), ("o", ("v", "n")))),
    # whitespace control, comments and raw blocks
    ("a  {%- if x -%}  b  {%- endif %} c {#- note -#} d", (("t", "a"), ("if", ((("v", "x"), (("t", "b"),)),), ()),
                                                         ("t", " cd"))),
    ("{% raw %}{{ x }}{% endraw %}", (("t", "{{ x }}"),)),
])
def test_templates_compile_to_nodes(text: str, nodes: tuple[Any, ...]) -> None:
    assert compile_template(text, "spec.x") == nodes


@pytest.mark.parametrize(("text", "field"), [
    ("{% for x in xs %}{{ loop.index }}{% endfor %}", "index1"),  # Jinja counts from 1
    ("{% for x in xs %}{{ loop.index }}{{ loop.is_last }}{% endfor %}", "index0"),  # Inja (is_last) from 0
    ("{% for x in xs %}{{ loop.index1 }}{% endfor %}", "index1"),
    ("{% for x in xs %}{{ loop.first }}{% endfor %}", "first"),
])
def test_loop_variables_follow_the_templates_syntax(text: str, field: str) -> None:
    loop = compile_template(text, "spec.x")[0][3][0][1]
    assert loop == ("a", ("v", "loop"), ("s", field))


@pytest.mark.parametrize(("text", "message"), [
    ("{{ header() }}", "header() at character 3 takes 1 argument(s), not 0"),
    ("{{ substring('x') }}", "substring() at character 3 takes 2 to 3 argument(s), not 1"),
    ("{{ x | shout }}", "unknown function shout() at character 7; known: header(), "),
    ("{{ x.shout() }}", "unknown method .shout() at character 5"),
    ("{{ x is odd_ish }}", "unknown test 'is odd_ish' at character 8"),
    ("{{ a b }}", "unexpected 'b' at character 5"),
    ("{{ }}", "empty {{ }} at character 0"),
    ("hello {{ name", "'{{' at character 6 is never closed with '}}'"),
    ("{% if x %}y", "{% if %} at character 0 is never closed with {% endif %}"),
    ("{% for x in y %}{% endif %}", "{% endif %} at character 16 has no matching {% if %} (the open block is {% for %})"),
    ("{% if x %}{% else %}{% elif y %}{% endif %}", "{% elif %} at character 20 comes after {% else %}"),
    ("{% include 'x' %}", "{% include %} at character 0 is not supported"),
    ("{% while %}", "unknown statement {% while %} at character 0"),
    ("{{ default(a=1) }}", "keyword argument a= at character 11 is not supported"),
    ("{{ 'a\\q' }}", "unknown escape \\q in the string at character 3"),
    ("{{ x $ }}", "unexpected '$' at character 5"),
    ("{% for a, b, c in x %}{% endfor %}", "{% for %} at character 0 unpacks one or two names, not 3"),
])
def test_template_mistakes_name_the_field_and_position(text: str, message: str) -> None:
    with pytest.raises(Invalid) as err:
        compile_template(text, "spec.transformation.request.body.value")
    assert err.value.path == "spec.transformation.request.body.value"
    assert err.value.message.startswith(message), err.value.message


def test_uses_finds_json_fields_functions_and_request_headers() -> None:
    found = uses(compile_template(
        '{% set s = 1 %}{% for i in items %}{{ i }}{{ s }}{{ loop.index }}{% endfor %}'
        '{{ request_header("X-A") }}{{ request_header(name) }}{{ body() }}', "v"))
    assert found.free == {"items", "name"}  # set- and loop-bound names are not JSON fields
    assert found.functions == {"request_header", "body"}
    assert found.request_headers == {"x-a"} and found.any_request_header


def test_transformations_reach_envoy_as_data_never_code() -> None:
    # Whatever a user writes travels in the route's filter_context, read by the
    # listener's fixed Lua runtime; no route carries Lua source.
    t = ir.Transformation(request=ir.MessageTransform(
        set=(("x-a", compile_template(']] end os.exit() --[[ {{ header("x") }}', "v")),)))
    per_route = transformation.per_route(t)
    assert not per_route.HasField("source_code") and not per_route.name
    assert json_format.MessageToDict(per_route.filter_context) == {"transformation": [
        [[["x-a", [["t", "]] end os.exit() --[[ "], ["o", ["f", "header", [["s", "x"]]]]]]],
         [], [], False, "AsString", False, False, []],
        False, False]}


def test_response_templates_stash_what_they_read_of_the_request() -> None:
    def stash(*values: str) -> Any:
        m = ir.MessageTransform(set=tuple((f"x-{i}", compile_template(v, "v")) for i, v in enumerate(values)))
        return transformation.context(ir.Transformation(response=m))[2]

    assert stash('{{ header("x") }}') is False
    assert stash('{{ request_header("X-B") }}', '{{ request_header("x-a") }}') == ["x-a", "x-b"]
    assert stash("{{ path() }}") == []
    assert stash('{{ request_header(name) }}') == ["*"]


def test_an_empty_yaml_list_is_an_empty_list() -> None:
    # `set:` with nothing under it (kgateway's route delegation manifests) is null in YAML.
    t = Transform.model_validate({"set": None, "add": [{"name": "origin", "value": "svc2"}], "remove": None})
    assert t.set == [] and t.remove == [] and t.add[0].name == "origin"
