"""Bad input everywhere (issue 8): random and mutated manifests never break the pipeline.

Manifests come from the golden inputs (real Gateway API and lychgate objects),
mutated by hypothesis: fields deleted, replaced by values of the wrong type,
huge strings, unicode, deep nesting, duplicated names. Every document must
either parse or be refused with a ManifestError naming it; translation and the
xDS build must never raise; and a known good Gateway and route keep being
served beside the garbage.

CI runs a bounded number of examples; `LYCHGATE_FUZZ_EXAMPLES=5000 pytest
tests/unit/test_fuzz.py` runs a long campaign.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lychgate.api.registry import ManifestError, parse
from lychgate.controlplane import builtin_class
from lychgate.store import Store
from lychgate.translate.gateway import translate
from lychgate.xds.translator import build

EXAMPLES = int(os.environ.get("LYCHGATE_FUZZ_EXAMPLES", "150"))
GOLDEN = Path(__file__).parents[1] / "golden" / "in"
SEEDS: list[dict[str, Any]] = [
    d for p in sorted(GOLDEN.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if isinstance(d, dict)
]
GOOD = [
    {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
     "metadata": {"name": "fuzz-good", "namespace": "fuzz"},
     "spec": {"gatewayClassName": "lychgate", "listeners": [{"name": "http", "protocol": "HTTP", "port": 7070}]}},
    {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
     "metadata": {"name": "fuzz-good", "namespace": "fuzz"},
     "spec": {"parentRefs": [{"name": "fuzz-good"}], "rules": [{"backendRefs": [{"name": "s", "port": 80}]}]}},
]

weird = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True),
    st.text(max_size=50), st.text(alphabet="*./:[](){}?^$\\|+ \u00e9\u2603\U0001f600", max_size=30),
    st.just("x" * 100_000), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "nest", "duplicate"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "nest":
            deep: Any = draw(weird)
            for _ in range(draw(st.integers(1, 200))):
                deep = {"x": deep}
            parent[path[-1]] = deep
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
        else:
            parent[path[-1]] = draw(weird)
    return doc


documents = st.lists(st.one_of(mutated(), weird, st.dictionaries(st.text(max_size=8), weird, max_size=4)),
                     min_size=1, max_size=6)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_garbage_never_breaks_the_pipeline(docs: list[Any]) -> None:
    store = Store()
    store.upsert(builtin_class())
    for good in GOOD:
        store.upsert(parse(good))
    for doc in docs:
        try:
            obj = parse(doc)
        except ManifestError as err:
            assert str(err)  # refused with a message
            continue
        if obj.key.namespace == "fuzz" and obj.name == "fuzz-good":
            continue  # keep the control objects intact
        store.upsert(obj)
    result = translate(store, lambda _gw: "127.0.1.1")
    for gw in result.gateways.values():
        build(gw)
    assert "fuzz/fuzz-good" in result.gateways  # valid objects keep serving
    parents = result.status[parse(GOOD[1]).key]["parents"]
    assert parents[0]["conditions"][0]["status"] == "True"
