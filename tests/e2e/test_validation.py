"""Validation levels (spec §7), with real Envoy. What Envoy refuses, and how
rejections are quarantined in both levels: tests/e2e/test_quarantine.py."""

from __future__ import annotations

import pytest

from tests.harness import EchoBackends, Lychgate, gateway_yaml, service_yaml

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
