"""Kubernetes deployer: one Envoy Deployment (+ Service, ServiceAccount, ConfigMap) per Gateway.

It implements the control loop's Deployer protocol. `sync()` only records what
should exist and wakes a worker, so the control loop never waits on the API
server; the worker server-side-applies the objects of `deploy.manifests` for
each Gateway whose inputs changed (a digest of the rendered objects), and only
while this replica leads (`is_leader`). An object of the same name that lychgate
does not own is never taken over: the Gateway's Programmed condition says why.

A Gateway whose routes use an AI Backend (or whose GatewayParameters enable
`aiExtension`) also gets the AI extension in its Pod and the Secret
`<gateway>-ai-config` with its config (`sync_ai`: only that Gateway's providers and
route settings, so one Gateway's keys never reach another's Pod); a changed key is a
changed Secret, which the running extension picks up without a rollout.

Proxy objects are owned by their Gateway, so the garbage collector removes them
with it. The worker deletes them itself only when the Gateway stopped being
lychgate's (another class) or left the discovered namespaces; while a Gateway of
ours exists but is invalid, its running proxy is left alone.

A watch on the Deployments lychgate manages tells which proxies are ready (the
readiness probe passes once Envoy has its first configuration): that is what
makes a Gateway Programmed, whichever replica its Envoy is connected to.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Callable
from typing import Any

from lightkube.types import PatchType

from lychgate.ai.config import AIConfig
from lychgate.api.core import Service
from lychgate.api.gateway import Gateway, GatewayClass
from lychgate.deploy import ai_container, manifests, mcp_container, overlays
from lychgate.deploy.manifests import ProxyContext
from lychgate.kubeapi import (
    CONFIG_MAP,
    DEPLOYMENT,
    FIELD_MANAGER,
    HORIZONTAL_POD_AUTOSCALER,
    POD_DISRUPTION_BUDGET,
    SECRET,
    SERVICE,
    SERVICE_ACCOUNT,
    VERTICAL_POD_AUTOSCALER,
    ApiResource,
    Backoff,
    describe_error,
    error_code,
    plain,
)
from lychgate.log import component_logger
from lychgate.mcp.config import MCPConfig
from lychgate.sources.kube import Informer
from lychgate.store import Store
from lychgate.translate.gateway import CONTROLLER_NAME, ProxyIntent

log = component_logger("deploy")

OPTIONAL = (POD_DISRUPTION_BUDGET, HORIZONTAL_POD_AUTOSCALER, VERTICAL_POD_AUTOSCALER)
BY_KIND: dict[str, ApiResource] = {
    r.kind: r for r in (SERVICE_ACCOUNT, CONFIG_MAP, SECRET, SERVICE, DEPLOYMENT, *OPTIONAL)
}
# Written only when the Gateway needs them: removed when it no longer does.
OPTIONAL_OBJECTS = (*OPTIONAL, SECRET)
RESYNC_SECONDS = 600.0  # re-apply everything now and then: repairs edits made by hand


class DeployError(Exception):
    """Why a Gateway's proxy could not be written; shown in its Programmed condition."""


class NotLeader(Exception):
    """This replica lost the lease: write nothing more."""


