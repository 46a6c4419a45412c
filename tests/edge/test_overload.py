"""Memory pressure: the proxy sheds load with 503s instead of dying.

The `overloaded` Gateway's heap limit (GatewayParameters
bootstrap.overload.maxHeapSize: 2Mi) is below what Envoy uses at rest, so its
overload manager sees the pressure a flood of buffered requests would cause.
"""

from __future__ import annotations

import httpx
import pytest

from tests.edge.conftest import Stack
from tests.harness import pid_alive, wait_for

pytestmark = pytest.mark.e2e


def test_under_memory_pressure_requests_are_answered_503_and_the_proxy_lives(stack: Stack) -> None:
    proxy = stack.overloaded
    active = "overload.envoy.overload_actions.stop_accepting_requests.active"
    wait_for(lambda: proxy.admin_get(f"/stats?filter={active}").strip() == f"{active}: 1", 5,
             "the overload manager to stop accepting requests")
    url = f"http://{proxy.address}:{proxy.port}/"
    with httpx.Client(timeout=2) as client:
        answers = [client.get(url, headers={"host": "example.com"}) for _ in range(50)]
    assert {a.status_code for a in answers} == {503}
    assert "overload" in answers[0].text.lower()
    # Under pressure Envoy also stops keep-alive (each answer closes its connection) and
    # returns free memory to the system.
    assert all(a.headers.get("connection") == "close" for a in answers)
    shrink = "overload.envoy.overload_actions.shrink_heap.active"
    assert proxy.admin_get(f"/stats?filter={shrink}").strip() == f"{shrink}: 1"
    assert pid_alive(proxy.pid)
    assert proxy.admin_get("/ready").strip() == "LIVE"  # the admin port is exempt: operators can look
    # Its neighbours, with the default heap limit, are not affected.
    assert httpx.get(f"http://{stack.edge.address}:{stack.edge.port}/public",
                     headers={"host": "example.com"}).status_code == 200
