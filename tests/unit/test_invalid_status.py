"""Local mode: a manifest lychgate refuses gets a status that says why (status/invalid.py),
shown by `lychgate get` as in Kubernetes, through the same store and control-plane pass.

A real ControlPlane over the file source, with a deployer that starts no proxy; `lychgate get`
is the CLI's own rendering of the admin API's answers.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml
from aiohttp.test_utils import make_mocked_request

from lychgate import cli_get
from lychgate.api.base import ObjectKey
from lychgate.controlplane import ControlPlane, builtin_class
from lychgate.objects_api import routes
from lychgate.settings import Settings
from lychgate.sources.files import FileSource
from lychgate.status.invalid import invalid_status
from lychgate.store import Refusal
from tests.no_proxies import NoProxies

GATEWAY_API = Path(__file__).resolve().parents[3] / "shared" / "gateway-api" / "config" / "crd" / "standard"

BASE = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: lychgate
  listeners: [{name: http, protocol: HTTP, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{matches: [{path: {type: PathPrefix, value: /}}]}]
"""


def policy(body_format: str) -> str:
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: answer, namespace: default}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: route}}]
  directResponse: {{status: 200, bodyFormat: {body_format}}}
"""


# A route whose port the model refuses (no CRD in local mode to refuse it first), never valid.
BAD_ROUTE = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: broken, namespace: default}
spec:
  parentRefs: [{name: gw, sectionName: http}, {name: elsewhere}]
  rules: [{backendRefs: [{name: echo, port: 70000}]}]
"""


