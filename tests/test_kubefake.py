"""Tests of the in-process Kubernetes API server stand-in (tests/kubefake).

Every test drives the real lightkube AsyncClient (the controller's client) over
real HTTP against KubeFake: no API server can run on the test machines, so the
stand-in has to be trusted to behave like one, and these tests are that trust.
A few protocol details lightkube cannot express (bookmarks, discovery) are
checked with plain httpx.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from lightkube import ApiError, AsyncClient, operators
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.models.apps_v1 import DeploymentSpec
from lightkube.models.core_v1 import Container, PodSpec, PodTemplateSpec
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Namespace, Secret, Service
from lightkube.types import CascadeType, OnErrorAction, OnErrorResult, PatchType

from tests.kubefake import KubeFake

Gateway = create_namespaced_resource("gateway.networking.k8s.io", "v1", "Gateway", "gateways")
GatewayV1beta1 = create_namespaced_resource("gateway.networking.k8s.io", "v1beta1", "Gateway", "gateways")
GatewayClass = create_global_resource("gateway.networking.k8s.io", "v1", "GatewayClass", "gatewayclasses")
HTTPRoute = create_namespaced_resource("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes")
TrafficPolicy = create_namespaced_resource("gateway.lychgate.dev", "v1alpha1", "TrafficPolicy", "trafficpolicies")


@pytest.fixture
async def kube() -> AsyncIterator[KubeFake]:
    async with KubeFake(bookmark_interval=0.05) as server:
        yield server
    assert not server.internal_errors


@pytest.fixture
async def client(kube: KubeFake) -> AsyncIterator[AsyncClient]:
    c = kube.client()
    try:
        yield c
    finally:
        await c.close()


def gateway(name: str, ns: str = "default", labels: dict[str, str] | None = None, **spec: Any) -> Any:
    return Gateway(
        metadata=ObjectMeta(name=name, namespace=ns, labels=labels),
        spec={"gatewayClassName": "lychgate", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
              **spec},
    )


class Stream:
    """Consumes a lightkube watch in the background so a test can read events with a timeout."""

    def __init__(self, it: Any) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self._it = it
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for ev in self._it:
                await self.queue.put(ev)
        except Exception as e:
            await self.queue.put(e)

    async def next(self, timeout: float = 2.0) -> Any:
        item = await asyncio.wait_for(self.queue.get(), timeout)
        if isinstance(item, Exception):
            raise item
        return item

    async def take(self, n: int) -> list[tuple[str, str, str]]:
        """n events as (type, name, resourceVersion)."""
        out = []
        for _ in range(n):
            t, obj = await self.next()
            out.append((t, obj.metadata.name, obj.metadata.resourceVersion))
        return out

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


# --- CRUD -------------------------------------------------------------------------------


async def test_crud_core_resource(client: AsyncClient) -> None:
    """CRUD on a core type through lightkube's typed models, with the stand-in because
    no API server runs here: metadata stamping, replace, merge patch, 404/409 Status."""
    cm = await client.create(ConfigMap(metadata=ObjectMeta(name="cfg", namespace="default"), data={"a": "1"}))
    assert cm.metadata.uid and cm.metadata.creationTimestamp and cm.metadata.resourceVersion
    assert cm.metadata.generation is None  # ConfigMaps have no generation upstream either

    got = await client.get(ConfigMap, "cfg", namespace="default")
    assert got.data == {"a": "1"}

    got.data["b"] = "2"
    replaced = await client.replace(got)
    assert int(replaced.metadata.resourceVersion) > int(cm.metadata.resourceVersion)
    assert replaced.metadata.uid == cm.metadata.uid

    patched = await client.patch(ConfigMap, "cfg", {"data": {"a": None, "c": "3"}}, namespace="default",
                                 patch_type=PatchType.MERGE)
    assert patched.data == {"b": "2", "c": "3"}

    with pytest.raises(ApiError) as exc:
        await client.create(ConfigMap(metadata=ObjectMeta(name="cfg", namespace="default")))
    assert (exc.value.status.code, exc.value.status.reason) == (409, "AlreadyExists")

    await client.delete(ConfigMap, "cfg", namespace="default")
    with pytest.raises(ApiError) as exc:
        await client.get(ConfigMap, "cfg", namespace="default")
    assert (exc.value.status.code, exc.value.status.reason) == (404, "NotFound")
    assert exc.value.status.message == 'configmaps "cfg" not found'


async def test_crud_custom_resource(client: AsyncClient, kube: KubeFake) -> None:
    """CRUD on a Gateway API custom resource via lightkube generic resources (how the
    controller will talk to CRDs); the stand-in serves every CRD version from one
    storage, as a real cluster does."""
    created = await client.create(gateway("gw"))
    assert created.metadata.generation == 1
    assert created["apiVersion"] == "gateway.networking.k8s.io/v1"

    old = await client.get(GatewayV1beta1, "gw", namespace="default")
    assert old["apiVersion"] == "gateway.networking.k8s.io/v1beta1"
    assert old.metadata.uid == created.metadata.uid

    gc = await client.create(GatewayClass(metadata=ObjectMeta(name="lychgate"),
                                          spec={"controllerName": "gateway.lychgate.dev/lychgate"}))
    assert gc.metadata.namespace is None

    tp = await client.create(TrafficPolicy(metadata=ObjectMeta(name="tp", namespace="default"), spec={"x": 1}))
    assert tp.spec == {"x": 1}

    await client.delete(Gateway, "gw", namespace="default")
    assert kube.get("gateways", "gw") is None

    with pytest.raises(ApiError) as exc:
        await client.create(gateway("gw", ns="missing"))
    assert exc.value.status.code == 404 and exc.value.status.message == 'namespaces "missing" not found'


async def test_generate_name_defaults_and_validation(client: AsyncClient) -> None:
    """Server-assigned names, built-in defaulting and 422 validation: behaviour of a
    real API server the deployer depends on, reproduced by the stand-in."""
    cm = await client.create(ConfigMap(metadata=ObjectMeta(generateName="cfg-", namespace="default")))
    assert cm.metadata.name.startswith("cfg-") and len(cm.metadata.name) == 9

    svc = await client.create(Service(metadata=ObjectMeta(name="svc", namespace="default"),
                                      spec={"selector": {"app": "x"}, "ports": [{"port": 80}]}))
    assert svc.spec.type == "ClusterIP" and svc.spec.clusterIP
    assert svc.spec.ports[0].protocol == "TCP" and svc.spec.ports[0].targetPort == 80

    secret = await client.create(Secret(metadata=ObjectMeta(name="s", namespace="default"), stringData={"k": "v"}))
    assert secret.data == {"k": "dg=="} and secret.stringData is None and secret.type == "Opaque"

    with pytest.raises(ApiError) as exc:
        await client.create(Secret(metadata=ObjectMeta(name="tls", namespace="default"),
                                   type="kubernetes.io/tls", data={"tls.crt": "eA=="}))
    assert (exc.value.status.code, exc.value.status.reason) == (422, "Invalid")
    assert "data[tls.key]" in exc.value.status.message

    with pytest.raises(ApiError) as exc:
        await client.create(ConfigMap(metadata=ObjectMeta(name="Bad_Name", namespace="default")))
    assert exc.value.status.code == 422


# --- list -------------------------------------------------------------------------------


async def test_list_with_selectors(client: AsyncClient, kube: KubeFake) -> None:
    """Label (equality and set-based) and field selectors, per namespace and across
    namespaces, evaluated by the stand-in the way the API server does."""
    kube.namespace("other")
    await client.create(gateway("a", labels={"app": "web", "tier": "front"}))
    await client.create(gateway("b", labels={"app": "api"}))
    await client.create(gateway("c", ns="other", labels={"app": "web"}))

    async def names(**kw: Any) -> list[str]:
        return [g.metadata.name async for g in client.list(Gateway, **kw)]

    assert await names(namespace="*") == ["a", "b", "c"]
    assert await names(namespace="default") == ["a", "b"]
    assert await names(namespace="*", labels={"app": "web"}) == ["a", "c"]
    assert await names(namespace="*", labels={"app": ["api", "other"]}) == ["b"]  # app in (...)
    assert await names(namespace="*", labels={"tier": None}) == ["a"]  # exists
    assert await names(namespace="*", labels={"tier": operators.not_exists()}) == ["b", "c"]
    assert await names(namespace="*", labels={"app": operators.not_in(["web"])}) == ["b"]
    assert await names(namespace="*", fields={"metadata.name": "c"}) == ["c"]
    assert await names(namespace="*", fields={"metadata.namespace": operators.not_equal("other")}) == ["a", "b"]

    listing = client.list(Gateway, namespace="*")
    _ = [g async for g in listing]
    assert listing.resourceVersion == kube.resource_version

    with pytest.raises(ApiError) as exc:
        _ = [g async for g in client.list(Gateway, namespace="*", fields={"spec.gatewayClassName": "x"})]
    assert exc.value.status.code == 400 and "field label not supported" in exc.value.status.message


async def test_list_pagination(client: AsyncClient) -> None:
    """lightkube's chunked lists follow `continue` tokens; the stand-in pages like etcd."""
    for i in range(5):
        await client.create(ConfigMap(metadata=ObjectMeta(name=f"cm{i}", namespace="default")))
    assert [c.metadata.name async for c in client.list(ConfigMap, namespace="default", chunk_size=2)] == [
        f"cm{i}" for i in range(5)
    ]


