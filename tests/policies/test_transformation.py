"""transformation end to end: templates rendered by the Lua filter in real Envoy.

The scenarios are kgateway's transformation e2e suite (headers, custom
functions, JSON bodies in both template syntaxes, body as string, header to
body, pseudo-headers, empty values, dynamic metadata), with our own manifests
and kgateway's expectations; the echo backend answers with what it received.
"""

from __future__ import annotations

import base64
import json
import re
import textwrap
from pathlib import Path

import httpx
import pytest

from tests.harness import wait_for
from tests.policies.conftest import Stack, condition

pytestmark = pytest.mark.e2e


def policy(name: str, transformation: str, target: str | None = None) -> str:
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: {name}}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: {target or name}}}]
  transformation:
""" + textwrap.indent(textwrap.dedent(transformation).strip("\n"), "    ") + "\n"


def serve(stack: Stack, name: str, transformation: str) -> str:
    host = f"{name}.example.com"
    stack.write(f"{name}.yaml", stack.route(name, host), policy(name, transformation))
    stack.applied(name)
    return host


def test_request_and_response_are_transformed(stack: Stack) -> None:
    host = serve(stack, "transform", r"""
        request:
          set:
            - {name: x-user, value: '{{ user.name }}'}
            - {name: x-route, value: '{{ method() }} {{ path() }} page={{ query_param("page") }}'}
            - {name: x-copied, value: 'in={{ header("x-in") }}'}
          add:
            - {name: x-tags, value: '{{ user.tags }}'}
          remove: [x-secret]
          body:
            parseAs: AsJson
            value: '{"name": {{ json(user.name) }}, "first_tag": "{{ user.tags.0 }}", "page": {{ json(query_param("page")) }}, "none": {{ user.missing | tojson }}}'
        response:
          set:
            - {name: x-served-by, value: '{{ header("x-backend") }}'}
            - {name: x-asked-by, value: '{{ request_header("x-in") }} on {{ path() }}'}
          remove: [x-backend]
          body:
            parseAs: AsJson
            value: '{"backend": "{{ pod }}", "saw": {{ body() }}}'
    """)
    sent = {"user": {"name": "Ada \u00e9\"q\"", "tags": ["math", "engines"]}, "extra": [1, 2.5, None, True]}
    resp = stack.wait(
        host, lambda r: "x-served-by" in r.headers, "/orders/7?page=2&x=a%20b",
        "the response to be transformed", method="POST", content=json.dumps(sent).encode(),
        headers={"x-in": "tester", "x-secret": "s3cr3t", "content-type": "application/json"},
    )
    assert resp.status_code == 200
    assert resp.headers["x-served-by"] == "app"
    assert resp.headers["x-asked-by"] == "tester on /orders/7"
    assert "x-backend" not in resp.headers
    out = resp.json()  # the body template produced valid JSON around the backend's own answer
    assert out["backend"] == "app"
    saw = out["saw"]  # what the backend received
    headers = saw["headers"]
    assert headers["x-user"] == 'Ada \u00e9"q"'
    assert headers["x-route"] == "POST /orders/7 page=2"
    assert headers["x-copied"] == "in=tester"
    assert json.loads(headers["x-tags"]) == ["math", "engines"]  # a JSON field that is an array
    assert "x-secret" not in headers
    # The request body was replaced from the template, and content-length follows it.
    assert json.loads(saw["body"]) == {"name": 'Ada \u00e9"q"', "first_tag": "math", "page": "2", "none": None}
    assert int(headers["content-length"]) == len(saw["body"].encode())

    # kgateway: a body that is not JSON when parseAs is AsJson is refused with 400.
    plain = stack.get(host, "/p", method="POST", content=b"not json", headers={"x-in": "t2"})
    assert plain.status_code == 400 and "not JSON" in plain.text


def test_headers_functions_conditions_and_whitespace_control(stack: Stack) -> None:
    # kgateway's transform-for-headers scenario: header()/request_header() with
    # any case, a condition on substring(), `{%-`/`-%}`, remove, :status read back.
    host = serve(stack, "headers", r"""
        request:
          set:
            - {name: x-foo-bar, value: 'foolen_{{header("content-length")}}'}
            - {name: x-foo-bar2, value: 'foolen_{{request_header("Content-Length")}}'}
            - {name: x-client, value: '{% if substring(request_header("User-Agent"), 0, 4) == "curl" %}text{% endif %}'}
          remove: [x-remove-me]
          add:
            - {name: cookie, value: test=123}
        response:
          set:
            - name: x-foo-response
              value: '{%- if request_header("x-aDd-bar") != "" -%}supersuper{{request_header("x-add-baR")}}{% else %}notsuper{% endif %}'
            - {name: x-foo-response-status, value: '{{header(":StaTus")}}'}
          add:
            - {name: x-backend, value: also}
          remove: [content-type]
    """)
    resp = stack.wait(host, lambda r: "x-foo-response" in r.headers, "/anything", "the headers policy",
                      method="POST", content=b"hello", headers={"x-remove-me": "test", "x-dont-remove-me": "kept",
                                                                 "cookie": "foo=bar", "user-agent": "curl/8.5"})
    assert resp.headers["x-foo-response"] == "notsuper"
    assert resp.headers["x-foo-response-status"] == "200"
    assert resp.headers.get_list("x-backend") == ["app", "also"] and "content-type" not in resp.headers
    seen = resp.json()["headers"]
    assert seen["x-foo-bar"] == "foolen_5" and seen["x-foo-bar2"] == "foolen_5"
    assert seen["x-client"] == "text"
    assert "x-remove-me" not in seen and seen["x-dont-remove-me"] == "kept"
    assert seen["cookie"] == "test=123"  # added after the client's (the echo keeps the last)
    assert resp.json()["body"] == "hello"  # no body template: the body passes as it came

    resp = stack.get(host, "/anything", method="POST", content=b"hello-world", headers={"x-add-bar": "super"})
    assert resp.headers["x-foo-response"] == "supersupersuper"
    assert resp.json()["headers"]["x-foo-bar"] == "foolen_11"

    # Setting a header that came twice leaves one value.
    resp = httpx.post(f"http://{stack.addr}:8080/anything", content=b"hello",
                      headers=[("host", host), ("x-foo-bar", "original_1"), ("x-foo-bar", "original_2")])
    assert resp.json()["headers"]["x-foo-bar"] == "foolen_5"


def test_custom_functions(stack: Stack) -> None:
    # kgateway's transform-for-custom-functions scenario, plus Jinja filters.
    functions = r"""
          - {name: x-base64-encode, value: '{{base64_encode("base64 encode in SIDE header")}}'}
          - {name: x-base64-decode, value: '{{base64_decode("%s")}}'}
          - {name: x-base64-decode-invalid, value: '{{base64_decode("foobar")}}'}
          - {name: x-base64-decode-invalid-non-empty, value: 'foobar{{base64_decode("foobar")}}'}
          - {name: x-substring, value: '{{substring("in SIDE", 3)}}'}
          - {name: x-substring2, value: '{{substring("in SIDE", 3, 3)}}'}
          - {name: x-substring-invalid, value: '{{substring("in SIDE", 30)}}'}
          - {name: x-substring-invalid2, value: '{{substring("in SIDE", 3, 60)}}'}
          - {name: x-env, value: '{{env("PYTHONUNBUFFERED")}}'}
          - {name: x-env-not-set, value: '{{env("LYCHGATE_NO_SUCH_VARIABLE")}}'}
          - {name: x-replace-random, value: '{{replace_with_random("to be or not to be", "to")}}'}
          - {name: x-filters, value: '{{ "a-b c" | upper | replace("-", "_") }}/{{ "x y z" | length }}/{{ word_count("one two  three") }}'}"""

    def side(word: str) -> str:
        decoded = base64.b64encode(f"base64 decode in {word} header".encode()).decode()
        return textwrap.indent(textwrap.dedent((functions % decoded).replace("SIDE", word)).strip("\n"), "  ")

    host = serve(stack, "functions", "request:\n  set:\n" + side("request") + r"""
  body:
    parseAs: AsJson
    value: '{"Foo":"{{ raw_string(foo) }}", "test":"123"}'
