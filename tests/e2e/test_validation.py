"""Validation levels (spec §7) and recovery from proxy rejections, with real Envoy."""

from __future__ import annotations

import httpx
import pytest

from tests.harness import EchoBackends, Lychgate, gateway_yaml, service_yaml, wait_for

pytestmark = pytest.mark.e2e

ROUTES = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: app}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
    - name: regex
      matches: [{{path: {{type: RegularExpression, value: "{regex}"}}}}]
      backendRefs: [{{name: v2, port: 80}}]
    - name: rest
      backendRefs: [{{name: {rest}, port: 80}}]
"""


def _setup(lg: Lychgate, backends: EchoBackends) -> None:
    for name in ("v1", "v2"):
        lg.write(f"svc-{name}.yaml", service_yaml(name, 80, backends.start(pod=name)))
    lg.write("gateway.yaml", gateway_yaml())


def _conditions(lg: Lychgate, kind: str, name: str) -> dict[str, dict[str, str]]:
    status = lg.status(kind, name)
    conds = status.get("parents", [{}])[0].get("conditions", []) if kind == "HTTPRoute" else status.get("conditions", [])
    return {c["type"]: c for c in conds}


def test_standard_replaces_an_invalid_rule_with_500(lychgate: Lychgate, backends: EchoBackends) -> None:
    lg = lychgate
    _setup(lg, backends)
    lg.write("route.yaml", ROUTES.format(regex="/bad/[a-", rest="v1"))
    lg.start()
    addr = lg.address()
    lg.wait_pod(addr, "v1", "/fine")
    assert lg.get(addr, "/bad/[a-").status_code == 500
    cond = _conditions(lg, "HTTPRoute", "app")["PartiallyInvalid"]
    assert cond["status"] == "True" and "rule regex" in cond["message"] and "[a-" in cond["message"]


def test_standard_nack_keeps_serving_then_recovers(lychgate: Lychgate, backends: EchoBackends) -> None:
    """A regex only Envoy rejects (RE2 has no lookahead): Envoy NACKs, keeps its last
    routes, the Gateway says why; fixing the input recovers without a restart."""
    lg = lychgate
    _setup(lg, backends)
    lg.write("route.yaml", ROUTES.format(regex="/re/[0-9]+", rest="v1"))
    lg.start()
    addr = lg.address()
    lg.wait_pod(addr, "v2", "/re/1")
    pid = lg.proxies()["default/gw"]["pid"]
    lg.write("route.yaml", ROUTES.format(regex="/re(?=x)", rest="v2"))

    def rejected() -> dict[str, str] | None:
        cond = _conditions(lg, "Gateway", "gw").get("Programmed")
        return cond if cond and cond["status"] == "False" else None

    cond = wait_for(rejected, 10, "the Gateway to report the rejection")
    assert "rejected RDS" in cond["message"] and "(?=" in cond["message"]
    # The proxy still serves what it accepted before: /other still goes to v1.
    assert lg.pod(addr, "/other") == "v1"
    assert lg.pod(addr, "/re/1") == "v2"
    xds = httpx.get(f"http://{lg.admin}/snapshots/xds").json()
    assert any(t.get("nack") for p in xds["proxies"] for t in p["types"].values())
    lg.write("route.yaml", ROUTES.format(regex="/re/[0-9]+", rest="v2"))
    lg.wait_pod(addr, "v2", "/other")
    wait_for(lambda: _conditions(lg, "Gateway", "gw")["Programmed"]["status"] == "True", 10, "recovery")
    assert lg.proxies()["default/gw"]["pid"] == pid


def test_strict_blocks_what_envoy_would_reject(lychgate: Lychgate, backends: EchoBackends) -> None:
    lg = lychgate
    _setup(lg, backends)
    lg.write("route.yaml", ROUTES.format(regex="/re/[0-9]+", rest="v1"))
    lg.start("--validation-level", "STRICT")
    addr = lg.address()
    lg.wait_pod(addr, "v1", "/other")
    lg.write("route.yaml", ROUTES.format(regex="/re(?=x)", rest="v2"))

    def blocked() -> dict[str, str] | None:
        cond = _conditions(lg, "HTTPRoute", "app").get("Programmed")
        return cond if cond and cond["status"] == "False" else None

    cond = wait_for(blocked, 15, "the route to report it was blocked")
    assert cond["reason"] == "Rejected"
    assert "httproute/default/app/rule/0/match/0" in cond["message"] and "(?=" in cond["message"]
    # Nothing was sent that Envoy would refuse: no NACK, and the last good routes serve.
    assert lg.pod(addr, "/other") == "v1"
    xds = httpx.get(f"http://{lg.admin}/snapshots/xds").json()
    assert not any(t.get("nack") for p in xds["proxies"] for t in p["types"].values())
    metrics = httpx.get(f"http://{lg.metrics}/metrics").text
    assert 'lychgate_xds_blocked_snapshots_total{gateway="default/gw"}' in metrics
    # Fixed input flows again.
    lg.write("route.yaml", ROUTES.format(regex="/re/[0-9]+", rest="v2"))
    lg.wait_pod(addr, "v2", "/other")
    wait_for(lambda: "Programmed" not in _conditions(lg, "HTTPRoute", "app"), 10, "the block to clear")
