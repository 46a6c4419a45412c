"""`lychgate convert`: kgateway manifests become lychgate manifests that lychgate loads,
with only the renamed values changed and what does not carry over said on stderr."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lychgate.api.gateway import GatewayClass
from lychgate.api.lychgate import GatewayParameters
from lychgate.cli import app
from lychgate.sources.files import FileSource
from lychgate.store import Store

POLICY = """\
# Rate limits for the shop (kept: comments, order, quoting, indentation)
apiVersion: gateway.kgateway.dev/v1alpha1
kind: TrafficPolicy
metadata:
  name: shop    # the shop's policy
  namespace: default
  annotations:
    kgateway.dev/inherited-policy-priority: DeepMergePreferChild
spec:
    targetRefs:
      - group: gateway.networking.k8s.io
        kind: HTTPRoute
        name: shop
    extAuth:
      extensionRef: {name: auth}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:
  - filters:
    - type: ExtensionRef
      extensionRef: {group: "gateway.kgateway.dev", kind: DirectResponse, name: teapot}
"""

CLASS = """\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: kgateway
spec:
  controllerName: kgateway.dev/kgateway
  parametersRef:
    group: gateway.kgateway.dev
    kind: GatewayParameters
    name: kgateway
    namespace: default
---
apiVersion: gateway.kgateway.dev/v1alpha1
kind: GatewayParameters
metadata:
  name: kgateway
  namespace: default
spec:
  kube: {}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: kgateway
  listeners: [{name: http, protocol: HTTP, port: 8080}]
"""

OTHERS = """\
apiVersion: gateway.kgateway.dev/v1alpha1
kind: DirectResponse
metadata: {name: teapot, namespace: default}
spec: {status: 418}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: backend, namespace: default}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny, namespace: default}
---
apiVersion: gateway.kgateway.dev/v1alpha1
kind: AgentgatewayPolicy
metadata: {name: agw, namespace: default}
"""


def _tree(root: Path) -> Path:
    (root / "in" / "nested").mkdir(parents=True)
    (root / "in" / "policy.yaml").write_text(POLICY)
    (root / "in" / "nested" / "class.yml").write_text(CLASS)
    (root / "in" / "nested" / "others.yaml").write_text(OTHERS)
    (root / "in" / "README.md").write_text("not a manifest")
    return root / "in"


def test_a_file_keeps_everything_but_the_renamed_values() -> None:
    result = CliRunner().invoke(app, ["convert", "-"], input=POLICY)
    assert result.exit_code == 0, result.output
    expected = (POLICY.replace("gateway.kgateway.dev/v1alpha1", "gateway.lychgate.dev/v1alpha1")
                .replace('group: "gateway.kgateway.dev"', 'group: "gateway.lychgate.dev"'))
    assert result.stdout == expected
    assert ("-: TrafficPolicy default/shop: metadata.annotations[kgateway.dev/inherited-policy-priority]: "
            "a kgateway setting lychgate does not read") in result.stderr


def test_a_directory_is_mirrored_and_lychgate_loads_it(tmp_path: Path) -> None:
    source = _tree(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["convert", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "nested/class.yml", "nested/others.yaml", "policy.yaml"]
    converted = (out / "nested" / "class.yml").read_text()
    assert "kgateway" not in converted
    assert "controllerName: gateway.lychgate.dev/lychgate" in converted
    assert converted.count("name: lychgate") == 3 and "gatewayClassName: lychgate" in converted
    # Every notice names the file, the object and why; foreign kinds pass through unchanged.
    stderr = result.stderr
    assert "Deployment default/backend: lychgate does not read Deployment" in stderr
    assert "AuthorizationPolicy default/deny: Istio's kind" in stderr
    assert "AgentgatewayPolicy default/agw: lychgate does not read AgentgatewayPolicy" in stderr
    assert "kind: AgentgatewayPolicy" in (out / "nested" / "others.yaml").read_text()

    store = Store()
    loaded = FileSource(out, store)
    loaded.load_all()
    problems = [str(p) for p in loaded.all_problems()]
    assert problems == [f"nested/others.yaml:{problems[0].split(':')[1]}: AgentgatewayPolicy default/agw: {problems[0].split(': ', 2)[2]}"]
    assert "unknown kind 'AgentgatewayPolicy'" in problems[0]
    assert [c.name for c in store.list(GatewayClass)] == ["lychgate"]
    assert store.get(GatewayParameters, "default", "lychgate") is not None


def test_stdout_joins_every_input(tmp_path: Path) -> None:
    source = _tree(tmp_path)
    result = CliRunner().invoke(app, ["convert", str(source / "policy.yaml"), str(source / "nested")])
    assert result.exit_code == 0
    assert result.stdout.count("\n---\n") == (1 + 2 + 3) + 2  # within each file, and between the three files
    assert "gateway.kgateway.dev" not in result.stdout


def test_refused_objects_are_named_with_the_field(tmp_path: Path) -> None:
    manifest = "apiVersion: gateway.kgateway.dev/v1alpha1\nkind: DirectResponse\nmetadata: {name: d}\nspec: {statuss: 1}\n"
    result = CliRunner().invoke(app, ["convert", "-"], input=manifest)
    assert result.exit_code == 0
    assert "-: DirectResponse default/d: lychgate would refuse it: spec.status: Field required; spec.statuss: Extra inputs" in result.stderr


@pytest.mark.parametrize(("args", "stdin", "message"), [
    (["missing.yaml"], None, "missing.yaml does not exist"),
    (["-"], "a: [unclosed", "-: cannot convert it"),
])
def test_unreadable_inputs_exit_1_and_the_others_are_still_converted(
    tmp_path: Path, args: list[str], stdin: str | None, message: str
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("apiVersion: gateway.kgateway.dev/v1alpha1\nkind: DirectResponse\n"
                    "metadata: {name: d, namespace: default}\nspec: {status: 200}\n")
    result = CliRunner().invoke(app, ["convert", *[str(tmp_path / a) if a != "-" else a for a in args], str(good)],
                                input=stdin)
    assert result.exit_code == 1
    assert message in result.stderr
    assert "apiVersion: gateway.lychgate.dev/v1alpha1" in result.stdout


def test_no_path_is_a_usage_error() -> None:
    assert CliRunner().invoke(app, ["convert"]).exit_code == 2
