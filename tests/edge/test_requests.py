"""Malformed and oversized HTTP/1.1 requests: refused with the right status, routes not escaped."""

from __future__ import annotations

import json

import pytest

from tests.edge.clients import raw_request, status_of
from tests.edge.conftest import Stack

pytestmark = pytest.mark.e2e


def _send(stack: Stack, head: str, body: bytes = b"", first: bool = True) -> bytes:
    edge = stack.edge
    return raw_request(edge.address, edge.port, head.replace("\n", "\r\n").encode() + body, timeout=3, first=first)


def _get(stack: Stack, path: str, extra: str = "") -> bytes:
    return _send(stack, f"GET {path} HTTP/1.1\nHost: example.com\n{extra}\n")


def _echo(answer: bytes) -> dict[str, object]:
    """The echo backend's JSON (which backend, which path it saw)."""
    assert status_of(answer) == 200, answer[:300]
    return dict(json.loads(answer.split(b"\r\n\r\n", 1)[1]))


def test_oversized_request_headers_are_answered_431(stack: Stack) -> None:
    # 60 KiB of headers by default (maxRequestHeadersKb): 40 KiB pass (in 8 KiB lines, the
    # longest the echo backend takes), 70 KiB do not.
    assert status_of(_get(stack, "/public", "".join(f"X-Big{i}: {'a' * 8000}\n" for i in range(5)))) == 200
    assert status_of(_get(stack, "/public", f"X-Big: {'a' * 70 * 1024}\n")) == 431


def test_too_many_request_headers_are_answered_431(stack: Stack) -> None:
    # 100 headers by default (maxHeadersCount), Host and Connection included.
    assert status_of(_get(stack, "/public", "".join(f"X-H{i}: v\n" for i in range(90)))) == 200
    assert status_of(_get(stack, "/public", "".join(f"X-H{i}: v\n" for i in range(150)))) == 431


def test_an_oversized_body_to_a_buffered_route_is_answered_413(stack: Stack) -> None:
    head = "POST /upload HTTP/1.1\nHost: example.com\nContent-Length: {}\n\n"
    assert status_of(_send(stack, head.format(1024), b"a" * 1024)) == 200
    assert status_of(_send(stack, head.format(64 * 1024), b"a" * 64 * 1024)) == 413


def test_a_route_that_reads_whole_bodies_takes_more_than_a_connection_buffers(stack: Stack) -> None:
    # The listener buffers 32 KiB per connection; a transformation reading the JSON body gets
    # 1 MiB (Envoy's default), so ordinary bodies still pass, and larger ones are answered 413.
    head = "POST /transform HTTP/1.1\nHost: example.com\nContent-Type: application/json\nContent-Length: {}\n\n"
    body = json.dumps({"greeting": "hello", "pad": "a" * 200 * 1024}).encode()
    answer = _send(stack, head.format(len(body)), body)
    assert status_of(answer) == 200, answer[:300]
    assert _echo(answer)["headers"]["X-Greeting"] == ["hello"]  # type: ignore[index]
    big = json.dumps({"pad": "a" * 2 * 2**20}).encode()
    assert status_of(_send(stack, head.format(len(big)), big)) == 413


@pytest.mark.parametrize("head", [
    # Both framings: a front end reading Content-Length and a back end reading chunks disagree.
    "POST /public HTTP/1.1\nHost: example.com\nContent-Length: 4\nTransfer-Encoding: chunked\n\n",
    # Two different lengths.
    "POST /public HTTP/1.1\nHost: example.com\nContent-Length: 4\nContent-Length: 40\n\n",
    # A transfer coding other than chunked last.
    "POST /public HTTP/1.1\nHost: example.com\nTransfer-Encoding: chunked, identity\n\n",
    # A transfer coding Envoy does not know.
    "POST /public HTTP/1.1\nHost: example.com\nTransfer-Encoding: xchunked\n\n",
], ids=["cl-and-te", "two-lengths", "te-not-chunked-last", "te-unknown"])
def test_request_smuggling_shapes_are_refused(stack: Stack, head: str) -> None:
    # The body smuggles a second request: it must never reach a backend.
    smuggled = b"0\r\n\r\nGET /admin HTTP/1.1\r\nHost: example.com\r\n\r\n"
    answer = _send(stack, head, smuggled, first=False)
    assert status_of(answer) in (400, 501), answer[:300]
    assert answer.count(b"HTTP/1.1 ") == 1, answer  # one answer, then the connection is closed


def test_headers_with_underscores_are_refused(stack: Stack) -> None:
    # X_User and X-User would be one header to a backend that folds them: refused, not forwarded.
    assert status_of(_get(stack, "/public", "X_User: admin\n")) == 400
    assert status_of(_get(stack, "/public", "X-User: alice\n")) == 200


@pytest.mark.parametrize("path", ["/public/../admin", "/public/%2e%2e/admin", "/public/%2E%2E/admin",
                                  "/public/./../admin", "/public/a/../../admin"])
def test_dot_segments_are_resolved_before_routing(stack: Stack, path: str) -> None:
    # Never the public route's backend with a path that climbs out of /public: Envoy
    # normalizes first, so the request is routed (and its policies applied) as /admin.
    echo = _echo(_get(stack, path))
    assert (echo["pod"], echo["path"]) == ("admin", "/admin")


@pytest.mark.parametrize("path", ["/public%2F..%2Fadmin", "/public%2f..%2fadmin", "/public%5C..%5Cadmin"])
def test_escaped_slashes_are_redirected_to_their_plain_form(stack: Stack, path: str) -> None:
    answer = _get(stack, path)
    assert status_of(answer) == 307, answer[:300]
    location = next(line for line in answer.split(b"\r\n") if line.lower().startswith(b"location:"))
    assert b"%2f" not in location.lower() and b"%5c" not in location.lower(), location


def test_plain_requests_still_reach_their_routes(stack: Stack) -> None:
    assert _echo(_get(stack, "/public/a//b"))["path"] == "/public/a/b"  # slashes merged
    assert _echo(_get(stack, "/admin"))["pod"] == "admin"
