"""Connections held open and connection floods: other clients are served, the proxy holds."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from tests.edge.clients import open_many, read_until_closed, status_of, wait_closed
from tests.edge.conftest import FLOOD_LIMIT, Proxy, Stack
from tests.harness import pid_alive

pytestmark = pytest.mark.e2e


def _served(proxy: Proxy, path: str = "/public", count: int = 10) -> list[int]:
    """What a well-behaved client gets for `count` requests, each on a new connection."""
    out = []
    for _ in range(count):
        with httpx.Client(timeout=2) as client:
            out.append(client.get(f"http://{proxy.address}:{proxy.port}{path}",
                                  headers={"host": "example.com"}).status_code)
    return out


def test_idle_and_slowloris_connections_are_closed_while_others_are_served(stack: Stack) -> None:
    edge = stack.edge
    idle = open_many(edge.address, edge.port, stack.crowd)  # they never send a byte
    slow = open_many(edge.address, edge.port, stack.crowd)  # they trickle a request's headers (slowloris)
    try:
        for sock in slow:  # a request line and one header, never the blank line that ends them
            sock.sendall(b"GET /public HTTP/1.1\r\nHost: example.com\r\n")
        for sock in slow[:100]:  # some keep trickling, a byte at a time
            sock.sendall(b"X")
        # 2,000 connections held (where the open-file limit allows): a normal client is answered, within its 2 s timeout, every time.
        assert _served(edge) == [200] * 10

        # The request-headers timeout (1 s here) answers the slow ones 408 and closes them;
        # the idle timeout (2 s here) closes the idle ones.
        still = wait_closed(idle + slow, timeout=8)
        assert not still, f"{len(still)} of {2 * stack.crowd} connections still open after the timeouts"
    finally:
        for sock in idle + slow:
            sock.close()
    answer = _slow_answer(edge)
    assert status_of(answer) == 408, answer[:200]
    assert _served(edge) == [200] * 10


def _slow_answer(proxy: Proxy) -> bytes:
    with socket.create_connection((proxy.address, proxy.port), timeout=5) as sock:
        sock.sendall(b"GET /public HTTP/1.1\r\nHost: example.com\r\n")
        return read_until_closed(sock, time.monotonic() + 5)


def test_a_connection_flood_past_the_limit_is_refused_and_the_proxy_holds(stack: Stack) -> None:
    flood = stack.flood
    socks = open_many(flood.address, flood.port, FLOOD_LIMIT * 2)
    try:
        time.sleep(0.5)
        # Envoy closes what it accepts past the limit at once; the rest stay open (idle timeout: 60 s).
        still = wait_closed(socks, timeout=3)
        assert FLOOD_LIMIT - 5 <= len(still) <= FLOOD_LIMIT, f"{len(still)} connections held, limit {FLOOD_LIMIT}"
        assert flood.admin_get("/ready").strip() == "LIVE"  # the admin port is outside the limit
        assert flood.rss_bytes() < 200 * 2**20
        # At the limit, a new client is refused too: closed without an answer.
        with socket.create_connection((flood.address, flood.port), timeout=5) as extra:
            extra.sendall(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
            assert read_until_closed(extra, time.monotonic() + 3) == b""
    finally:
        for sock in socks:
            sock.close()
    assert pid_alive(flood.pid)
    # Once the flood is gone, clients are served again.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _try(flood) != 200:
        time.sleep(0.1)
    assert _served(flood, "/") == [200] * 10
    stats = flood.admin_get("/stats?filter=downstream_global_cx_overflow")
    assert any(int(line.rsplit(":", 1)[1]) >= FLOOD_LIMIT for line in stats.splitlines() if line), stats


def _try(proxy: Proxy) -> int:
    try:
        return httpx.get(f"http://{proxy.address}:{proxy.port}/", headers={"host": "example.com"}, timeout=1).status_code
    except httpx.HTTPError:
        return 0