def _ref(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def _split(ref: str) -> tuple[str, str]:
    ns, _, name = ref.partition("/")
    return ns, name


def _controlled_by(obj: dict[str, Any], uid: str | None) -> bool:
    return any(
        r.get("kind") == "Gateway" and r.get("controller") and (uid is None or r.get("uid") == uid)
        for r in (obj.get("metadata") or {}).get("ownerReferences") or []
    )


def _owned(gateway: str, resources: tuple[ApiResource, ...]) -> list[tuple[ApiResource, str]]:
    """The proxy's objects of these kinds, by name: the Gateway's, its AI config Secret's."""
    return [(r, ai_container.secret_name(gateway) if r is SECRET else gateway) for r in resources]


def _digest(objs: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(objs, sort_keys=True).encode()).hexdigest()


class KubeDeployer:
    def __init__(
        self,
        client: Any,
        ctx: ProxyContext,
        is_leader: Callable[[], bool] = lambda: True,
        resync_seconds: float = RESYNC_SECONDS,
    ) -> None:
        self.client = client
        self.ctx = ctx
        self.is_leader = is_leader
        self.resync_seconds = resync_seconds
        self.store = Store()
        self.notify: Callable[[], None] = lambda: None
        # Does a Gateway (ref) exist and belong to lychgate? Decides deletions.
        self.keep: Callable[[str], bool] = self._gateway_is_ours
        self.intents: dict[str, ProxyIntent] = {}
        self.ai_configs: dict[str, AIConfig] = {}  # ref -> its AI extension's config (routes to AI Backends)
        self.mcp_configs: dict[str, MCPConfig] = {}  # ref -> its MCP relay's config (routes to MCP Backends)
        self.applied: dict[str, str] = {}  # ref -> digest of the objects last applied
        self.errors: dict[str, str] = {}  # ref -> why its objects could not be written
        self.deployments: dict[str, dict[str, Any]] = {}  # ref -> managed Deployment (raw)
        self._ready: dict[str, str] = {}  # ref -> readiness summary, to notify on change
        self._wake = asyncio.Event()
        self._work: asyncio.Task[None] | None = None
        self._backoff = Backoff(base=1.0, cap=60.0)
        self.informer = Informer(
            client, DEPLOYMENT, self._on_list, self._on_event,
            labels={manifests.MANAGED_BY_LABEL: manifests.MANAGED_BY},
        )

    def attach(self, store: Store, notify: Callable[[], None]) -> None:
        """Connect to the control plane's store and its 'please run a pass' hook."""
        self.store = store
        self.notify = notify

    # --- the Deployer protocol ------------------------------------------------------

    def address_for(self, gateway: Gateway) -> str | None:
        """Where Envoy's listeners bind: every interface of the Pod."""
        return "0.0.0.0"

    def status_addresses(self, gateway: Gateway) -> list[dict[str, str]]:
        """Gateway status.addresses: the load balancer's, else the Service's cluster IP."""
        svc = self.store.get(Service, gateway.namespace, gateway.name)
        if svc is None or svc.metadata.labels.get(manifests.MANAGED_BY_LABEL) != manifests.MANAGED_BY:
            return []
        out: list[dict[str, str]] = []
        for ingress in ((svc.status or {}).get("loadBalancer") or {}).get("ingress") or []:
            if ingress.get("ip"):
                out.append({"type": "IPAddress", "value": ingress["ip"]})
            elif ingress.get("hostname"):
                out.append({"type": "Hostname", "value": ingress["hostname"]})
        if not out and svc.spec.type in ("ClusterIP", "NodePort"):
            cluster_ip = (svc.spec.model_extra or {}).get("clusterIP")
            if cluster_ip and cluster_ip != "None":
                out.append({"type": "IPAddress", "value": cluster_ip})
        return out

    async def sync(self, intents: dict[str, ProxyIntent]) -> None:
        if intents != self.intents:
            self.intents = dict(intents)
            self._wake.set()

    def sync_ai(self, configs: dict[str, AIConfig]) -> None:
        """The AI config of each Gateway whose routes use an AI Backend (before `sync`)."""
        if configs != self.ai_configs:
            self.ai_configs = configs
            self._wake.set()

    def sync_mcp(self, configs: dict[str, MCPConfig]) -> None:
        """The MCP relay config of each Gateway whose routes use an MCP Backend (before `sync`)."""
        if configs != self.mcp_configs:
            self.mcp_configs = configs
            self._wake.set()

    def proxy_state(self, ref: str) -> str | None:
        """"" when the proxy's Pods are ready, else why not (None: nothing known yet)."""
        if ref in self.errors:
            return f"cannot deploy the proxy: {self.errors[ref]}"
        dep = self.deployments.get(ref)
        if dep is None:
            return None
        return self._readiness(dep)

    async def close(self) -> None:
        self.stop_writing()

    def describe(self) -> list[dict[str, Any]]:
        """The proxy of each Gateway, for the admin API (`lychgate get gateways`)."""
        out = []
        for ref in sorted(set(self.intents) | set(self.deployments)):
            dep = self.deployments.get(ref)
            status = (dep or {}).get("status") or {}
            out.append({
                "gateway": ref,
                "deployment": ref if dep else None,
                "readyReplicas": status.get("readyReplicas") or 0,
                "replicas": status.get("replicas") or 0,
                "state": self.proxy_state(ref),
                "admin": "",  # kubectl -n <ns> port-forward deploy/<name> 19000
            })
        return out

    # --- leadership -------------------------------------------------------------------

    def resync(self) -> None:
        """Re-apply everything (after gaining leadership, or periodically)."""
        self.applied.clear()
        self._wake.set()

    def stop_writing(self) -> None:
        """Abandon the write in flight at once (leadership lost, shutdown)."""
        if self._work is not None and not self._work.done():
            self._work.cancel()

    # --- running ----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        watch = asyncio.create_task(self.informer.run(), name="watch-proxy-deployments")
        periodic = asyncio.create_task(self._periodic(stop))
        try:
            while not stop.is_set():
                await self._wait(stop)
                if stop.is_set():
                    break
                self._wake.clear()
                if not self.is_leader() or not self.store.synced:
                    continue
                self._work = asyncio.create_task(self._reconcile())
                try:
                    await self._work
                except asyncio.CancelledError:
                    me = asyncio.current_task()
                    if stop.is_set() or (me is not None and me.cancelling()):
                        raise
                    log.info("leadership lost: abandoned the proxy writes in flight")
                    self.applied.clear()
                except Exception:
                    log.exception("reconciling proxies failed; retrying")
                    self._retry_later()
        finally:
            self.stop_writing()
            for task in (watch, periodic):
                task.cancel()
            await asyncio.gather(watch, periodic, return_exceptions=True)

    async def _wait(self, stop: asyncio.Event) -> None:
        waiters = [asyncio.create_task(self._wake.wait()), asyncio.create_task(stop.wait())]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    async def _periodic(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.sleep(self.resync_seconds)
            self.resync()

    def _retry_later(self) -> None:
        delay = self._backoff.next()

        def again() -> None:
            self._wake.set()

        asyncio.get_running_loop().call_later(delay, again)

    async def _reconcile(self) -> None:
        failed = False
        deployed: set[str] = set()
        for ref, intent in sorted(self.intents.items()):
            if not self.is_leader():
                return
            gateway = self.store.get(Gateway, intent.namespace, intent.name)
            if gateway is None:
                continue
            # Merged and checked by translation (translate/parameters.py), installation's layer included.
            params = intent.parameters
            ai = self.ai_configs.get(ref)
            mcp = self.mcp_configs.get(ref)
            conflict = (ai_container.port_conflict(params, ai, intent.ports)
                        or (mcp_container.port_conflict(intent.ports) if mcp is not None else None))
            if conflict is not None:
                self._set_error(ref, conflict)
                continue
            deployed.add(ref)
            objs = manifests.proxy_objects(gateway, params, intent.ports, self.ctx, intent.udp_ports, ai, mcp)
            digest = _digest(objs)
            if self.applied.get(ref) == digest:
                continue
            # Translation checked the objects the overlays make; these are the ones written, with
            # the AI extension's and MCP relay's containers an overlay may patch too.
            invalid = overlays.problem(params.spec.kube, objs) if params is not None else None
            if params is not None and invalid is not None:
                self._set_error(ref, f"GatewayParameters {params.namespace}/{params.name}: {invalid}")
                continue
            try:
                # Pruned first and the Deployment applied last: once it is written nothing
                # awaits before `applied` is set, so its deletion by hand is never missed.
                kinds = {o["kind"] for o in objs}
                await self._prune(gateway.namespace, [(r, n) for r, n in _owned(gateway.name, OPTIONAL_OBJECTS)
                                                      if r.kind not in kinds])
                await self._apply(gateway, objs)
            except NotLeader:
                return
            except DeployError as err:
                self._set_error(ref, str(err))
                continue
            except Exception as err:  # transport trouble, 5xx, 409, 429: try again soon
                log.warning("Gateway %s: writing its proxy failed (%s); retrying", ref, describe_error(err))
                failed = True
                continue
            self.applied[ref] = digest
            if self.errors.pop(ref, None) is not None:
                self.notify()
            log.info("applied the proxy of Gateway %s (%s)", ref, ", ".join(o["kind"] for o in objs))
        for ref in sorted((set(self.deployments) | set(self.applied)) - deployed):
            if not self.is_leader():
                return
            if self.keep(ref):
                continue
            await self._delete(ref)
        if failed:
            self._retry_later()
        else:
            self._backoff.reset()

    def _set_error(self, ref: str, message: str) -> None:
        if self.errors.get(ref) != message:
            log.error("Gateway %s: cannot deploy its proxy: %s", ref, message)
            self.errors[ref] = message
            self.notify()
        self.applied.pop(ref, None)

    def _gateway_is_ours(self, ref: str) -> bool:
        ns, name = _split(ref)
        gateway = self.store.get(Gateway, ns, name)
        if gateway is None:
            return False
        gc = self.store.get(GatewayClass, "", gateway.spec.gateway_class_name)
        return gc is not None and gc.spec.controller_name == CONTROLLER_NAME

    # --- writes -----------------------------------------------------------------------

    def _check_leader(self) -> None:
        if not self.is_leader():
            raise NotLeader

    async def _apply(self, gateway: Gateway, objs: list[dict[str, Any]]) -> None:
        for obj in objs:
            res = BY_KIND[obj["kind"]]
            name = obj["metadata"]["name"]
            self._check_leader()
            try:
                live = await self.client.get(res.cls, name, namespace=gateway.namespace)
            except Exception as err:
                if error_code(err) != 404:
                    raise
            else:
                if not _controlled_by(plain(live), None):
                    raise DeployError(
                        f"{res.kind} {gateway.namespace}/{name} already exists and is not "
                        "managed by lychgate; delete it or rename the Gateway")
            self._check_leader()
            try:
                await self.client.patch(
                    res.cls, name, obj, namespace=gateway.namespace,
                    patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True,
                )
            except Exception as err:
                code = error_code(err)
                if code is not None and code not in (409, 429) and code < 500:
                    raise DeployError(f"the API server rejected {res.kind} "
                                      f"{gateway.namespace}/{name}: {describe_error(err)}") from None
                raise

    async def _prune(self, ns: str, objects: list[tuple[ApiResource, str]]) -> bool:
        """Delete these (kind, name) of the proxy that lychgate made; False if one could not be read."""
        for res, name in objects:
            self._check_leader()
            try:
                live = plain(await self.client.get(res.cls, name, namespace=ns))
            except Exception as err:
                if error_code(err) == 404:
                    continue
                if res in OPTIONAL and error_code(err) is not None:
                    continue  # e.g. no VerticalPodAutoscaler CRD in this cluster: nothing to remove
                log.warning("cannot read %s %s/%s to delete it: %s", res.kind, ns, name, describe_error(err))
                self._retry_later()
                return False
            labels = (live.get("metadata") or {}).get("labels") or {}
            if labels.get(manifests.MANAGED_BY_LABEL) != manifests.MANAGED_BY or not _controlled_by(live, None):
                continue
            with contextlib.suppress(Exception):
                await self.client.delete(res.cls, name, namespace=ns)
        return True

    async def _delete(self, ref: str) -> None:
        ns, name = _split(ref)
        try:
            if not await self._prune(ns, _owned(name, (*OPTIONAL_OBJECTS, DEPLOYMENT, SERVICE, CONFIG_MAP,
                                                       SERVICE_ACCOUNT))):
                return
        except NotLeader:
            return
        self.applied.pop(ref, None)
        self.errors.pop(ref, None)
        self.deployments.pop(ref, None)
        log.info("deleted the proxy of Gateway %s: it is no longer a lychgate Gateway", ref)

    # --- the Deployment watch -------------------------------------------------------------

    def _on_list(self, items: list[dict[str, Any]]) -> None:
        fresh = {}
        for obj in items:
            meta = obj.get("metadata") or {}
            fresh[_ref(meta.get("namespace", ""), meta.get("name", ""))] = obj
        for ref in set(self.deployments) - set(fresh):
            self._on_event("DELETED", self.deployments[ref])
        for obj in fresh.values():
            self._on_event("MODIFIED", obj)

    def _on_event(self, type_: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        ref = _ref(meta.get("namespace", ""), meta.get("name", ""))
        if type_ == "DELETED":
            self.deployments.pop(ref, None)
            if ref in self.intents:
                self.applied.pop(ref, None)  # deleted by hand: put it back
                self._wake.set()
            summary = ""
        else:
            self.deployments[ref] = obj
            summary = self._readiness(obj)
        if self._ready.get(ref) != summary:
            self._ready[ref] = summary
            self.notify()

    @staticmethod
    def _readiness(dep: dict[str, Any]) -> str:
        status = dep.get("status") or {}
        want = (dep.get("spec") or {}).get("replicas", 1)
        ready = status.get("readyReplicas") or 0
        if ready >= 1:
            return ""
        name = f"{(dep.get('metadata') or {}).get('namespace')}/{(dep.get('metadata') or {}).get('name')}"
        why = ""
        for cond in status.get("conditions") or []:
            if cond.get("status") == "False" and cond.get("message"):
                why = f": {cond['message']}"
                break
        return f"waiting for Deployment {name}: {ready} of {want} replicas ready{why}"