response:
  set:
""" + side("response"))

    def check(h: dict[str, str], word: str) -> None:
        assert h["x-base64-encode"] == base64.b64encode(f"base64 encode in {word} header".encode()).decode()
        assert h["x-base64-decode"] == f"base64 decode in {word} header"
        assert h["x-base64-decode-invalid-non-empty"] == "foobar"
        assert (h["x-substring"], h["x-substring2"], h["x-substring-invalid2"]) == (word, word[:3], word)
        assert h["x-env"] == "1"
        assert re.fullmatch(r".{6,} be or not .{6,} be", h["x-replace-random"])
        assert h["x-filters"] == "A_B C/5/3"
        # An empty result removes the header (kgateway).
        for gone in ("x-base64-decode-invalid", "x-substring-invalid", "x-env-not-set"):
            assert gone not in h

    resp = stack.wait(host, lambda r: "x-base64-encode" in r.headers, "/anything", "the functions policy",
                      method="POST", content=b'{"foo":"\\"bar\\""}')
    check(dict(resp.headers), "response")
    saw = resp.json()
    check(saw["headers"], "request")
    assert json.loads(saw["body"]) == {"Foo": '"bar"', "test": "123"}
    assert saw["headers"]["content-length"] == "31"


def test_json_bodies_in_both_syntaxes(stack: Stack) -> None:
    # kgateway's transform-for-body-json (Inja) and -rust (Jinja) scenarios.
    # (the echo backend answers headers as strings under lower-case names)
    for name, field in (("json-inja", "headers.x-incoming-stuff"), ("json-jinja", 'headers["x-incoming-stuff"]')):
        field_out = field.replace("x-incoming-stuff", "x-transformed-incoming")
        host = serve(stack, name, rf"""
            request:
              set:
                - name: x-transformed-incoming
                  value: 'level_{{%- if mykey != "" -%}}{{{{mykey.myinnerkey}}}}{{% else %}}unknown{{% endif %}}'
              body: {{parseAs: AsJson}}
            response:
              set:
                - {{name: x-how-great, value: 'level_{{%- if headers != "" -%}}{{{{{field}}}}}{{% else %}}unknown{{% endif %}}'}}
                - {{name: from-incoming, value: 'key_{{%- if headers != "" -%}}{{{{{field_out}}}}}{{% else %}}unknown{{% endif %}}'}}
              body:
                parseAs: AsJson
                value: '{{{{headers}}}}'
        """)
        resp = stack.wait(host, lambda r: "x-how-great" in r.headers, "/anything", f"the {name} policy",
                          method="POST", content=b'{"mykey": {"myinnerkey": "myinnervalue"}}',
                          headers={"x-incoming-stuff": "super"})
        assert resp.headers["x-how-great"] == "level_super", name
        assert resp.headers["from-incoming"] == "key_level_myinnervalue", name
        body = resp.json()  # the response body is now the backend's `headers` object, as JSON
        assert body["x-incoming-stuff"] == "super" and body["x-transformed-incoming"] == "level_myinnervalue"
        assert int(resp.headers["content-length"]) == len(resp.content)
        # Not JSON: refused with 400.
        assert stack.get(host, "/anything", method="POST", content=b"hello").status_code == 400


def test_fields_without_json_parsing_answer_400(stack: Stack) -> None:
    # kgateway's transform-for-body-as-string: `method` is a JSON field, and the
    # response body is not parsed as JSON, so the response is refused with 400.
    host = serve(stack, "as-string", r"""
        response:
          set:
            - {name: x-what-method, value: 'method_{%- if method != "" -%}{{method}}{% else %}unknown{% endif %}'}
    """)
    resp = stack.wait(host, lambda r: r.status_code == 400, "/anything", "the as-string policy",
                      method="POST", content=b'{"mykey": {"myinnerkey": "myinnervalue"}}')
    assert "x-what-method" not in resp.headers
    assert condition(stack.status("TrafficPolicy", "as-string")["conditions"], "Accepted")["status"] == "True"


def test_header_to_body_with_a_loop_over_the_json_body(stack: Stack) -> None:
    # kgateway's transform-for-header-to-body-json scenario.
    host = serve(stack, "to-body", r"""
        request:
          body:
            parseAs: AsJson
            value: '{% for i in context() %}{{ i }}{% endfor %}-{{request_header(":path")}}'
        response:
          body:
            parseAs: AsString
            value: '{{ replace_with_random(body(), "andy") }}'
    """)
    resp = stack.wait(host, lambda r: r.status_code == 200 and "andy" not in r.text, "/anything/x",
                      "the to-body policy", method="POST", content=b"[3,2,1]", headers={"x-my-name": "andy"})
    saw = resp.json()
    assert saw["body"] == "321-/anything/x"
    assert len(saw["headers"]["x-my-name"]) > 5


def test_pseudo_headers_and_empty_values(stack: Stack) -> None:
    # kgateway's transform-for-pseudo-headers and gateway-attached (x-empty, x-not-set) scenarios.
    host = serve(stack, "pseudo", r"""
        request:
          set:
            - {name: ':method', value: POST}
            - {name: x-empty, value: ''}
            - {name: x-not-set}
        response:
          set:
            - {name: ':status', value: '{% if request_header("foo") == "bar" %}201{% else %}202{% endif %}'}
    """)
    resp = stack.wait(host, lambda r: r.status_code == 201, "/anything", "the pseudo policy",
                      headers={"foo": "bar", "x-empty": "not empty", "x-not-set": "set"})
    saw = resp.json()
    assert saw["method"] == "POST"
    assert "x-empty" not in saw["headers"] and "x-not-set" not in saw["headers"]
    assert stack.get(host, "/anything", headers={"foo": "baz"}).status_code == 202


def test_loops_sets_and_filters_in_both_syntaxes(stack: Stack) -> None:
    host = serve(stack, "loops", r"""
        request:
          set:
            # Jinja: loop.index counts from 1, filters, tests, set, inline if, for-else
            - name: x-jinja
              value: >-
                {% set sep = "," %}{% for item in items %}{{ loop.index }}:{{ item.name | upper }}{{ "" if loop.last else sep }}{% endfor %}
                {%- for x in missing_list | default([]) %}x{% else %};none{% endfor %}
                {%- if count is defined and count > 2 %};many{% endif %}
            # Inja: loop.index counts from 0 (the template uses Inja's loop.is_last)
            - name: x-inja
              value: '{% for item in items %}{{ loop.index }}{{ item.name }}{% if not loop.is_last %}+{% endif %}{% endfor %}'
            - {name: x-pairs, value: '{% for k, v in meta %}{{ k }}={{ v }};{% endfor %}{{ length(items) }}'}
            - {name: x-json, value: '{{ meta | tojson }}'}
          body: {parseAs: AsJson}
    """)
    sent = {"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "count": 3, "meta": {"z": 1, "a": True}}
    resp = stack.wait(host, lambda r: r.status_code == 200 and "x-jinja" in r.json()["headers"], "/",
                      "the loops policy", method="POST", content=json.dumps(sent).encode())
    seen = resp.json()["headers"]
    assert seen["x-jinja"] == "1:A,2:B,3:C;none;many"
    assert seen["x-inja"] == "0a+1b+2c"
    assert seen["x-pairs"] == "a=true;z=1;3"
    assert json.loads(seen["x-json"]) == {"a": True, "z": 1}


def test_parse_as_none_never_buffers(stack: Stack) -> None:
    host = serve(stack, "no-buffer", r"""
        request:
          set: [{name: x-seen, value: 'len={{ header("content-length") }}'}]
          body: {parseAs: None, value: 'ignored'}
    """)
    resp = stack.wait(host, lambda r: "x-seen" in r.json()["headers"], "/", "the no-buffer policy",
                      method="POST", content=b"untouched")
    assert resp.json()["body"] == "untouched"
    assert resp.json()["headers"]["x-seen"] == "len=9"


def test_dynamic_metadata_reaches_the_access_log(stack: Stack, tmp_path: Path) -> None:
    log = tmp_path / "meta.log"
    stack.write("listener-policy.yaml", f"""
        apiVersion: gateway.lychgate.dev/v1alpha1
        kind: ListenerPolicy
        metadata: {{name: observe}}
        spec:
          targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}]
          default:
            httpSettings:
              accessLog:
                - fileSink:
                    path: {log}
                    stringFormat: "%REQ(:PATH)% user=%DYNAMIC_METADATA(example.audit:user)% status=%DYNAMIC_METADATA(example.audit:status)% empty=%DYNAMIC_METADATA(example.audit:empty)%"
    """)
    host = serve(stack, "metadata", r"""
        request:
          dynamicMetadata:
            - {namespace: example.audit, key: user, value: {stringValue: '{{ user | default("nobody") }}'}}
            - {namespace: example.audit, key: empty, value: {stringValue: '{{ header("x-none") }}'}}
          body: {parseAs: AsJson}
        response:
          dynamicMetadata:
            - {namespace: example.audit, key: status, value: {stringValue: 'got {{ header(":status") }}'}}
    """)

    expected = "/meta-probe user=ada status=got 200 empty=-"
    seen: list[str] = []

    def logged() -> bool:
        # (Until the ListenerPolicy's listener and the route's policy have both reached Envoy, a
        # probe may be logged by one without the other: CI once logged "status=-" first.)
        stack.get(host, "/meta-probe", method="POST", content=b'{"user": "ada"}')
        seen[:] = [line for line in (log.read_text().splitlines() if log.exists() else []) if "/meta-probe" in line]
        return expected in seen

    try:
        wait_for(logged, 15, "a logged request with dynamic metadata")
    except AssertionError:
        raise AssertionError(f"never logged {expected!r}; logged: {seen[-3:]}") from None


def test_invalid_template_is_reported_and_fails_closed(stack: Stack) -> None:
    stack.write(
        "transform-bad.yaml",
        stack.route("transform-bad", "transform-bad.example.com"),
        stack.route("transform-neighbour", "transform-neighbour.example.com"),
        policy("transform-bad", """
            request:
              set: [{name: x-a, value: 'ok {% if header("x") == "y" %}yes{% endfi %}'}]
        """),
    )
    resp = stack.wait("transform-bad.example.com", lambda r: r.status_code == 500, what="the route to fail closed")
    assert "TrafficPolicy status" in resp.text
    assert stack.get("transform-neighbour.example.com").status_code == 200
    accepted = condition(stack.status("TrafficPolicy", "transform-bad")["conditions"], "Accepted")
    assert accepted["status"] == "False"
    assert accepted["message"] == ("invalid field spec.transformation.request.set[0].value: unknown statement "
                                   "{% endfi %} at character 33; known: if, elif, else, endif, for, endfor, set, raw")
