"""Global rate limiting end to end: real Envoy asks a real rate limit service
(Envoy's envoy.service.ratelimit.v3 protocol) about each request's descriptors."""

from __future__ import annotations

import pytest

from tests.harness import free_port
from tests.policies.conftest import Stack, condition, lychgate_object, route_policy
from tests.policies.ratelimit_server import start

pytestmark = pytest.mark.e2e


def extension(name: str, service: str, port: int, extra: str = "") -> str:
    return lychgate_object("GatewayExtension", name, f"""  type: RateLimit
  rateLimit:
    grpcService: {{backendRef: {{name: {service}, port: {port}}}}}
    domain: api{extra}""")


def limited(name: str, route: str, extension_name: str, descriptors: str) -> str:
    return route_policy(name, route, f"""  rateLimit:
    global:
      extensionRef: {{name: {extension_name}}}
      descriptors: {descriptors}""")


def test_descriptors_are_counted_and_over_limit_answers_429(stack: Stack) -> None:
    rls = start(stack.servers)
    rls.limits[("api", (("api", "orders"), ("x-user", "alice")))] = 3
    stack.service("rls", rls.port)
    stack.write("rl.yaml", extension("rls", "rls", rls.port, "\n    xRateLimitHeaders: DraftVersion03"),
                stack.route("orders", "orders.example.com"),
                limited("orders", "orders", "rls",
                        "[{entries: [{type: Generic, generic: {key: api, value: orders}}, {type: Header, header: x-user}]}]"))
    alice = {"x-user": "alice"}
    stack.wait("orders.example.com", lambda r: r.status_code == 429, headers=alice, what="alice to run out")
    resp = stack.get("orders.example.com", headers=alice)
    assert resp.status_code == 429
    assert resp.headers["x-envoy-ratelimited"] == "true"
    assert resp.headers["x-ratelimit-limit"].startswith("3")
    assert resp.headers["x-ratelimit-remaining"] == "0"
    assert rls.hits[("api", (("api", "orders"), ("x-user", "alice")))] >= 4
    ok = stack.get("orders.example.com", headers={"x-user": "bob"})  # counted apart, no limit set
    assert ok.status_code == 200
    assert rls.seen[-1] == ("api", ((("api", "orders"), ("x-user", "bob")),))
    assert condition(stack.status("GatewayExtension", "rls")["conditions"], "Accepted")["status"] == "True"


def test_remote_address_and_path_descriptors(stack: Stack) -> None:
    rls = start(stack.servers)
    stack.service("rls-paths", rls.port)
    stack.write("paths.yaml", extension("rls-paths", "rls-paths", rls.port),
                stack.route("paths", "paths.example.com"),
                limited("paths", "paths", "rls-paths", "[{entries: [{type: RemoteAddress}]}, {entries: [{type: Path}]}]"))
    stack.wait("paths.example.com", lambda r: r.status_code == 200 and bool(rls.seen), path="/reports/1",
               what="the rate limit service to be asked")
    domain, descriptors = rls.seen[-1]
    assert domain == "api"
    assert descriptors[0][0][0] == "remote_address" and descriptors[0][0][1].startswith("127.")
    assert descriptors[1] == (("path", "/reports/1"),)
    rls.limits[("api", (("path", "/reports/2"),))] = 0
    assert stack.get("paths.example.com", "/reports/2").status_code == 429
    assert stack.get("paths.example.com", "/reports/3").status_code == 200


@pytest.mark.parametrize(("fail_open", "expected"), [(True, 200), (False, 500)])
def test_an_unreachable_service_fails_open_or_closed(stack: Stack, fail_open: bool, expected: int) -> None:
    name, port = f"down-{str(fail_open).lower()}", free_port()
    stack.service(name, port)  # nothing listens there
    stack.write(f"{name}.yaml", extension(name, name, port, f"\n    failOpen: {str(fail_open).lower()}"),
                stack.route(name, f"{name}.example.com"),
                limited(name, name, name, "[{entries: [{type: Generic, generic: {key: k, value: v}}]}]"))
    assert stack.applied(name)["status"] == "True"  # the limit is on the route either way
    resp = stack.wait(f"{name}.example.com", lambda r: r.status_code == expected,
                      what=f"failOpen {fail_open} to answer {expected}")
    assert resp.status_code == expected


def test_shadow_mode_counts_but_does_not_refuse(stack: Stack) -> None:
    """percentEnforced (kgateway 2.5, Envoy filter_enforced): at 0 a request the service
    says is over the limit still passes, and Envoy counts it; at 100 it gets 429.
    percentEnabled 0 (filter_enabled) does not ask the service at all."""
    rls = start(stack.servers)
    stack.service("rls-shadow", rls.port)
    entries = "[{entries: [{type: Generic, generic: {key: plan, value: %s}}]}]"
    for mode in ("shadow", "enforced", "off"):
        rls.limits[("api", (("plan", mode),))] = 0  # every request is over the limit
    stack.write("shadow.yaml",
                extension("rl-shadow", "rls-shadow", rls.port, "\n    percentEnabled: 100\n    percentEnforced: 0"),
                extension("rl-enforced", "rls-shadow", rls.port, "\n    percentEnforced: 100"),
                extension("rl-off", "rls-shadow", rls.port, "\n    percentEnabled: 0"),
                *(stack.route(f"rl-{m}", f"rl-{m}.example.com") for m in ("shadow", "enforced", "off")),
                *(limited(f"rl-{m}", f"rl-{m}", f"rl-{m}", entries % m) for m in ("shadow", "enforced", "off")))
    stack.wait("rl-enforced.example.com", lambda r: r.status_code == 429, what="the limit to apply")
    stack.wait("rl-shadow.example.com", lambda r: bool(rls.hits.get(("api", (("plan", "shadow"),)))),
               what="the shadow limit to ask the service")
    before = over_limit(stack)
    for _ in range(3):
        assert stack.get("rl-shadow.example.com").status_code == 200
    assert over_limit(stack) == before + 3  # counted as over the limit, not refused
    assert stack.get("rl-enforced.example.com").status_code == 429
    asked = sum(rls.hits.values())
    assert stack.get("rl-off.example.com").status_code == 200
    assert sum(rls.hits.values()) == asked  # percentEnabled 0: the service is not asked


def over_limit(stack: Stack, prefix: str = "default_rl-shadow") -> int:
    """Envoy counts the service's "over limit" answers on the route's cluster, under the
    filter's stat prefix (cluster.<cluster>.ratelimit.<prefix>.over_limit)."""
    admin = stack.lg.proxies()["default/gw"]["admin"]
    text = stack.lg.client.get(f"http://{admin}/stats?filter=ratelimit\\.{prefix}\\.over_limit$").text
    return sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.strip())
