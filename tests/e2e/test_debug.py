"""The debug surfaces of spec §4 against a running control plane and real Envoy."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from tests.harness import EchoBackends, Lychgate, gateway_yaml, service_yaml, wait_for

pytestmark = pytest.mark.e2e

ROUTE = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{host}]
  rules:
    - matches: [{{path: {{type: RegularExpression, value: "{regex}"}}}}]
      backendRefs: [{{name: {backend}, port: 80}}]
"""


@pytest.fixture
def running(lychgate: Lychgate, backends: EchoBackends) -> Lychgate:
    lychgate.write("svc.yaml", service_yaml("v1", 80, backends.start(pod="v1")))
    lychgate.write("gateway.yaml", gateway_yaml())
    lychgate.write("route.yaml", ROUTE.format(name="app", host="app.example.com", regex="/.*", backend="v1"))
    return lychgate


def test_proxy_admin_commands(running: Lychgate) -> None:
    lg = running.start()
    lg.wait_pod(lg.address(), "v1", host="app.example.com")
    dump = json.loads(lg.cli("proxy", "config-dump", "gw", "--resource", "dynamic_route_configs").stdout)
    assert "httproute/default/app/rule/0/match/0" in json.dumps(dump)
    assert "http-8080" in lg.cli("proxy", "listeners", "gw").stdout
    assert "router: debug" in lg.cli("proxy", "logging", "gw", "--level", "debug").stdout
    assert "envoy_http_downstream_rq_total" in lg.cli("proxy", "stats", "gw").stdout
    missing = lg.cli("proxy", "listeners", "nope")
    assert missing.returncode == 1 and "default/nope has no proxy" in missing.stderr


def test_admin_metrics_and_health(running: Lychgate) -> None:
    lg = running.start()
    lg.wait_pod(lg.address(), "v1", host="app.example.com")
    index = httpx.get(f"http://{lg.admin}/").text
    for path in ("/debug/pprof", "/logging", "/snapshots/krt", "/snapshots/xds", "/api/v1/objects"):
        assert path in index
    krt = httpx.get(f"http://{lg.admin}/snapshots/krt", params={"kind": "HTTPRoute"}).json()
    assert "app" in json.dumps(krt)
    xds = httpx.get(f"http://{lg.admin}/snapshots/xds").json()
    [proxy] = xds["proxies"]
    assert proxy["gateway"] == "default/gw"
    assert all(t["version_sent"] == t["version_acked"] for t in proxy["types"].values())
    metrics = httpx.get(f"http://{lg.metrics}/metrics").text
    assert 'lychgate_xds_connected_proxies{gateway="default/gw"} 1.0' in metrics
    assert "lychgate_translation_duration_seconds_count" in metrics
    assert 'lychgate_objects{kind="HTTPRoute"} 1.0' in metrics
    assert httpx.get(f"http://{lg.health}/healthz").status_code == 200
    assert httpx.get(f"http://{lg.health}/readyz").status_code == 200


def test_cpu_profile_while_translating_shows_translation(running: Lychgate) -> None:
    lg = running
    # Enough routes that every pass does real translation work.
    lg.write("many.yaml", "---\n".join(
        ROUTE.format(name=f"r{i}", host=f"h{i}.example.com", regex=f"/{i}/.*", backend="v1") for i in range(300)
    ))
    lg.start()
    lg.wait_pod(lg.address(), "v1", host="app.example.com")
    stop = threading.Event()

    def churn() -> None:  # bounded: at most 400 edits or until the profile is done
        # Gateway edits: each one makes the next pass translate every route again.
        for i in range(400):
            if stop.is_set():
                return
            lg.write("gateway.yaml", gateway_yaml().replace("metadata: {name: gw, namespace: default}",
                                                            f"metadata: {{name: gw, namespace: default, labels: {{edit: e{i}}}}}"))
            time.sleep(0.005)

    writer = threading.Thread(target=churn)
    writer.start()
    try:
        profile = httpx.get(f"http://{lg.admin}/debug/pprof/profile", params={"seconds": "2", "hz": "250"}, timeout=30).text
    finally:
        stop.set()
        writer.join()
    assert "translate" in profile  # lychgate.translate functions were on the CPU