# --- watch ------------------------------------------------------------------------------


async def test_watch_sees_changes_in_order(client: AsyncClient, kube: KubeFake) -> None:
    """A watch without resourceVersion gets the current state as ADDED, then every
    change in commit order: the list+watch contract the controller's source relies on."""
    await client.create(gateway("existing"))
    stream = Stream(client.watch(Gateway, namespace="default"))
    try:
        assert [e[:2] for e in await stream.take(1)] == [("ADDED", "existing")]
        await kube.wait_for_watches("gateways")
        await client.create(gateway("gw"))
        await client.patch(Gateway, "gw", {"spec": {"gatewayClassName": "other"}}, namespace="default",
                           patch_type=PatchType.MERGE)
        await client.delete(Gateway, "gw", namespace="default")
        events = await stream.take(3)
        assert [e[:2] for e in events] == [("ADDED", "gw"), ("MODIFIED", "gw"), ("DELETED", "gw")]
        rvs = [int(e[2]) for e in events]
        assert rvs == sorted(rvs) and len(set(rvs)) == 3
    finally:
        await stream.close()


async def test_watch_label_selector_transitions(client: AsyncClient, kube: KubeFake) -> None:
    """With a selector, an object that starts/stops matching arrives as ADDED/DELETED,
    as the watch cache does, so a filtered cache never keeps stale objects."""
    await client.create(gateway("gw", labels={"sel": "no"}))
    stream = Stream(client.watch(Gateway, namespace="default", labels={"sel": "yes"}))
    try:
        await kube.wait_for_watches("gateways")
        await client.patch(Gateway, "gw", {"metadata": {"labels": {"sel": "yes"}}}, namespace="default",
                           patch_type=PatchType.MERGE)
        await client.patch(Gateway, "gw", {"metadata": {"labels": {"sel": "no"}}}, namespace="default",
                           patch_type=PatchType.MERGE)
        assert [e[:2] for e in await stream.take(2)] == [("ADDED", "gw"), ("DELETED", "gw")]
    finally:
        await stream.close()


