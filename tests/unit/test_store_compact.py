"""The store holds what objects repeat once (store/compact.py), and no object sees another change;
its change log holds what its reader has not seen, no more."""

from __future__ import annotations

import copy
import gc
import weakref

import pytest
import yaml

from lychgate.api.gateway import HTTPRoute
from lychgate.api.registry import parse
from lychgate.store import Store, compact


def _route(name: str, backend: str, backend_ref: str = "") -> HTTPRoute:
    backend_ref = backend_ref or f"{{name: {backend}, port: 80}}"
    obj = parse(yaml.safe_load(f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: team-a, labels: {{app: shop}}}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [{name}.example.com]
  rules:
    - matches: [{{path: {{type: PathPrefix, value: /api}}}}]
      backendRefs: [{backend_ref}]
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


def test_stored_objects_share_the_parts_they_repeat() -> None:
    store = Store()
    routes = [_route(name, "svc") for name in ("a", "b", "c")]
    for route in routes:
        store.upsert(route)
    a, b, c = routes
    # Held once from the second sighting on: a's parts are b's, and c's lists are b's.
    assert a.spec.parent_refs[0] is b.spec.parent_refs[0] is c.spec.parent_refs[0]
    assert b.spec.parent_refs is c.spec.parent_refs
    assert b.spec.rules[0].backend_refs is c.spec.rules[0].backend_refs
    assert b.spec.rules[0].matches is c.spec.rules[0].matches
    assert b.metadata.labels is c.metadata.labels
    # What is each object's own stays so: its metadata, its spec, its hostnames.
    assert b.metadata is not c.metadata and b.spec is not c.spec
    assert b.spec.hostnames == ["b.example.com"] and c.spec.hostnames == ["c.example.com"]
    for route in routes:
        fresh = _route(route.name, "svc")
        assert store.get_key(route.key) == fresh
        assert route.model_dump(exclude_unset=True) == fresh.model_dump(exclude_unset=True)


def test_equal_parts_that_set_different_fields_are_not_shared() -> None:
    store = Store()
    plain = [_route(f"p{i}", "svc") for i in range(3)]
    weighted = [_route(f"w{i}", "svc", "{name: svc, port: 80, weight: 1}") for i in range(3)]
    for route in plain + weighted:
        store.upsert(route)
    ref, explicit = plain[2].spec.rules[0].backend_refs[0], weighted[2].spec.rules[0].backend_refs[0]
    assert ref == explicit and ref is not explicit
    assert ref.model_dump(exclude_unset=True) == {"name": "svc", "port": 80}
    assert explicit.model_dump(exclude_unset=True) == {"name": "svc", "port": 80, "weight": 1}


def test_shared_lists_and_dicts_refuse_changes_and_copy_as_plain_ones() -> None:
    store = Store()
    routes = [_route(name, "svc") for name in ("a", "b", "c")]
    for route in routes:
        store.upsert(route)
    refs, labels = routes[2].spec.parent_refs, routes[2].metadata.labels
    with pytest.raises(TypeError, match="immutable"):
        refs.append(refs[0])
    with pytest.raises(TypeError, match="immutable"):
        labels["app"] = "other"
    for copied in (copy.copy(refs), copy.deepcopy(refs), copy.deepcopy(routes[2]).spec.parent_refs):
        copied.append(copied[0])  # the copy is the caller's to change
        assert len(copied) == 2 and len(refs) == 1
    mine = copy.deepcopy(labels)
    mine["app"] = "other"
    assert labels == {"app": "shop"}
    assert routes[2].model_copy(deep=True) == routes[2]


def test_a_part_no_stored_object_holds_is_let_go() -> None:
    store = Store()
    routes = [_route(name, "gone-svc") for name in ("a", "b", "c")]
    for route in routes:
        store.upsert(route)
    part = weakref.ref(routes[2].spec.rules[0].backend_refs[0])
    for route in routes:
        store.delete(route.key)
    del routes, route
    gc.collect()
    compact._prune()
    assert part() is None
