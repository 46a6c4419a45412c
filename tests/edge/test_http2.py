"""HTTP/2 abuse on prior-knowledge h2c: rapid reset and stream floods."""

from __future__ import annotations

import httpx
import pytest

from tests.edge.clients import (
    CANCEL,
    H2,
    INITIAL_WINDOW_SIZE,
    MAX_CONCURRENT_STREAMS,
    RST_STREAM,
    frame,
)
from tests.edge.conftest import Proxy, Stack
from tests.harness import pid_alive

pytestmark = pytest.mark.e2e

AUTHORITY = "example.com"


def _served(proxy: Proxy) -> list[int]:
    with httpx.Client(timeout=2) as client:
        return [client.get(f"http://{proxy.address}:{proxy.port}/public", headers={"host": AUTHORITY}).status_code
                for _ in range(10)]


def _requests(proxy: Proxy) -> int:
    """HTTP/2 requests the proxy has taken on its listener so far."""
    stats = proxy.admin_get(f"/stats?filter=^http\\.http-{proxy.port}\\.downstream_rq_http2_total$")
    return int(stats.rsplit(":", 1)[1])


def test_the_proxy_advertises_the_edge_limits(stack: Stack) -> None:
    conn = H2.connect(stack.edge.address, stack.edge.port)
    try:
        conn.send(conn.headers(1, AUTHORITY, "/public"))
        conn.read(5, until=lambda: 1 in conn.responses)
        assert conn.settings.get(MAX_CONCURRENT_STREAMS) == 100
        assert conn.settings.get(INITIAL_WINDOW_SIZE) == 65536
        assert conn.responses == {1: 200}
    finally:
        conn.close()


def test_rapid_reset_closes_the_abuser_and_others_are_served(stack: Stack) -> None:
    """CVE-2023-44487: open a stream and cancel it at once, in a loop, so the server does the
    work of every request and the client never waits for one."""
    conn = H2.connect(stack.edge.address, stack.edge.port)
    try:
        sent = 0
        for batch in range(20):  # up to 20 x 100 streams (a stream id is odd)
            burst = b"".join(conn.headers(s, AUTHORITY, "/public", end_stream=False)
                             + frame(RST_STREAM, 0, s, CANCEL.to_bytes(4, "big"))
                             for s in range(1 + 200 * batch, 200 * (batch + 1), 2))
            conn.send(burst)
            sent += 100
            conn.read(0.05)
            if conn.closed or conn.goaway is not None:
                break
        conn.read(2)
        # Envoy counts resets of streams younger than a second and, past half of 500 streams,
        # closes the connection.
        assert conn.goaway is not None or conn.closed, f"{sent} streams reset, connection still open"
    finally:
        conn.close()
    assert pid_alive(stack.edge.pid)
    assert _served(stack.edge) == [200] * 10


def test_streams_past_the_limit_are_refused_and_others_are_served(stack: Stack) -> None:
    """500 requests opened at once on one connection, none finished (no END_STREAM): the
    server allows 100 at a time: the streams past them never become requests, and a client
    that ignores the limit loses its connection."""
    before = _requests(stack.edge)
    conn = H2.connect(stack.edge.address, stack.edge.port)
    try:
        conn.read(0.5)  # the server's SETTINGS, acknowledged
        conn.send(b"".join(conn.headers(s, AUTHORITY, "/public", end_stream=False) for s in range(1, 1001, 2)))
        conn.read(3)
        assert conn.closed or conn.goaway is not None or len(conn.resets) >= 400, (
            f"{len(conn.resets)} streams reset, no GOAWAY, connection open")
    finally:
        conn.close()
    assert _requests(stack.edge) - before <= 100
    assert pid_alive(stack.edge.pid)
    assert _served(stack.edge) == [200] * 10