async def test_watch_resumes_from_resource_version(client: AsyncClient) -> None:
    """Watching from a list's resourceVersion replays exactly the later changes (no
    initial state), which is how the controller resumes without relisting."""
    await client.create(gateway("before"))
    listing = client.list(Gateway, namespace="default")
    _ = [g async for g in listing]
    rv = listing.resourceVersion
    await client.create(gateway("after"))
    await client.delete(Gateway, "before", namespace="default")
    stream = Stream(client.watch(Gateway, namespace="default", resource_version=rv))
    try:
        assert [e[:2] for e in await stream.take(2)] == [("ADDED", "after"), ("DELETED", "before")]
        with pytest.raises(asyncio.TimeoutError):
            await stream.next(timeout=0.1)
    finally:
        await stream.close()


async def test_watch_expired_after_compaction(client: AsyncClient, kube: KubeFake) -> None:
    """A resume from a compacted resourceVersion gets an ERROR event with a 410 Status;
    lightkube raises it, or (on_error=retry) relists from scratch. The stand-in's
    compact() forces what etcd compaction does on its own schedule."""
    await client.create(gateway("gw"))
    old_rv = kube.resource_version
    await client.create(gateway("gw2"))
    kube.compact()

    stream = Stream(client.watch(Gateway, namespace="default", resource_version=old_rv))
    with pytest.raises(ApiError) as exc:
        await stream.next()
    assert (exc.value.status.code, exc.value.status.reason) == (410, "Expired")
    await stream.close()

    def retry(e: Exception, count: int) -> OnErrorResult:
        return OnErrorResult(OnErrorAction.RETRY if count < 3 else OnErrorAction.RAISE)

    stream = Stream(client.watch(Gateway, namespace="default", resource_version=old_rv, on_error=retry))
    try:
        assert sorted(e[:2] for e in await stream.take(2)) == [("ADDED", "gw"), ("ADDED", "gw2")]
    finally:
        await stream.close()