def test_logging_levels_follow_the_admin_page(running: Lychgate) -> None:
    lg = running.start()
    lg.wait_pod(lg.address(), "v1", host="app.example.com")
    assert "push default/gw" not in lg.log()  # xDS pushes are logged at debug only
    assert httpx.put(f"http://{lg.admin}/logging", params={"xds": "debug"}).status_code == 200
    lg.write("route.yaml", ROUTE.format(name="app", host="app.example.com", regex="/x/.*", backend="v1"))
    wait_for(lambda: "push default/gw" in lg.log(), 10, "debug lines of the xds component")
    assert httpx.put(f"http://{lg.admin}/logging", params={"nosuch": "debug"}).status_code == 400


def test_debug_report_finds_problems(running: Lychgate, monkeypatch: pytest.MonkeyPatch) -> None:
    # lychgate's own checks off: Envoy (the strict preflight) finds the bad regex below.
    monkeypatch.setenv("LYCHGATE_ENVOY_LIMITS", "off")
    lg = running
    lg.write("broken.yaml", ROUTE.format(name="broken", host="b.example.com", regex="/.*", backend="missing"))
    lg.write("policy.yaml", """
        apiVersion: gateway.lychgate.dev/v1alpha1
        kind: TrafficPolicy
        metadata: {name: lonely}
        spec:
          targetSelectors: [{group: gateway.networking.k8s.io, kind: HTTPRoute, matchLabels: {team: nobody}}]
          timeouts: {request: 5s}
    """)
    lg.start("--validation-level", "strict")
    lg.wait_pod(lg.address(), "v1", host="app.example.com")
    healthy = lg.cli("debug", "-o", "json")
    report = json.loads(healthy.stdout)
    assert healthy.returncode == 1
    bad = [f for f in report["findings"] if not f["ok"]]
    assert any(f["subject"] == "HTTPRoute default/broken" and "BackendNotFound" in f["message"] for f in bad)
    assert any(f["step"] == "config" and f["ok"] for f in report["findings"])
    assert any(f["subject"] == "TrafficPolicy default/lonely" and "not applied" in f["message"] for f in bad)
    # A route Envoy would reject is quarantined: it answers 500, and debug says why.
    lg.write("route.yaml", ROUTE.format(name="app", host="app.example.com", regex="/a(?=b)", backend="v1"))
    wait_for(lambda: "quarantined" in lg.cli("debug").stdout, 15, "debug to report the quarantined rule")
    text = lg.cli("debug").stdout
    assert "quarantined: rule 0 of HTTPRoute default/app answers 500 because Envoy rejected it" in text
    assert "strict validation found that Envoy rejects it" in text  # the route's own status says so too


def test_debug_sees_the_routes_of_a_matcher_tree(running: Lychgate) -> None:
    """A host with many routes is a prefix map on :path in Envoy: debug still finds
    each translated route on the proxy, once."""
    from lychgate.xds.translator.route_matcher import MATCHER_MIN_ROUTES

    lg = running
    lg.write("many.yaml", "---\n".join(
        ROUTE.format(name=f"m{i}", host="many.example.com", regex=f"/m{i}", backend="v1").replace(
            "RegularExpression", "PathPrefix") for i in range(MATCHER_MIN_ROUTES)))
    lg.start()
    lg.wait_pod(lg.address(), "v1", f"/m{MATCHER_MIN_ROUTES - 1}/x", host="many.example.com")
    report = json.loads(lg.cli("debug", "-o", "json").stdout)
    [config] = [f for f in report["findings"] if f["step"] == "config"]
    assert config["ok"], report
    assert config["message"] == f"holds exactly the {MATCHER_MIN_ROUTES + 1} translated routes"