class Lychgate:
    """The control plane of `lychgate run` over a directory, and `lychgate get` against it."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path / "manifests"
        self.dir.mkdir()
        self.cp = ControlPlane(Settings(state_dir=tmp_path / "state"), NoProxies())  # type: ignore[arg-type]
        self.cp.store.upsert(builtin_class())
        self.source = FileSource(self.dir, self.cp.store)
        self.handlers = {r.path: r.handler for r in routes(  # type: ignore[attr-defined]
            self.cp, problems=lambda: [p.__dict__ for p in self.source.all_problems()], proxies=lambda: [])}

    async def write(self, name: str, text: str) -> None:
        """Edit a file as the watcher would see it, and wait for the pass the edit asks for."""
        path = self.dir / name
        path.write_text(text)
        self.source.reload(path)
        await asyncio.wait_for(self.cp.store.wait_for_change(), 1)  # the loop would wake: no edit is lost
        await self.cp.sync_once()

    def status(self, kind: str, name: str) -> dict[str, Any]:
        return self.cp.status.get(ObjectKey(kind, "default", name)) or {}

    async def get(self, capsys: pytest.CaptureFixture[str], kind: str, name: str) -> dict[str, Any]:
        """`lychgate get KIND NAME -o yaml` (the admin API is asked first: the CLI's fetch is not async)."""
        answers = {}
        kind_entry = cli_get.resolve(kind)
        assert kind_entry is not None
        for path, query in (("/api/v1/problems", {}), ("/api/v1/objects", {"kind": kind_entry.kind, "namespace": "default",
                                                                             "name": name})):
            request = make_mocked_request("GET", path + "?" + "&".join(f"{k}={v}" for k, v in query.items()))
            answers[path] = json.loads((await self.handlers[path](request)).text)
        capsys.readouterr()
        cli_get.show(lambda path, **_: answers[path], kind, name, "default", False, "yaml")
        shown: dict[str, Any] = yaml.safe_load(capsys.readouterr().out)
        return shown

    async def table(self, capsys: pytest.CaptureFixture[str], kind: str) -> dict[str, dict[str, str]]:
        """`lychgate get KIND`: each row by name, as {header: cell}."""
        entry = cli_get.resolve(kind)
        assert entry is not None
        answers = {}
        for path, query in (("/api/v1/problems", ""), ("/api/v1/proxies", ""),
                            ("/api/v1/objects", f"?kind={entry.kind}&namespace=default")):
            answers[path] = json.loads((await self.handlers[path](make_mocked_request("GET", path + query))).text)
        capsys.readouterr()
        cli_get.show(lambda path, **_: answers[path], kind, None, "default", False, None)
        header, *lines = capsys.readouterr().out.splitlines()
        starts = [m.start() for m in re.finditer(r"\S+", header)]  # cells start under their header
        heads = header.split()
        cells = [{h: line[a:b].strip() for h, a, b in zip(heads, starts, [*starts[1:], None], strict=True)}
                 for line in lines]
        return {row["NAME"]: row for row in cells}


def accepted(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Accepted")


async def test_local_mode_shows_why_a_manifest_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lg = Lychgate(tmp_path)
    await lg.write("base.yaml", BASE)
    await lg.write("policy.yaml", policy("{text: first answer}"))
    assert accepted(lg.status("TrafficPolicy", "answer"))["status"] == "True"

    await lg.write("policy.yaml", policy("{text: second, json: {code: '%RESPONSE_CODE%'}}"))
    refused = accepted(lg.status("TrafficPolicy", "answer"))
    assert (refused["status"], refused["reason"], refused["observedGeneration"]) == ("False", "Invalid", 2)
    assert "spec.directResponse.bodyFormat: Value error, exactly one of json, text must be set" in refused["message"]
    assert refused["message"].endswith("the last valid version (generation 1) stays in use")
    shown = await lg.get(capsys, "trafficpolicy", "answer")
    assert shown["metadata"]["generation"] == 1  # the version in use...
    assert accepted(shown["status"]) == refused  # ...and why the newer one is not
    assert shown["spec"]["directResponse"]["bodyFormat"] == {"text": "first answer"}

    # A route never valid: nothing of it runs; it is shown all the same, with a parents entry
    # for the Gateway of lychgate's it names (Gateway API's reason), none for the one that is not.
    await lg.write("broken.yaml", BAD_ROUTE)
    shown = await lg.get(capsys, "httproute", "broken")
    (parent,) = shown["status"]["parents"]
    assert parent["parentRef"] == {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw",
                                   "namespace": "default", "sectionName": "http"}
    (cond,) = parent["conditions"]
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == ("False", "UnsupportedValue", 1)
    assert "spec.rules[0].backendRefs[0].port" in cond["message"]
    assert cond["message"].endswith("no version of it is in use until it is fixed")
    if GATEWAY_API.is_dir():
        crd = yaml.safe_load((GATEWAY_API / "gateway.networking.k8s.io_httproutes.yaml").read_text())
        version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
        schema = version["schema"]["openAPIV3Schema"]["properties"]["status"]
        assert [e.message for e in jsonschema.Draft4Validator(schema).iter_errors(shown["status"])] == []

    # Fixed, both: translation's status again, at the generation that now runs.
    await lg.write("policy.yaml", policy("{text: third answer}"))
    fixed = accepted(lg.status("TrafficPolicy", "answer"))
    assert (fixed["status"], fixed["observedGeneration"]) == ("True", 2)
    await lg.write("broken.yaml", BAD_ROUTE.replace("70000", "8080"))
    parent = next(p for p in lg.status("HTTPRoute", "broken")["parents"] if p["parentRef"]["name"] == "gw")
    assert {c["type"]: c["status"] for c in parent["conditions"]}["Accepted"] == "True"
    # Removing a file that only held a refused object clears its status too.
    await lg.write("gone.yaml", policy("{}").replace("name: answer", "name: gone"))
    assert accepted(lg.status("TrafficPolicy", "gone"))["status"] == "False"
    (lg.dir / "gone.yaml").unlink()
    lg.source.reload(lg.dir / "gone.yaml")
    await lg.cp.sync_once()
    assert lg.status("TrafficPolicy", "gone") == {}


def test_a_gateway_of_someone_else_gets_no_status_of_ours() -> None:
    """Without a status to lay it over, lychgate writes only to what it can tell is its own."""
    refusal = Refusal("Gateway default/x: spec.listeners: bad", (("spec.listeners", "bad"),), 3,
                      {"spec": {"gatewayClassName": "theirs"}})
    computed = {ObjectKey("GatewayClass", "", "lychgate"): {"conditions": []}}
    assert invalid_status(ObjectKey("Gateway", "default", "x"), refusal, None, None, computed) is None
    ours = Refusal(refusal.message, refusal.fields, 3, {"spec": {"gatewayClassName": "lychgate"}})
    status = invalid_status(ObjectKey("Gateway", "default", "x"), ours, None, None, computed)
    assert status is not None
    assert [(c["type"], c["status"], c["reason"], c["observedGeneration"]) for c in status["conditions"]] == [
        ("Accepted", "False", "Invalid", 3), ("Programmed", "False", "Invalid", 3)]


GATEWAY_8081 = BASE.split("---")[0].replace("port: 8080", "port: 8081").replace("name: gw,", "name: other,")
SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: default}
spec: {ports: [{port: 8080}]}
"""


async def test_the_table_shows_a_refused_object_is_not_accepted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`lychgate get` without -o: a refused object reads False where the table says whether
    an object is accepted, at a glance, although its last valid version still runs."""
    lg = Lychgate(tmp_path)
    await lg.write("base.yaml", BASE)
    await lg.write("other.yaml", GATEWAY_8081)
    await lg.write("svc.yaml", SERVICE)
    await lg.write("svc2.yaml", SERVICE.replace("name: echo", "name: fine"))
    rows = await lg.table(capsys, "gateways")
    programmed = rows["gw"]["PROGRAMMED"]  # Pending here: no proxy runs
    assert rows["gw"]["ACCEPTED"] == "True"
    assert "ACCEPTED" not in (await lg.table(capsys, "services"))["echo"]  # as kubectl shows them

    # A Gateway's newest manifest refused: its last valid version runs (PROGRAMMED as it was),
    # and the table says it is not accepted; the other Gateway is unaffected.
    await lg.write("base.yaml", BASE.replace("port: 8080", "port: 70000"))
    rows = await lg.table(capsys, "gateways")
    assert (rows["gw"]["ACCEPTED"], rows["gw"]["PROGRAMMED"]) == ("False (Invalid)", programmed)
    assert rows["other"]["ACCEPTED"] == "True"
    # A kind lychgate writes no status to: the table gains an ACCEPTED column while one is refused.
    await lg.write("svc.yaml", SERVICE.replace("8080", "70000"))
    rows = await lg.table(capsys, "services")
    assert (rows["echo"]["PORTS"], rows["echo"]["ACCEPTED"]) == ("8080/TCP", "False (Invalid)")
    assert rows["fine"]["ACCEPTED"] == "True"
    # One of lychgate's kinds never valid: shown as written, not accepted.
    await lg.write("dr.yaml", """
apiVersion: gateway.lychgate.dev/v1alpha1
kind: DirectResponse
metadata: {name: teapot, namespace: default}
spec: {status: 99}
""")
    assert (await lg.table(capsys, "directresponses"))["teapot"]["ACCEPTED"] == "False (Invalid)"
    # A route whose every parent is foreign: its status has no entry of lychgate's to say it.
    await lg.write("foreign.yaml", BAD_ROUTE.replace("{name: gw, sectionName: http}, ", ""))
    rows = await lg.table(capsys, "httproutes")
    assert rows["broken"]["PARENTS"] == "False (Invalid)"
    assert rows["route"]["PARENTS"] == "gw=True"

    # Fixed: the table is translation's again.
    await lg.write("base.yaml", BASE)
    await lg.write("svc.yaml", SERVICE)
    assert (await lg.table(capsys, "gateways"))["gw"]["ACCEPTED"] == "True"
    assert "ACCEPTED" not in (await lg.table(capsys, "services"))["echo"]