async def test_watch_reconnects_after_drop(client: AsyncClient, kube: KubeFake) -> None:
    """When the server ends a watch stream, lightkube re-watches from the last
    resourceVersion it saw and nothing is lost or repeated; drop_watches() forces
    the server-side timeout a long-running controller will meet."""
    stream = Stream(client.watch(Gateway, namespace="default"))
    try:
        await kube.wait_for_watches("gateways")
        await client.create(gateway("one"))
        (first,) = await stream.take(1)
        assert kube.drop_watches() == 1
        await client.create(gateway("two"))  # committed while no watch is open
        await kube.wait_for_watches("gateways")
        await client.create(gateway("three"))
        assert [e[:2] for e in await stream.take(2)] == [("ADDED", "two"), ("ADDED", "three")]
        watches = kube.requests_for("gateways", verb="watch")
        assert len(watches) == 2 and watches[1].query["resourceVersion"] == first[2]
    finally:
        await stream.close()


async def test_watch_bookmarks_and_timeout(kube: KubeFake) -> None:
    """allowWatchBookmarks and timeoutSeconds, over raw HTTP because lightkube's watch()
    does not send them; client-go style controllers and lychgate's source may."""
    kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}})
    async with httpx.AsyncClient(base_url=kube.url) as http:
        r = await http.get("/api/v1/namespaces/default/configmaps",
                           params={"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "1",
                                   "resourceVersion": "0"})
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        events = [json.loads(line) for line in r.text.splitlines()]
        assert events[0]["type"] == "ADDED" and events[0]["object"]["kind"] == "ConfigMap"
        assert any(e["type"] == "BOOKMARK" for e in events[1:])
        assert events[-1]["object"]["metadata"]["resourceVersion"] == kube.resource_version


# --- optimistic concurrency, status, generation -------------------------------------------


async def test_conflict_on_stale_update(client: AsyncClient) -> None:
    """PUT carrying a stale resourceVersion is a 409 Conflict (leader election and
    read-modify-write loops depend on it); without one the update is unconditional."""
    stale = await client.create(ConfigMap(metadata=ObjectMeta(name="cfg", namespace="default"), data={"v": "1"}))
    fresh = await client.get(ConfigMap, "cfg", namespace="default")
    fresh.data["v"] = "2"
    await client.replace(fresh)

    stale.data["v"] = "3"
    with pytest.raises(ApiError) as exc:
        await client.replace(stale)
    assert (exc.value.status.code, exc.value.status.reason) == (409, "Conflict")
    assert "the object has been modified" in exc.value.status.message

    stale.metadata.resourceVersion = None
    assert (await client.replace(stale)).data == {"v": "3"}


