"""HTTPRoute sessionPersistence end to end: real Envoy in front of a pool of real
backend Pods. With the session cookie or header a client stays on one Pod; without
it requests spread over the pool."""

from __future__ import annotations

from collections import Counter

import httpx
import pytest

from tests.harness import wait_for
from tests.policies.conftest import Stack, condition
from tests.policies.pool import Pool

pytestmark = pytest.mark.e2e


def get(stack: Stack, host: str, headers: dict[str, str] | None = None) -> httpx.Response:
    """A request with no cookie jar: only the cookies in `headers` are sent."""
    return httpx.get(f"http://{stack.addr}:8080/", headers={"host": host, **(headers or {})}, timeout=10)


def deploy(stack: Stack, pool: Pool, session: str, marker: str = "set-cookie") -> str:
    """The pool, its route with `session`; waits until responses carry the `marker` header
    (the listener gains the stateful session filter after the route is served)."""
    host = f"{pool.service}.example.com"
    stack.write(f"{pool.service}.yaml", pool.manifest(), stack.route(pool.service, host, f"""
        - backendRefs: [{{name: {pool.service}, port: 80}}]
          sessionPersistence: {session}"""))
    wait_for(lambda: (r := get(stack, host)).status_code == 200 and marker in r.headers, 10, f"{host} to keep sessions")
    return host


def test_cookie_keeps_a_client_on_one_pod_until_it_is_dropped(stack: Stack) -> None:
    pool = Pool(stack.servers, "sticky-cookie", 3, 61)
    host = deploy(stack, pool, "{sessionName: Session-A, absoluteTimeout: 1h, cookieConfig: {lifetimeType: Permanent}}")
    first = get(stack, host)
    cookie = first.headers["set-cookie"]
    name, _, rest = cookie.partition("=")
    value = rest.split(";")[0]
    assert name == "Session-A" and "Max-Age=3600" in cookie and "Path=/" in cookie, cookie
    pod = first.headers["x-backend"]
    seen = Counter(get(stack, host, headers={"cookie": f"Session-A={value}"}).headers["x-backend"] for _ in range(30))
    assert seen == Counter({pod: 30}), seen
    # Without the cookie, the pool's load balancing is back.
    spread = Counter(get(stack, host).headers["x-backend"] for _ in range(30))
    assert len(spread) == 3, spread


def test_session_cookie_has_no_max_age(stack: Stack) -> None:
    pool = Pool(stack.servers, "sticky-session", 2, 62)
    host = deploy(stack, pool, "{type: Cookie}")
    cookie = get(stack, host).headers["set-cookie"]
    assert cookie.startswith("sessionPersistence=") and "Max-Age" not in cookie, cookie


def test_header_keeps_a_client_on_one_pod(stack: Stack) -> None:
    pool = Pool(stack.servers, "sticky-header", 3, 63)
    host = deploy(stack, pool, "{sessionName: Session-A, type: Header}", "session-a")
    first = get(stack, host)
    token = first.headers["session-a"]
    pod = first.headers["x-backend"]
    seen = Counter(get(stack, host, headers={"Session-A": token}).headers["x-backend"] for _ in range(30))
    assert seen == Counter({pod: 30}), seen
    spread = Counter(get(stack, host).headers["x-backend"] for _ in range(30))
    assert len(spread) == 3, spread


def test_what_envoy_cannot_honour_is_named_in_the_status(stack: Stack) -> None:
    pool = Pool(stack.servers, "sticky-noted", 2, 64)
    deploy(stack, pool, "{type: Header, absoluteTimeout: 100s, idleTimeout: 10s}", "x-session-persistence")

    def accepted() -> dict[str, str] | None:
        parents = stack.status("HTTPRoute", pool.service).get("parents", [])
        return condition(parents[0]["conditions"], "Accepted") if parents else None

    message = wait_for(accepted, 10, "route status")["message"]
    assert "sessionPersistence.idleTimeout is not honoured" in message, message
    assert "sessionPersistence.absoluteTimeout is not honoured with type Header" in message, message
