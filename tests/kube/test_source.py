"""The Kubernetes source: list + watch into the store, through expiry, drops and selectors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from lychgate.api.base import ObjectKey
from lychgate.api.core import Secret, Service
from lychgate.api.gateway import Gateway, GatewayClass, HTTPRoute
from lychgate.api.lychgate import GatewayParameters
from lychgate.sources.kube import KubeSource, SelectorError
from lychgate.store import Store
from tests.kube.helpers import (
    eventually,
    gateway,
    gateway_class,
    gateway_parameters,
    route,
    service,
)
from tests.kubefake import KubeFake
from tests.kubefake.resources import crd_object, custom_types


@asynccontextmanager
async def running(kube: KubeFake, **kw: Any) -> AsyncIterator[tuple[KubeSource, Store]]:
    client = kube.client()
    store = Store()
    source = KubeSource(client, store, **kw)
    stop = asyncio.Event()
    task = asyncio.create_task(source.run(stop))
    try:
        await asyncio.wait_for(source.synced.wait(), 5)
        yield source, store
    finally:
        stop.set()
        await task
        await client.close()


def names(store: Store, cls: Any) -> list[str]:
    return sorted(o.key.ref for o in store.list(cls))


async def test_objects_flow_into_the_store_and_follow_changes(kube: KubeFake) -> None:
    """Everything local mode reads arrives typed, then follows creates, edits and deletes."""
    kube.create(gateway_class())
    kube.create(gateway())
    kube.create(service())
    async with running(kube) as (source, store):
        assert store.synced and source.synced.is_set()
        assert names(store, Gateway) == ["default/gw"] and names(store, Service) == ["default/echo"]
        gw = store.get(Gateway, "default", "gw")
        assert gw is not None and gw.generation == 1 and gw.metadata.uid

        kube.create(route())
        await eventually(lambda: store.get(HTTPRoute, "default", "route"), what="the new route")
        kube.apply(gateway(port=9090))
        await eventually(lambda: store.get(Gateway, "default", "gw").spec.listeners[0].port == 9090,  # type: ignore[union-attr]
                         what="the edited listener port")
        assert store.get(Gateway, "default", "gw").generation == 2  # type: ignore[union-attr]
        kube.delete("httproutes", "route")
        await eventually(lambda: store.get(HTTPRoute, "default", "route") is None, what="the deleted route")


async def test_status_writes_do_not_wake_translation_but_are_kept_raw(kube: KubeFake) -> None:
    """A status-only change (what the controller itself writes) leaves the store
    untouched, so it causes no translation pass; the raw object has it for the writer."""
    kube.create(gateway())
    async with running(kube) as (source, store):
        before = store.revision
        kube.update_status("gateways", "gw", {"conditions": [{"type": "Accepted", "status": "True"}]})
        key = ObjectKey("Gateway", "default", "gw")
        await eventually(lambda: (source.raw(key) or {}).get("status"), what="raw status")
        assert store.revision == before
        assert store.get(Gateway, "default", "gw").status is None  # type: ignore[union-attr]


async def test_relists_after_410_gone_and_forgets_objects_deleted_meanwhile(kube: KubeFake) -> None:
    """The watch history is compacted while the stream is down: the resume gets 410,
    the informer relists, and objects deleted during the gap leave the store."""
    kube.create(gateway("a"))
    kube.create(gateway("b"))
    async with running(kube) as (source, store):
        await kube.wait_for_watches("gateways")
        lists = source.informers["Gateway"].lists
        kube.drop_watches()  # the stream ends; lightkube resumes from its last resourceVersion ...
        kube.delete("gateways", "a")
        kube.create(gateway("c"))
        kube.compact()  # ... which is no longer in the history: 410 Expired
        await eventually(lambda: names(store, Gateway) == ["default/b", "default/c"], what="relisted gateways")
        assert source.informers["Gateway"].lists == lists + 1
        kube.create(gateway("d"))  # and it watches again after the relist
        await eventually(lambda: "default/d" in names(store, Gateway), what="a gateway created after the relist")


async def test_reconnects_after_the_connection_is_cut(kube: KubeFake) -> None:
    kube.create(gateway("a"))
    async with running(kube) as (_source, store):
        await kube.wait_for_watches("gateways")
        kube.drop_watches(abrupt=True)
        kube.create(gateway("b"))
        await eventually(lambda: names(store, Gateway) == ["default/a", "default/b"], timeout=10,
                         what="the gateway created while reconnecting")


async def test_discovery_namespace_selectors(kube: KubeFake) -> None:
    """Entries are OR-ed; within one, matchLabels and matchExpressions are AND-ed; a
    namespace whose labels start or stop matching brings its objects in or takes them out."""
    kube.namespace("edge", {"team": "edge", "env": "prod"})
    kube.namespace("edge-dev", {"team": "edge", "env": "dev"})
    kube.namespace("billing", {"team": "billing"})
    kube.namespace("other", {"team": "other"})
    for ns in ("edge", "edge-dev", "billing", "other", "default"):
        kube.create(gateway(ns=ns))
    kube.create(gateway_class())  # cluster-scoped kinds are not filtered
    selectors = [
        {"matchLabels": {"team": "edge"},
         "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]},
        {"matchExpressions": [{"key": "team", "operator": "In", "values": ["billing"]}]},
    ]
    async with running(kube, namespace_selectors=selectors) as (source, store):
        assert names(store, Gateway) == ["billing/gw", "edge/gw"]
        assert source.selected("edge") and not source.selected("edge-dev")
        assert [gc.name for gc in store.list(GatewayClass)] == ["lychgate"]

        kube.apply({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "edge-dev", "labels": {"team": "edge", "env": "staging"}}})
        await eventually(lambda: "edge-dev/gw" in names(store, Gateway), what="edge-dev selected")
        kube.apply({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "billing", "labels": {"team": "finance"}}})
        await eventually(lambda: "billing/gw" not in names(store, Gateway), what="billing no longer selected")
        kube.create(gateway("late", ns="other"))  # unselected: never enters
        kube.create(gateway("late", ns="edge"))
        await eventually(lambda: "edge/late" in names(store, Gateway), what="a new gateway in edge")
        assert names(store, Gateway) == ["edge-dev/gw", "edge/gw", "edge/late"]


@pytest.mark.parametrize("selectors, message", [
    ([{"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]}], "operator must be In"),
    ([{"matchExpressions": [{"key": "a", "operator": "In"}]}], "needs at least one value"),
    ([{"matchLabel": {"a": "b"}}], "unknown field(s) matchLabel"),
])
def test_invalid_selectors_are_refused_with_the_field(selectors: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(SelectorError) as err:
        KubeSource(None, Store(), namespace_selectors=selectors)
    assert message in str(err.value) and "discoveryNamespaceSelectors[0]" in str(err.value)


async def test_a_kind_without_its_crd_does_not_hold_up_the_rest() -> None:
    """Without the lychgate CRDs installed, everything else syncs; when the CRD is
    installed later, its objects arrive."""
    types = [t for t in custom_types() if t.group != "gateway.lychgate.dev"]
    async with KubeFake(types=types) as kube:
        kube.create(gateway())
        client = kube.client()
        store = Store()
        source = KubeSource(client, store, missing_retry=0.2)
        stop = asyncio.Event()
        task = asyncio.create_task(source.run(stop))
        try:
            await asyncio.wait_for(source.synced.wait(), 5)
            assert names(store, Gateway) == ["default/gw"]
            assert not source.informers["GatewayParameters"].served
            gwp = next(t for t in custom_types() if t.kind == "GatewayParameters")
            kube.install_crd(crd_object(gwp))
            kube.create(gateway_parameters())
            await eventually(lambda: store.get(GatewayParameters, "default", "params"), what="GatewayParameters")
        finally:
            stop.set()
            await task
            await client.close()


async def test_invalid_object_is_reported_and_the_last_good_version_kept(kube: KubeFake) -> None:
    """The API server took it (its CRD schema is looser than lychgate's model):
    the problem names the object and field; the previous version keeps serving."""
    kube.create(gateway_parameters(envoyContainer={"bootstrap": {"logLevel": "debug"}}))
    async with running(kube) as (source, store):
        key = ObjectKey("GatewayParameters", "default", "params")
        kube.apply(gateway_parameters(envoyContainer={"bootstrap": {"logLevel": "loud"}}))
        await eventually(lambda: key in store.refused, what="the problem")
        assert "spec.kube.envoyContainer.bootstrap.logLevel" in store.refused[key].message
        kept = store.get(GatewayParameters, "default", "params")
        assert kept is not None and kept.spec.kube.envoy_container.bootstrap.log_level == "debug"
        assert source.all_problems()[0]["object"] == "GatewayParameters default/params"
        kube.apply(gateway_parameters(envoyContainer={"bootstrap": {"logLevel": "warn"}}))
        await eventually(lambda: key not in store.refused and not source.all_problems(), what="the problem to clear")
        assert store.get(GatewayParameters, "default", "params").spec.kube.envoy_container.bootstrap.log_level == "warn"  # type: ignore[union-attr]


async def test_helm_release_secrets_are_not_read(kube: KubeFake) -> None:
    kube.create({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                 "metadata": {"name": "sh.helm.release.v1.x.v1", "namespace": "default"},
                 "data": {"release": "eA=="}})
    kube.create({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                 "metadata": {"name": "cert", "namespace": "default"},
                 "data": {"tls.crt": "eA==", "tls.key": "eA=="}})
    async with running(kube) as (_source, store):
        assert names(store, Secret) == ["default/cert"]


async def test_a_forbidden_kind_is_reported_and_the_rest_is_served(
    kube: KubeFake, caplog: pytest.LogCaptureFixture
) -> None:
    """Missing RBAC for one kind: an error that says what to grant; the others sync."""
    kube.create(gateway())
    kube.fail_next("list", "trafficpolicies", code=403, reason="Forbidden",
                   message='trafficpolicies.gateway.lychgate.dev is forbidden', times=1)
    async with running(kube, missing_retry=0.2) as (source, store):
        assert names(store, Gateway) == ["default/gw"]
        kube.create({"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
                     "metadata": {"name": "tp", "namespace": "default"}, "spec": {}})
        await eventually(lambda: store.get_key(ObjectKey("TrafficPolicy", "default", "tp")),
                         what="the TrafficPolicy once allowed")
        assert source.informers["TrafficPolicy"].lists == 1
    assert "grant list and watch on trafficpolicies.gateway.lychgate.dev" in caplog.text