async def test_status_subresource_and_generation(client: AsyncClient, kube: KubeFake) -> None:
    """The main endpoint ignores .status and /status changes only .status; spec
    changes bump metadata.generation, status and metadata changes do not; a write
    that changes nothing commits nothing. Controllers' observedGeneration logic and
    "don't rewrite unchanged status" checks are tested against exactly this."""
    created = await client.create(Gateway(metadata=ObjectMeta(name="gw", namespace="default"),
                                          spec={"gatewayClassName": "lychgate"}, status={"addresses": []}))
    assert created.status is None  # status is dropped on create

    status = {"conditions": [{"type": "Accepted", "status": "True", "observedGeneration": 1}]}
    s = await client.patch(Gateway.Status, "gw", {"status": status, "spec": {"gatewayClassName": "ignored"}},
                           namespace="default", patch_type=PatchType.MERGE)
    assert s.status == status and s.spec["gatewayClassName"] == "lychgate" and s.metadata.generation == 1

    main = await client.get(Gateway, "gw", namespace="default")
    main["status"] = {"conditions": []}
    main["spec"]["gatewayClassName"] = "other"
    after = await client.replace(main)
    assert after.status == status and after.metadata.generation == 2

    labelled = await client.patch(Gateway, "gw", {"metadata": {"labels": {"a": "b"}}}, namespace="default",
                                  patch_type=PatchType.MERGE)
    assert labelled.metadata.generation == 2

    writes, changes = kube.writes("gateways", "gw", subresource="status"), kube.changes("gateways", "gw", subresource="status")
    again = await client.patch(Gateway.Status, "gw", {"status": status}, namespace="default",
                               patch_type=PatchType.MERGE)
    assert again.metadata.resourceVersion == labelled.metadata.resourceVersion  # no-op: nothing committed
    assert kube.writes("gateways", "gw", subresource="status") == writes + 1
    assert kube.changes("gateways", "gw", subresource="status") == changes

    whole = await client.get(Gateway, "gw", namespace="default")
    whole["status"] = {"conditions": []}
    replaced = await client.replace(Gateway.Status(whole), "gw", namespace="default")
    assert replaced.status == {"conditions": []}

    with pytest.raises(ApiError) as exc:  # custom resources have no strategic merge patch
        await client.patch(Gateway, "gw", {"spec": {}}, namespace="default")
    assert exc.value.status.code == 415


async def test_builtin_patch_types(client: AsyncClient) -> None:
    """Strategic merge (lightkube's default patch type) merges containers by name on
    built-in types; JSON patch applies RFC 6902 operations including `test`."""
    dep = Deployment(
        metadata=ObjectMeta(name="d", namespace="default"),
        spec=DeploymentSpec(
            selector=LabelSelector(matchLabels={"app": "d"}),
            template=PodTemplateSpec(metadata=ObjectMeta(labels={"app": "d"}),
                                     spec=PodSpec(containers=[Container(name="a", image="a:1"),
                                                              Container(name="b", image="b:1")])),
        ),
    )
    created = await client.create(dep)
    assert created.spec.replicas == 1 and created.spec.template.spec.containers[0].imagePullPolicy == "IfNotPresent"

    patched = await client.patch(Deployment, "d", {"spec": {"template": {"spec": {"containers": [
        {"name": "b", "image": "b:2"}]}}}}, namespace="default")
    assert [(c.name, c.image) for c in patched.spec.template.spec.containers] == [("a", "a:1"), ("b", "b:2")]
    assert patched.metadata.generation == 2

    ops = [{"op": "test", "path": "/spec/replicas", "value": 1}, {"op": "replace", "path": "/spec/replicas", "value": 3}]
    assert (await client.patch(Deployment, "d", ops, namespace="default", patch_type=PatchType.JSON)).spec.replicas == 3
    with pytest.raises(ApiError) as exc:
        await client.patch(Deployment, "d", ops, namespace="default", patch_type=PatchType.JSON)
    assert exc.value.status.code == 422


# --- server-side apply ------------------------------------------------------------------


