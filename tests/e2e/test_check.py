"""`lychgate check` says what `lychgate run` says about the same directory, bad inputs
included, and `lychgate translate` prints what the running proxy holds (issue 33)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from lychgate.check import Finding, object_findings, problem_findings
from lychgate.sources.files import Problem
from tests.harness import EchoBackends, Lychgate, gateway_yaml, service_yaml

pytestmark = pytest.mark.e2e

ROUTES = """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: good}
spec:
  parentRefs: [{name: gw}]
  hostnames: [good.example.com]
  rules:
  - backendRefs: [{name: echo, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /empty}}]
    backendRefs: [{name: empty, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: nobackend}
spec:
  parentRefs: [{name: gw}]
  hostnames: [nb.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /x}}]
    backendRefs:
    - name: missing
      port: 80
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: orphan}
spec:
  parentRefs: [{name: nogw}]
  rules:
  - backendRefs: [{name: echo, port: 80}]
"""
POLICIES = """\
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: timeouts}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: good}]
  timeouts: {request: 5s}
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: lost}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: gone}]
  timeouts: {request: 5s}
"""
MISTYPED = """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: typo}
spec:
  parentRefs: [{name: gw}]
  rules:
  - backendRefs:
    - name: echo
      port: eighty
"""


def _cli(lg: Lychgate, *args: str) -> subprocess.CompletedProcess[str]:
    """The command run in the manifests' directory, with `lychgate run`'s state directory."""
    path = os.pathsep.join(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    return subprocess.run([sys.executable, "-m", "lychgate", *args], capture_output=True, text=True, timeout=60,
                          cwd=lg.manifests, env=dict(os.environ, LYCHGATE_STATE_DIR=str(lg.state), PYTHONPATH=path))


def _run_findings(lg: Lychgate, kinds: set[str]) -> set[Finding]:
    """What the running control plane reports, judged by check's own rules."""
    found: set[Finding] = set()
    for p in lg.problems():
        problem = Problem(**{**p, "fields": tuple(tuple(f) for f in p["fields"])})
        found |= set(problem_findings(problem))
    # An object its manifest problem refused also says so in its status (status/invalid.py):
    # the same verdict on the same field, which check reports once, from the manifest.
    refused = {(f.object, f.field) for f in found}
    for kind in kinds:
        for obj in lg.objects(kind):
            # Lines are check's: this compares the verdicts, not the line lookup.
            found |= {Finding(None, None, f.object, f.field, f.message, f.severity)
                      for f in object_findings(obj, obj.get("status") or {}, lambda _path: None)
                      if (f.object, f.field) not in refused}
    return found


def test_check_agrees_with_run_and_translate_with_the_proxy(lychgate: Lychgate, backends: EchoBackends) -> None:
    lg = lychgate
    lg.write("gateway.yaml", gateway_yaml() + "---\n" + service_yaml("echo", 80, backends.start(pod="echo"))
             + "---\napiVersion: v1\nkind: Service\nmetadata: {name: empty}\nspec: {ports: [{port: 80}]}\n")
    lg.write("routes.yaml", ROUTES)
    lg.write("policies.yaml", POLICIES)
    lg.write("mistyped.yaml", MISTYPED)
    lg.write("broken.yaml", "apiVersion: v1\nkind: [unclosed\n")

    checked = _cli(lg, "check", ".", "-o", "json")
    assert checked.returncode == 1, checked.stderr
    report = json.loads(checked.stdout)
    findings = {Finding(**f) for f in report["findings"]}
    by_object = {f.object: f for f in findings}
    assert by_object["HTTPRoute default/typo"].field == "spec.rules[0].backendRefs[0].port"
    assert by_object["HTTPRoute default/typo"].line == 9
    assert by_object["HTTPRoute default/orphan"].line == 28  # its parentRefs[0]
    assert by_object["TrafficPolicy default/lost"].field == "spec.targetRefs[0]"
    five_hundreds = [f for f in findings if "answers 500" in f.message]
    assert [(f.object, f.field, f.line) for f in five_hundreds] == [("HTTPRoute default/nobackend", "spec.rules[0]", 19)]

    lg.start()
    address = lg.address()
    assert lg.pod(address, host="good.example.com") == "echo"
    assert lg.pod(address, "/x", host="nb.example.com") == 500  # the rule check said answers 500
    kinds = {o["kind"] for o in report["objects"]}
    from_run = _run_findings(lg, kinds)
    from_check = {f if f.object in {p.object for p in from_run if p.file} and f.file in {p.file for p in from_run}
                  else Finding(None, None, f.object, f.field, f.message, f.severity)
                  for f in findings if "answers 500" not in f.message}
    manifest_findings = {f for f in from_run if f.file}
    assert manifest_findings <= from_check
    assert {f for f in from_check if f not in manifest_findings} == {f for f in from_run if not f.file}

    # translate: what the proxy holds, resource for resource.
    translated = _cli(lg, "translate", ".", "-o", "json")
    assert translated.returncode == 0, translated.stderr
    [gateway] = json.loads(translated.stdout)
    admin = lg.proxies()["default/gw"]["admin"]
    dump = lg.client.get(f"http://{admin}/config_dump", params={"include_eds": ""}).json()
    held = _dynamic(dump)
    assert all(held.values()), held  # listeners, routes, clusters and endpoints (echo's, and empty's: none)
    assert {k: sorted(v, key=_name) for k, v in held.items()} == {
        k: gateway.get(k, []) for k in held}


def _name(resource: dict[str, Any]) -> str:
    return str(resource.get("name") or resource.get("cluster_name"))


def _dynamic(dump: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The dynamic resources of a /config_dump, without their version_info and last_updated."""
    out: dict[str, list[dict[str, Any]]] = {"listeners": [], "route_configs": [], "clusters": [],
                                            "endpoint_configs": []}
    for config in dump["configs"]:
        out["listeners"] += [entry["active_state"]["listener"] for entry in config.get("dynamic_listeners", [])]
        out["route_configs"] += [entry["route_config"] for entry in config.get("dynamic_route_configs", [])]
        out["clusters"] += [entry["cluster"] for entry in config.get("dynamic_active_clusters", [])]
        out["endpoint_configs"] += [entry["endpoint_config"] for entry in config.get("dynamic_endpoint_configs", [])]
    return out
