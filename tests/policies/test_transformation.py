"""transformation end to end: templates rendered by the Lua filter in real Envoy."""

from __future__ import annotations

import json

import pytest

from tests.policies.conftest import Stack, condition

pytestmark = pytest.mark.e2e

POLICY = r"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: transform}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: transform}]
  transformation:
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
        value: '{"name": {{ json(user.name) }}, "first_tag": "{{ user.tags.0 }}", "page": {{ json(query_param("page")) }}, "none": {{ json(header("x-none")) }}}'
    response:
      set:
        - {name: x-served-by, value: '{{ header("x-backend") }}'}
        - {name: x-asked-by, value: '{{ request_header("x-in") }} on {{ path() }}'}
      remove: [x-backend]
      body:
        parseAs: AsJson
        value: '{"backend": "{{ pod }}", "saw": {{ body() }}}'
"""


def test_request_and_response_are_transformed(stack: Stack) -> None:
    stack.write("transform.yaml", stack.route("transform", "transform.example.com"), POLICY)
    sent = {"user": {"name": "Ada \u00e9\"q\"", "tags": ["math", "engines"]}, "extra": [1, 2.5, None, True]}
    resp = stack.wait(
        "transform.example.com", lambda r: "x-served-by" in r.headers, "/orders/7?page=2&x=a%20b",
        "the response to be transformed", method="POST", content=json.dumps(sent).encode(),
        headers={"x-in": "tester", "x-secret": "s3cr3t", "content-type": "application/json"},
    )
    assert resp.status_code == 200
    # Response: headers from the backend's response and from the request, one removed.
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

    # A body that is not JSON: fields render empty, the rest still happens.
    plain = stack.get("transform.example.com", "/p", method="POST", content=b"not json",
                      headers={"x-in": "t2"})
    assert plain.status_code == 200
    assert plain.json()["saw"]["headers"]["x-user"] == ""
    assert json.loads(plain.json()["saw"]["body"])["name"] is None

    st = stack.status("TrafficPolicy", "transform")
    assert condition(st["conditions"], "Applied")["status"] == "True"


def test_invalid_template_is_reported_and_fails_closed(stack: Stack) -> None:
    stack.write(
        "transform-bad.yaml",
        stack.route("transform-bad", "transform-bad.example.com"),
        stack.route("transform-neighbour", "transform-neighbour.example.com"),
        """
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: transform-bad}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: transform-bad}]
  transformation:
    request:
      set: [{name: x-a, value: '{{ uppercase(header("x")) }}'}]
""",
    )
    resp = stack.wait("transform-bad.example.com", lambda r: r.status_code == 500, what="the route to fail closed")
    assert "TrafficPolicy status" in resp.text
    assert stack.get("transform-neighbour.example.com").status_code == 200
    accepted = condition(stack.status("TrafficPolicy", "transform-bad")["conditions"], "Accepted")
    assert accepted["status"] == "False"
    assert accepted["message"].startswith("invalid field spec.transformation.request.set[0].value: ")