async def test_server_side_apply(client: AsyncClient, kube: KubeFake) -> None:
    """Apply creates or merges, records the manager in managedFields, conflicts with
    another manager's differing field (409 naming the field) unless forced, and
    removes fields the manager stops applying: what the deployer's apply relies on."""
    cfg = ConfigMap(metadata=ObjectMeta(name="cfg", namespace="default", labels={"a": "1"}),
                    data={"x": "1", "y": "2"})
    created = await client.apply(cfg, field_manager="deployer")
    assert created.data == {"x": "1", "y": "2"}
    (entry,) = created.metadata.managedFields
    assert (entry.manager, entry.operation) == ("deployer", "Apply")
    assert entry.fieldsV1 == {"f:data": {"f:x": {}, "f:y": {}}, "f:metadata": {"f:labels": {"f:a": {}}}}
    assert kube.requests_for("configmaps", verb="patch")[-1].status == 201

    same = await client.apply(cfg, field_manager="deployer")
    assert same.metadata.resourceVersion == created.metadata.resourceVersion  # idempotent

    other = ConfigMap(metadata=ObjectMeta(name="cfg", namespace="default"), data={"x": "changed", "z": "3"})
    with pytest.raises(ApiError) as exc:
        await client.apply(other, field_manager="someone-else")
    assert (exc.value.status.code, exc.value.status.reason) == (409, "Conflict")
    assert 'conflict with "deployer"' in exc.value.status.message and ".data.x" in exc.value.status.message

    forced = await client.apply(other, field_manager="someone-else", force=True)
    assert forced.data == {"x": "changed", "y": "2", "z": "3"}

    # The deployer stops applying y and the label: they go; x is now someone-else's.
    shrunk = await client.apply(ConfigMap(metadata=ObjectMeta(name="cfg", namespace="default"), data={"x": "changed"}),
                                field_manager="deployer")
    assert shrunk.data == {"x": "changed", "z": "3"} and not shrunk.metadata.labels

    # Status apply goes through /status and only touches status.
    await client.create(gateway("gw"))
    applied = await client.apply(
        Gateway.Status(apiVersion="gateway.networking.k8s.io/v1", kind="Gateway",
                       metadata={"name": "gw", "namespace": "default"},
                       status={"conditions": [{"type": "Programmed", "status": "True"}]}),
        "gw", namespace="default", field_manager="lychgate", force=True)
    assert applied.status["conditions"][0]["type"] == "Programmed"
    assert any(m.subresource == "status" for m in applied.metadata.managedFields)


async def test_apply_merges_associative_lists(client: AsyncClient) -> None:
    """Conditions are a list-map keyed by type (per the Gateway API CRDs): two
    managers applying different condition types both keep theirs."""
    await client.create(gateway("gw"))

    def cond(t: str) -> Any:
        return Gateway.Status(apiVersion="gateway.networking.k8s.io/v1", kind="Gateway",
                              metadata={"name": "gw", "namespace": "default"},
                              status={"conditions": [{"type": t, "status": "True"}]})

    await client.apply(cond("Accepted"), "gw", namespace="default", field_manager="a")
    out = await client.apply(cond("Programmed"), "gw", namespace="default", field_manager="b")
    assert [c["type"] for c in out.status["conditions"]] == ["Accepted", "Programmed"]


# --- deletion ---------------------------------------------------------------------------


async def test_owner_reference_garbage_collection(client: AsyncClient, kube: KubeFake) -> None:
    """Deleting an owner deletes its dependents (Background/Foreground), Orphan strips
    the reference instead, and a dependent with another live owner survives: the
    deployer leaves cleanup of a Gateway's proxy resources to this."""
    gw = await client.create(gateway("gw"))
    gw2 = await client.create(gateway("gw2"))

    def ref(owner: Any) -> dict[str, Any]:
        return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": owner.metadata.name,
                "uid": owner.metadata.uid, "controller": owner is gw}

    await client.create(ConfigMap(metadata=ObjectMeta(name="owned", namespace="default", ownerReferences=[ref(gw)])))
    await client.create(ConfigMap(metadata=ObjectMeta(name="shared", namespace="default",
                                                      ownerReferences=[ref(gw), ref(gw2)])))
    await client.create(Service(metadata=ObjectMeta(name="gw2", namespace="default", ownerReferences=[ref(gw2)]),
                                spec={"ports": [{"port": 80}]}))

    rv = kube.resource_version
    await client.delete(Gateway, "gw", namespace="default", cascade=CascadeType.FOREGROUND)
    assert kube.get("configmaps", "owned") is None
    # Foreground: the owner is marked, its dependents go, then the owner goes.
    assert [(t, k, n) for t, k, _, n in kube.history(rv)] == [
        ("MODIFIED", "Gateway", "gw"), ("DELETED", "ConfigMap", "owned"), ("MODIFIED", "ConfigMap", "shared"),
        ("DELETED", "Gateway", "gw")]
    shared = kube.get("configmaps", "shared")
    assert shared is not None and [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["gw2"]

    await client.delete(Gateway, "gw2", namespace="default", cascade=CascadeType.ORPHAN)
    svc = kube.get("services", "gw2")
    assert svc is not None and "ownerReferences" not in svc["metadata"]
    assert kube.get("configmaps", "shared") is not None

    # A dependent whose owner does not exist is collected, as the real GC would.
    await client.create(ConfigMap(metadata=ObjectMeta(name="orphan", namespace="default", ownerReferences=[
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "ghost", "uid": "nope"}])))
    assert kube.get("configmaps", "orphan") is None


