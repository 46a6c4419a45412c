"""The file source behaves like an API server in front of the store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from lychgate.api.base import ObjectKey
from lychgate.api.gateway import HTTPRoute
from lychgate.sources.files import FileSource
from lychgate.store import Store

ROUTE = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, labels: {{team: {team}}}}}
spec:
  rules: [{{backendRefs: [{{name: {backend}, port: 80}}]}}]
"""


def _route(store: Store) -> HTTPRoute:
    route = store.get(HTTPRoute, "default", "r")
    assert route is not None
    return route


def test_generation_moves_with_spec_only(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(ROUTE.format(team="a", backend="one"))
    store = Store()
    source = FileSource(tmp_path, store)
    source.load_all()
    first = _route(store)
    assert first.generation == 1 and first.metadata.uid
    path.write_text(ROUTE.format(team="b", backend="one"))  # labels: no new generation
    source.reload(path)
    assert _route(store).generation == 1
    path.write_text(ROUTE.format(team="b", backend="two"))
    source.reload(path)
    assert _route(store).generation == 2
    assert _route(store).metadata.creation_timestamp == first.metadata.creation_timestamp


def test_rejected_edit_keeps_the_last_good_object(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(ROUTE.format(team="a", backend="one"))
    store = Store()
    source = FileSource(tmp_path, store)
    source.load_all()
    path.write_text(ROUTE.format(team="a", backend="one").replace("port: 80", "port: -1"))
    source.reload(path)
    assert _route(store).spec.rules[0].backend_refs[0].port == 80
    [problem] = source.all_problems()
    assert problem.file == "r.yaml" and problem.document == 1
    assert "spec.rules[0].backendRefs[0].port" in problem.message
    path.write_text("{not yaml: [")
    source.reload(path)
    assert _route(store) is not None and "cannot parse" in source.all_problems()[0].message
    path.unlink()
    source.reload(path)
    assert store.get(HTTPRoute, "default", "r") is None
    assert source.all_problems() == []


def test_the_same_object_in_two_files_is_reported(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(ROUTE.format(team="a", backend="one"))
    (tmp_path / "b.yaml").write_text(ROUTE.format(team="b", backend="two"))
    store = Store()
    source = FileSource(tmp_path, store)
    source.load_all()
    assert _route(store).spec.rules[0].backend_refs[0].name == "one"
    [problem] = source.all_problems()
    assert problem.file == "b.yaml" and "already defined in a.yaml" in problem.message


def test_unknown_kind_and_empty_documents(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("---\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    store = Store()
    source = FileSource(tmp_path, store)
    source.load_all()
    [problem] = source.all_problems()
    assert "unknown kind 'Widget'" in problem.message and problem.document == 2
    assert store.get_key(ObjectKey("Widget", "default", "w")) is None


def test_a_file_named_relative_or_absolute_is_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`lychgate run examples/quickstart` loads relative names; the watcher reports absolute ones."""
    (tmp_path / "site").mkdir()
    path = tmp_path / "site" / "r.yaml"
    path.write_text(ROUTE.format(team="a", backend="one"))
    monkeypatch.chdir(tmp_path)
    store = Store()
    source = FileSource(Path("site"), store)
    source.load_all()
    path.write_text(ROUTE.format(team="a", backend="two"))
    source.reload(path.absolute())
    assert _route(store).spec.rules[0].backend_refs[0].name == "two"
    source.reload(Path("site/r.yaml"))
    assert source.all_problems() == []


def test_a_rename_over_another_name_moves_the_objects(tmp_path: Path) -> None:
    """The watcher may report b.yaml renamed to a.yaml in one batch: a.yaml must not
    be refused because b.yaml (already gone) still owned the route."""
    (tmp_path / "b.yaml").write_text(ROUTE.format(team="a", backend="one"))
    store = Store()
    source = FileSource(tmp_path, store)
    source.load_all()

    before = _route(store).metadata.resource_version

    def moved() -> bool:  # a.yaml re-created the route (or, wrongly, b.yaml's deletion removed it)
        route = store.get(HTTPRoute, "default", "r")
        return route is None or route.metadata.resource_version != before

    async def rename_and_watch() -> None:
        stop = asyncio.Event()
        watcher = asyncio.create_task(source.watch(stop))
        await asyncio.sleep(0.1)  # the watcher subscribes in its first step
        (tmp_path / "b.yaml").rename(tmp_path / "a.yaml")
        for _ in range(200):  # a bound, not a timing: the batch lands in ~0.2 s
            if moved():
                break
            await asyncio.sleep(0.05)
        stop.set()
        await watcher

    asyncio.run(rename_and_watch())
    assert _route(store).spec.rules[0].backend_refs[0].name == "one"
    assert source.all_problems() == []


def test_a_yaml_null_is_an_absent_field() -> None:
    """`matches:` or `set:` with nothing under it, as hand-written manifests often have: the
    API server drops null fields of a CRD object, so lychgate reads them as absent (defaults)."""
    from lychgate.api.gateway import HTTPRoute
    from lychgate.api.policy import TrafficPolicy
    from lychgate.api.registry import parse

    route = parse(yaml.safe_load("""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: gw}]
  rules:
    - matches:
      filters:
      backendRefs: [{name: app, port: 80}]
"""))
    assert isinstance(route, HTTPRoute)
    assert route.spec.rules[0].matches == HTTPRoute.model_validate(
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "x"},
         "spec": {"rules": [{}]}}).spec.rules[0].matches  # the Gateway API default: PathPrefix /
    policy = parse(yaml.safe_load("""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: p}
spec:
  transformation:
    response:
      set:
      add: [{name: origin, value: svc2}]
"""))
    assert isinstance(policy, TrafficPolicy) and policy.spec.transformation is not None
    response = policy.spec.transformation.response
    assert response is not None and response.set == [] and response.add[0].name == "origin"


@pytest.mark.parametrize(("field", "spec"), [
    ("spec.backendTLS", "  backendTLS: {clientCertificateRef: {name: c}}\n  listeners: [{name: h, protocol: HTTP, port: 80}]\n"),
    ("spec.listeners[0].tls.frontendValidation",
     "  listeners:\n    - {name: s, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: c}], "
     "frontendValidation: {caCertificateRefs: [{name: ca, kind: ConfigMap, group: ''}]}}}\n"),
])
def test_older_experimental_fields_are_refused_by_name(field: str, spec: str) -> None:
    """Fields v1.6 moved (to spec.tls.backend and spec.tls.frontend) are not silently kept."""
    from lychgate.api.registry import ManifestError, parse

    doc = yaml.safe_load("apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw}\n"
                         "spec:\n  gatewayClassName: lychgate\n" + spec)
    with pytest.raises(ManifestError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse(doc)


def test_unquoted_dates_are_strings_as_kubectl_reads_them(tmp_path: Path) -> None:
    """Azure OpenAI's `apiVersion: 2024-10-21` written without quotes is the string it means."""
    (tmp_path / "b.yaml").write_text("""\
apiVersion: gateway.lychgate.dev/v1alpha1
kind: Backend
metadata: {name: azure, namespace: default}
spec:
  ai:
    llm:
      azureopenai:
        authToken: {kind: Inline, inline: k}
        endpoint: my.openai.azure.com
        deploymentName: gpt-4o-mini
        apiVersion: 2024-10-21
""")
    store = Store()
    source = FileSource(tmp_path, store)
    source.load_all()
    assert not source.problems
    backend = store.get_key(ObjectKey("Backend", "default", "azure"))
    assert backend is not None and backend.spec.ai.llm.config.api_version == "2024-10-21"  # type: ignore[attr-defined]


def test_problems_and_objects_have_their_yaml_lines(tmp_path: Path) -> None:
    """`lychgate get errors` and `lychgate check` point at the line: of the document, of each
    field the parser refused, of a List item, of a YAML syntax error."""
    (tmp_path / "a.yaml").write_text(
        "# routes\n---\n" + ROUTE.format(team="a", backend="one").lstrip()
        + "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: bad}\n"
        "spec:\n  rules:\n  - backendRefs:\n    - name: x\n      port: -1\n")
    (tmp_path / "list.yaml").write_text(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: s1}\n"
        "- apiVersion: v1\n  kind: Service\n  metadata: {name: s2}\n")
    (tmp_path / "broken.yaml").write_text("a: 1\nb: [2\nc: 3\n")
    source = FileSource(tmp_path, Store())
    source.load_all()
    by_file = {p.file: p for p in source.all_problems()}
    bad = by_file["a.yaml"]
    assert (bad.line, bad.object) == (9, "HTTPRoute default/bad")
    assert bad.fields == (("spec.rules[0].backendRefs[0].port", "Input should be greater than or equal to 1", 16),)
    assert str(bad).startswith("a.yaml:9: HTTPRoute default/bad: spec.rules[0].backendRefs[0].port")
    assert by_file["broken.yaml"].line is not None and by_file["broken.yaml"].line >= 2
    assert source.locate(ObjectKey("HTTPRoute", "default", "r")) == ("a.yaml", 3)
    assert source.locate(ObjectKey("HTTPRoute", "default", "r"), ("spec", "rules", 0)) == ("a.yaml", 7)
    assert source.locate(ObjectKey("Service", "default", "s2")) == ("list.yaml", 7)


def test_an_object_moved_to_another_file_leaves_its_first_file_and_has_one_key(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(ROUTE.format(team="a", backend="one"))
    store = Store()
    source = FileSource(tmp_path, store)
    source.load_all()
    second.write_text(ROUTE.format(team="a", backend="two"))
    source.reload(second)  # a copy in another file is refused while the first holds it
    assert _route(store).spec.rules[0].backend_refs[0].name == "one"
    assert "already defined in a.yaml" in source.all_problems()[0].message
    first.unlink()
    source.reload(first)
    assert store.get(HTTPRoute, "default", "r") is None and not source.origins
    source.reload(second)
    assert _route(store).spec.rules[0].backend_refs[0].name == "two"
    [(key, origin)] = source.origins.items()
    assert origin == (str(second), 1, None)
    # One key tuple for the object: the store's indexes and the source's share it.
    assert next(iter(store._by_kind["HTTPRoute"])) is key
    assert next(iter(store._by_namespace[("HTTPRoute", "default")])) is key


def test_objects_created_in_the_same_second_hold_one_timestamp(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(ROUTE.format(team="a", backend="one").replace("name: r", f"name: {name}"))
    store = Store()
    FileSource(tmp_path, store).load_all()
    a, b = (store.get(HTTPRoute, "default", n) for n in ("a", "b"))
    assert a is not None and b is not None
    stamps = a.metadata.creation_timestamp, b.metadata.creation_timestamp
    assert stamps[0] != stamps[1] or stamps[0] is stamps[1]
