"""`KubeFake`: an in-process Kubernetes API server for tests, plus its test hooks.

No API server can run on the test machines, so the Kubernetes mode of lychgate
is tested against this: a real HTTP server on 127.0.0.1 that speaks the API the
way client libraries (lightkube, unmodified) expect. Hooks let a test force what a
real cluster does only sometimes: history compaction (410 Expired on resume),
dropped watch connections, injected failures.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from aiohttp import web

from . import errors
from .api import Api, RequestRecord
from .errors import ApiError
from .resources import Registry, ResourceType, builtin_types, custom_types
from .store import NAMESPACE_KEY, Obj, Store
from .validation import Validator

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
TEST_MANAGER = "kubefake-test"
WRITE_VERBS = ("create", "update", "patch", "delete")


class KubeFake:
    """Start with `async with KubeFake() as kube:` (or `await kube.start()`)."""

    def __init__(
        self,
        *,
        types: Iterable[ResourceType] | None = None,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        history_size: int = 1000,
        enforce_namespaces: bool = True,
        bookmark_interval: float = 60.0,
        host: str = "127.0.0.1",
    ) -> None:
        """`types`: custom resource types to serve (default: Gateway API, lychgate,
        inference); built-in types are always served. `enforce_namespaces`: creating
        in a missing namespace is a 404, as with the NamespaceLifecycle admission
        plugin. `bookmark_interval`: seconds between BOOKMARKs on idle watches that
        asked for them (the API server uses about a minute)."""
        self.registry = Registry(builtin_types())
        self.store = Store(self.registry, history_size=history_size, enforce_namespaces=enforce_namespaces)
        self.api = Api(self.store)
        self.api.bookmark_interval = bookmark_interval
        self.host = host
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._closing = False
        for rt in custom_types() if types is None else types:
            self.store.register(rt)
        for ns in namespaces:
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a watch whose client hung up ends at once, so the
        # count of open watches a test waits on is exact.
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self.api.address = f"{self.host}:{self.port}"

    async def stop(self) -> None:
        if self._runner is None:
            return
        self._closing = True
        self.drop_watches()
        await asyncio.sleep(0)
        await self._runner.cleanup()
        self._runner = None

    async def __aenter__(self) -> KubeFake:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self._closing:
            # A client reconnecting while we shut down must not start a new watch.
            return web.Response(status=503, text="shutting down")
        return await self.api.handle(request)

    # --- client configuration ---------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def kubeconfig_dict(self, namespace: str = "default") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kubefake", "cluster": {"server": self.url}}],
            "users": [{"name": "kubefake", "user": {"token": "kubefake-token"}}],
            "contexts": [{"name": "kubefake",
                          "context": {"cluster": "kubefake", "user": "kubefake", "namespace": namespace}}],
            "current-context": "kubefake",
        }

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        """For code that loads KUBECONFIG itself (set the env var to this path)."""
        p = Path(path)
        p.write_text(yaml.safe_dump(self.kubeconfig_dict(namespace)))
        return p

    def kubeconfig(self, namespace: str = "default") -> Any:
        from lightkube import KubeConfig

        return KubeConfig.from_dict(self.kubeconfig_dict(namespace))

    def client(self, namespace: str = "default", **kwargs: Any) -> Any:
        """A real `lightkube.AsyncClient` pointed at this server. trust_env=False so
        proxy variables in the environment cannot divert loopback traffic."""
        from lightkube import AsyncClient

        kwargs.setdefault("trust_env", False)
        return AsyncClient(config=self.kubeconfig(namespace), **kwargs)

    # --- types ------------------------------------------------------------------------

    def resource(self, name: str) -> ResourceType:
        """kubectl-style lookup: `gateways`, `gateways.gateway.networking.k8s.io`, `Gateway`."""
        return self.registry.resolve(name)

    def register(self, rt: ResourceType) -> None:
        self.store.register(rt)

    def install_crd(self, crd: Obj) -> ResourceType:
        """Install a CustomResourceDefinition (e.g. loaded from a chart's CRD YAML);
        its schema's list-type markers drive server-side apply merging."""
        return self.store.install_crd(crd)

    def add_validator(self, resource: str, validator: Validator) -> None:
        """Reject writes the way a CRD schema/CEL rule would: return [(field, msg)]."""
        rt = self.resource(resource)
        self.store.validators.setdefault(rt.key, []).append(validator)

    # --- objects, bypassing HTTP ------------------------------------------------------

    def _type_of(self, obj: Obj) -> ResourceType:
        rt = self.registry.by_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
        if rt is None:
            raise KeyError(f"no served type for {obj.get('apiVersion')}/{obj.get('kind')}")
        return rt

    def create(self, obj: Obj) -> Obj:
        """Create an object as a test fixture would with kubectl (manager kubefake-test)."""
        rt = self._type_of(obj)
        version = obj["apiVersion"].rpartition("/")[2]
        ns = (obj.get("metadata") or {}).get("namespace", "default") if rt.namespaced else ""
        return self.store.create(rt, ns, obj, version=version, manager=TEST_MANAGER)

    def apply(self, obj: Obj, *, manager: str = TEST_MANAGER, force: bool = True, subresource: str = "") -> Obj:
        """Server-side apply an object (create or merge)."""
        rt = self._type_of(obj)
        version = obj["apiVersion"].rpartition("/")[2]
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "default") if rt.namespaced else ""
        out, _ = self.store.apply(rt, ns, meta["name"], obj, sub=subresource, version=version, manager=manager,
                                  force=force)
        return out

    def update_status(self, resource: str, name: str, status: Obj, namespace: str | None = None) -> Obj:
        """Replace .status, as another controller (kubelet, deployment controller,
        cloud LB controller) would."""
        rt = self.resource(resource)
        ns = (namespace or "default") if rt.namespaced else ""
        obj = self.store.get(rt, ns, name)
        obj["status"] = status
        obj["metadata"].pop("resourceVersion", None)
        return self.store.update(rt, ns, name, obj, sub="status", version=rt.storage_version, manager=TEST_MANAGER)

    def get(self, resource: str, name: str, namespace: str | None = None) -> Obj | None:
        rt = self.resource(resource)
        return self.store.find(rt, (namespace or "default") if rt.namespaced else "", name)

    def list(self, resource: str, namespace: str | None = None) -> list[Obj]:
        rt = self.resource(resource)
        return self.store.list(rt, namespace if rt.namespaced else None)

    def delete(self, resource: str, name: str, namespace: str | None = None, propagation: str = "Background") -> None:
        rt = self.resource(resource)
        self.store.delete(rt, (namespace or "default") if rt.namespaced else "", name, propagation=propagation)

    def namespace(self, name: str, labels: dict[str, str] | None = None) -> Obj:
        meta: Obj = {"name": name}
        if labels:
            meta["labels"] = labels
        existing = self.store.find(self.registry.get(*NAMESPACE_KEY), "", name)  # type: ignore[arg-type]
        return existing or self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})

    # --- test hooks -------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion (what a list right now would carry)."""
        return str(self.store.rv)

    def history(self, since: str | int = 0) -> builtins.list[tuple[str, str, str, str]]:
        """Committed changes after resourceVersion `since`, oldest first, as
        (type, kind, namespace, name): "what did the controller write, in what order?"."""
        return [
            (e.type, e.obj.get("kind", ""), e.obj["metadata"].get("namespace", ""), e.obj["metadata"]["name"])
            for e in self.store.events_after(int(since))
        ]

    def compact(self) -> None:
        """Drop the event history: resuming a watch from any older resourceVersion now
        gets an ERROR event with a 410 Expired Status (clients must relist)."""
        self.store.compact()

    def drop_watches(self, *, abrupt: bool = False) -> int:
        """End every open watch; returns how many. Clean (default): the stream
        finishes normally, as when the API server's watch timeout fires, and clients
        re-watch from their last resourceVersion. Abrupt: the TCP connection is cut
        mid-stream, which clients see as a transport error."""
        watchers = list(self.api.watchers)
        for w in watchers:
            if abrupt and w.transport is not None:
                w.transport.close()
            else:
                w.stop()
        return len(watchers)

    def bookmark(self) -> None:
        """Send a BOOKMARK now on every watch that allowed them."""
        for w in self.api.watchers:
            w.bookmark(self.store.rv)

    def open_watches(self, resource: str | None = None) -> int:
        if resource is None:
            return len(self.api.watchers)
        rt = self.resource(resource)
        return sum(1 for w in self.api.watchers if w.rt.key == rt.key)

    async def wait_for_watches(self, resource: str, count: int = 1, timeout: float = 5.0) -> None:
        """Wait until `count` watches on `resource` are open (the informer is live)."""
        deadline = time.monotonic() + timeout
        while self.open_watches(resource) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.open_watches(resource)} watches on {resource}, wanted {count}")
            await asyncio.sleep(0.01)

    @property
    def internal_errors(self) -> builtins.list[Exception]:
        """Exceptions the stand-in raised while serving (its own bugs; answered as 500)."""
        return self.api.internal_errors

    @property
    def requests(self) -> builtins.list[RequestRecord]:
        """Every request received, in order (method, path, query, body, verb, ...)."""
        return self.api.requests

    def clear_requests(self) -> None:
        self.api.requests.clear()

    def requests_for(
        self,
        resource: str,
        *,
        verb: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> builtins.list[RequestRecord]:
        q = self.resource(resource).qualified()
        return [
            r for r in self.api.requests
            if r.resource == q
            and (verb is None or r.verb == verb)
            and (name is None or r.name == name)
            and (namespace is None or r.namespace == namespace)
            and (subresource is None or r.subresource == subresource)
        ]

    def writes(self, resource: str, name: str, namespace: str | None = None, subresource: str = "") -> int:
        """Write *requests* (create/update/patch/delete, any outcome) aimed at one
        object or one of its subresources: "did the controller write status again?"."""
        return sum(
            1 for r in self.requests_for(resource, name=name, namespace=namespace, subresource=subresource)
            if r.verb in WRITE_VERBS
        )

    def changes(self, resource: str, name: str, namespace: str | None = None, subresource: str = "") -> int:
        """Committed revisions of one object (no-op writes do not count): "did the
        object actually change?"."""
        rt = self.resource(resource)
        ns = (namespace or "default") if rt.namespaced else ""
        return self.store.changes[(rt.group, rt.plural, ns, name, subresource)]

    def fail_next(
        self,
        verb: str,
        resource: str,
        *,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
        code: int = 500,
        reason: str = "InternalError",
        message: str = "injected failure",
        times: int = 1,
    ) -> None:
        """Answer the next `times` matching requests with a Status error instead."""
        q = self.resource(resource).qualified()
        left = [times]

        def react(rec: RequestRecord) -> ApiError | None:
            if left[0] <= 0:
                return None
            if rec.verb != verb or rec.resource != q:
                return None
            if (name is not None and rec.name != name) or (namespace is not None and rec.namespace != namespace):
                return None
            if subresource is not None and rec.subresource != subresource:
                return None
            left[0] -= 1
            return ApiError(code, reason, message)

        self.api.reactors.append(react)

    def conflict_next(self, verb: str, resource: str, **kwargs: Any) -> None:
        """The next matching write fails with 409 Conflict (a lost optimistic-concurrency race)."""
        rt = self.resource(resource)
        err = errors.conflict(rt.group, rt.plural, kwargs.get("name") or "", errors.STALE)
        self.fail_next(verb, resource, code=409, reason="Conflict", message=err.message, **kwargs)