async def test_finalizers_and_namespace_deletion(client: AsyncClient, kube: KubeFake) -> None:
    """A finalizer holds an object (deletionTimestamp set, MODIFIED) until it is
    removed; deleting a namespace removes what it contains."""
    await client.create(gateway("gw", finalizers=None))
    await client.patch(Gateway, "gw", {"metadata": {"finalizers": ["lychgate/cleanup"]}}, namespace="default",
                       patch_type=PatchType.MERGE)
    await client.delete(Gateway, "gw", namespace="default")
    held = await client.get(Gateway, "gw", namespace="default")
    assert held.metadata.deletionTimestamp is not None
    await client.patch(Gateway, "gw", [{"op": "remove", "path": "/metadata/finalizers"}], namespace="default",
                       patch_type=PatchType.JSON)
    assert kube.get("gateways", "gw") is None

    kube.namespace("doomed")
    await client.create(gateway("x", ns="doomed"))
    await client.delete(Namespace, "doomed")
    assert kube.get("gateways", "x", namespace="doomed") is None


# --- hooks and discovery -------------------------------------------------------------------


async def test_hooks_fail_next_and_request_log(client: AsyncClient, kube: KubeFake) -> None:
    """Injected failures and the request log, so controller tests can assert retries
    and exactly which writes were sent."""
    kube.conflict_next("update", "configmaps", name="cfg")
    cm = await client.create(ConfigMap(metadata=ObjectMeta(name="cfg", namespace="default")))
    with pytest.raises(ApiError) as exc:
        await client.replace(cm)
    assert exc.value.status.code == 409
    await client.replace(cm)
    assert [r.verb for r in kube.requests_for("configmaps", name="cfg")] == ["create", "update", "update"]
    assert kube.writes("configmaps", "cfg") == 3 and kube.changes("configmaps", "cfg") == 1


async def test_discovery_and_crd_install(kube: KubeFake) -> None:
    """Discovery reflects served types, and installing/removing a CRD adds/removes an
    API, as the controller sees when optional CRDs (e.g. TLSRoute) are missing."""
    async with httpx.AsyncClient(base_url=kube.url) as http:
        groups = (await http.get("/apis")).json()
        assert "gateway.networking.k8s.io" in [g["name"] for g in groups["groups"]]
        res = (await http.get("/apis/gateway.networking.k8s.io/v1")).json()
        assert {"gateways", "gateways/status"} <= {r["name"] for r in res["resources"]}
        assert (await http.get("/apis/example.com/v1/widgets")).status_code == 404

        kube.install_crd({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": "Widget", "plural": "widgets"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": {"status": {}}}]},
        })
        r = await http.post("/apis/example.com/v1/namespaces/default/widgets",
                            json={"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
        assert r.status_code == 201
        items = (await http.get("/apis/example.com/v1/widgets")).json()["items"]
        assert items[0]["kind"] == "Widget"  # custom resource list items keep apiVersion/kind

        await http.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
        assert (await http.get("/apis/example.com/v1/widgets")).status_code == 404
