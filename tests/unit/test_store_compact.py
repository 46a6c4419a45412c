"""The store holds what objects repeat once (store/compact.py), and no object sees another change;
its change log holds what its reader has not seen, no more."""

from __future__ import annotations

import pytest
import yaml

from lychgate.api.gateway import HTTPRoute
from lychgate.api.registry import parse
from lychgate.store import Store


def _route(name: str, backend: str) -> HTTPRoute:
    obj = parse(yaml.safe_load(f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: team-a, labels: {{app: shop}}}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [{name}.example.com]
  rules:
    - matches: [{{path: {{type: PathPrefix, value: /api}}}}]
      backendRefs: [{{name: {backend}, port: 80}}]
"""))
    assert isinstance(obj, HTTPRoute)
    return obj


def test_stored_objects_share_fields_sets_and_strings() -> None:
    store = Store()
    a, b = _route("a", "svc"), _route("b", "svc")
    store.upsert(a)
    store.upsert(b)
    ref_a, ref_b = a.spec.parent_refs[0], b.spec.parent_refs[0]
    assert ref_a.__pydantic_fields_set__ is ref_b.__pydantic_fields_set__
    assert ref_a.model_fields_set == {"name"}
    assert ref_a.name is ref_b.name
    assert a.spec.rules[0].backend_refs[0].name is b.spec.rules[0].backend_refs[0].name
    assert a.metadata.namespace is b.metadata.namespace
    assert a.metadata.labels["app"] is b.metadata.labels["app"]
    # Equal to a fresh parse: nothing but where the parts live changed.
    assert store.get_key(a.key) == _route("a", "svc")


def test_a_copy_with_changes_leaves_the_shared_set_alone() -> None:
    store = Store()
    a, b = _route("a", "svc"), _route("b", "svc")
    store.upsert(a)
    store.upsert(b)
    changed = a.spec.parent_refs[0].model_copy(update={"section_name": "http"})
    assert changed.model_fields_set == {"name", "section_name"}
    assert b.spec.parent_refs[0].model_fields_set == {"name"}
    assert a.spec.parent_refs[0].model_dump(exclude_unset=True) == {"name": "edge"}


def test_the_change_log_keeps_only_what_came_after_the_reader() -> None:
    store = Store()
    store.upsert(_route("a", "svc"))
    store.upsert(_route("b", "svc"))
    seen = store.revision
    store.forget_changes_until(seen)
    assert store.changes_since(seen) == set()
    store.upsert(_route("c", "svc"))
    changes = store.changes_since(seen)
    assert changes is not None and ("key", _route("c", "svc").key) in changes
    assert ("key", _route("a", "svc").key) not in changes
    assert store.changes_since(seen - 1) is None  # forgotten: "unknown", and the reader starts over
    assert len(store._log) <= 3


def test_stored_empty_lists_and_dicts_are_shared_and_refuse_changes() -> None:
    store = Store()
    a, b = _route("a", "svc"), _route("b", "svc")
    store.upsert(a)
    store.upsert(b)
    assert a.spec.rules[0].filters is b.spec.rules[0].filters
    assert a.metadata.annotations is b.metadata.annotations
    # Code changing a stored object in place would change every object: it fails instead.
    with pytest.raises(TypeError, match="immutable"):
        a.spec.rules[0].filters.append(b.spec.rules[0])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="immutable"):
        a.metadata.annotations["note"] = "x"
    assert b.spec.rules[0].filters == [] and b.metadata.annotations == {}
    assert store.get_key(a.key) == _route("a", "svc")
    assert a.model_dump(exclude_unset=True) == _route("a", "svc").model_dump(exclude_unset=True)
