"""The conformance runner judges a round trip as upstream's CompareRoundTrip does."""

from __future__ import annotations

import json

import pytest

from tests.conformance.cases.httproute_pending import preflight
from tests.conformance.suite import INFRA, Answer, CaseFailure, Exp, compare

ECHO = {"content-type": ["application/json"]}


def echo(path: str, method: str = "GET", namespace: str = INFRA, pod: str = "infra-backend-v1-abc",
         headers: dict[str, list[str]] | None = None) -> bytes:
    return json.dumps({"path": path, "method": method, "namespace": namespace, "pod": pod, "host": "",
                       "headers": headers or {}}).encode()


def test_a_preflight_answered_by_the_backend_fails_as_upstream() -> None:
    exp = preflight("/cors-1", "https://foobar.com", (200, 204, 403), response_absent=("access-control-allow-origin",))
    # Envoy answered it itself: no JSON, so only the method is captured (path "", namespace "").
    compare(exp, Answer(200, {}, b""), "gw:80")
    compare(exp, Answer(403, {}, b""), "gw:80")
    # The echo backend answered: it reports the path it saw, which is not "".
    with pytest.raises(CaseFailure, match="backend saw path '/cors-1', want ''"):
        compare(exp, Answer(200, ECHO, echo("/cors-1", "OPTIONS")), "gw:80")
    # A stray CORS header fails on any status (upstream looks on a 200 only).
    with pytest.raises(CaseFailure, match="access-control-allow-origin"):
        compare(exp, Answer(204, {"access-control-allow-origin": ["https://foobar.com"]}, b""), "gw:80")


def test_a_200_from_the_backend_is_compared_field_by_field() -> None:
    exp = Exp("/one", backend="infra-backend-v1", headers={"X-A": "1"})
    compare(exp, Answer(200, ECHO, echo("/one", headers={"X-A": ["1"]})), "gw:80")
    for body, problem in ((echo("/two", headers={"X-A": ["1"]}), "path"),
                          (echo("/one", "POST", headers={"X-A": ["1"]}), "method"),
                          (echo("/one", namespace="other", headers={"X-A": ["1"]}), "namespace"),
                          (echo("/one", pod="infra-backend-v2-abc", headers={"X-A": ["1"]}), "pod"),
                          (echo("/one"), "X-A")):
        with pytest.raises(CaseFailure, match=problem):
            compare(exp, Answer(200, ECHO, body), "gw:80")
    # A 200 that is not the echo's JSON captured nothing but the method: the path differs.
    with pytest.raises(CaseFailure, match="path"):
        compare(exp, Answer(200, {"content-type": ["text/plain"]}, b"hello"), "gw:80")


def test_valid_header_values_ignore_whitespace_when_asked() -> None:
    exp = Exp("/", status=(200,), seen_path="", namespace="", seen_headers={}, ignore_whitespace=True,
              response_valid={"access-control-allow-methods": ("GET, OPTIONS", "OPTIONS, GET")})
    compare(exp, Answer(200, {"access-control-allow-methods": ["GET,OPTIONS"]}, b""), "gw:80")
    with pytest.raises(CaseFailure, match="want one of"):
        compare(exp, Answer(200, {"access-control-allow-methods": ["GET"]}, b""), "gw:80")
