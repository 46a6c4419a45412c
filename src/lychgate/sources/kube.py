"""Kubernetes source: list + watch every kind lychgate reads, into the store.

One `Informer` per kind keeps a list+watch alive: it lists, watches from the
list's resourceVersion, re-watches when the server ends a stream (lightkube
does that itself), relists from scratch when the server answers 410 Gone
(history compacted), and reconnects with jittered exponential backoff on any
other failure. A kind whose CRD is not installed is retried every
`MISSING_KIND_RETRY` seconds without holding up the rest.

`KubeSource` turns the informers' objects into the same typed objects the file
source produces and writes them to the same Store. Only namespaces selected by
`discoveryNamespaceSelectors` are discovered: an object in another namespace is
kept aside (raw) and enters the store when its namespace's labels start to
match. `store.synced` is set once every kind has been listed once.

What the store gets is the object without its noise: no resourceVersion or
managedFields, and no status except a Service's (its load balancer address
matters). So status that lychgate itself writes does not cause another
translation pass; the raw objects (with status and resourceVersion) stay
available to the status writer through `KubeSource.raw()`.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from lychgate.api.base import ObjectKey, Resource
from lychgate.api.core import Namespace
from lychgate.api.registry import KINDS, ManifestError, parse
from lychgate.api.selectors import matches
from lychgate.kubeapi import ApiResource, Backoff, describe_error, error_code, for_model, plain
from lychgate.log import component_logger
from lychgate.store import Refusal, Store

log = component_logger("sources")

MISSING_KIND_RETRY = 30.0
# The API server ends each watch after this many seconds (randomised, as client-go
# does) so that connections are refreshed regularly.
WATCH_TIMEOUT = (240, 360)
LIST_CHUNK = 500
# Kinds whose status translation reads (a load balancer address, a Pod's IP and
# readiness); every other kind's status is dropped.
KEEP_STATUS = frozenset({"Service", "Pod"})

Raw = dict[str, Any]


class Informer:
    """list + watch of one resource, delivering plain dicts, until cancelled.

    `on_list(items)` receives the complete current set after each (re)list,
    `on_event(type, obj)` each watch event (ADDED, MODIFIED, DELETED).
    """

    def __init__(
        self,
        client: Any,
        resource: ApiResource,
        on_list: Callable[[list[Raw]], None],
        on_event: Callable[[str, Raw], None],
        *,
        labels: dict[str, Any] | None = None,
        fields: dict[str, Any] | None = None,
        missing_retry: float = MISSING_KIND_RETRY,
    ) -> None:
        self.client = client
        self.resource = resource
        self.on_list = on_list
        self.on_event = on_event
        self.labels = labels
        self.fields = fields
        self.missing_retry = missing_retry
        self.synced = asyncio.Event()
        self.served = True
        self.resource_version: str | None = None
        self.lists = 0
        self._backoff = Backoff()

    def _qualified(self) -> str:
        r = self.resource
        return f"{r.plural}.{r.group}" if r.group else r.plural

    def _scope(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"namespace": "*"} if self.resource.namespaced else {}
        if self.labels:
            kw["labels"] = self.labels
        if self.fields:
            kw["fields"] = self.fields
        return kw

    async def _list(self) -> None:
        listing = self.client.list(self.resource.cls, chunk_size=LIST_CHUNK, **self._scope())
        items: list[Raw] = []
        async for item in listing:
            obj = plain(item)
            # Items of built-in lists carry no apiVersion/kind on the wire.
            obj.setdefault("apiVersion", self.resource.api_version)
            obj.setdefault("kind", self.resource.kind)
            items.append(obj)
        rv = listing.resourceVersion
        self.lists += 1
        self._deliver_list(items)
        self.resource_version = rv
        if not self.served:
            log.info("%s is served now; watching it", self.resource.plural)
        self.served = True
        self.synced.set()

    def _deliver_list(self, items: list[Raw]) -> None:
        try:
            self.on_list(items)
        except Exception:
            log.exception("handling the list of %s failed", self.resource.plural)

    async def _watch(self) -> None:
        async for type_, item in self.client.watch(
            self.resource.cls, resource_version=self.resource_version,
            server_timeout=random.randint(*WATCH_TIMEOUT), **self._scope(),
        ):
            obj = plain(item)
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if type_ == "BOOKMARK":
                self.resource_version = rv or self.resource_version
                continue
            obj.setdefault("apiVersion", self.resource.api_version)
            obj.setdefault("kind", self.resource.kind)
            try:
                self.on_event(type_, obj)
            except Exception:
                log.exception("handling %s of %s failed", type_, self.resource.plural)
            self.resource_version = rv or self.resource_version
            self._backoff.reset()

    async def run(self) -> None:
        while True:
            try:
                if self.resource_version is None:
                    await self._list()
                    self._backoff.reset()
                await self._watch()
                # lightkube re-watches by itself when a stream ends; reaching here is rare.
            except asyncio.CancelledError:
                raise
            except Exception as err:
                code = error_code(err)
                if code == 410:
                    log.info("watch of %s expired (410 Gone: history compacted); relisting",
                             self.resource.plural)
                    self.resource_version = None
                    continue
                if code == 404 and self.resource_version is not None:
                    self.resource_version = None  # the kind went away while watched: list again
                    continue
                if code == 404:
                    if self.served:
                        log.warning("%s are not served by the API server (is the CRD installed?); "
                                    "retrying every %.0fs", self.resource.plural, self.missing_retry)
                    self.served = False
                    self._deliver_list([])  # nothing of a kind that does not exist
                    self.synced.set()
                    await asyncio.sleep(self.missing_retry)
                    continue
                if code == 403 and self.resource_version is None:
                    # Missing RBAC must not keep everything else from being served.
                    log.error("not allowed to list %s (%s); grant list and watch on %s, retrying every %.0fs",
                              self.resource.plural, describe_error(err), self._qualified(), self.missing_retry)
                    self.synced.set()
                    await asyncio.sleep(self.missing_retry)
                    continue
                delay = self._backoff.next()
                log.warning("watching %s failed (%s); retrying in %.1fs",
                            self.resource.plural, describe_error(err), delay)
                await asyncio.sleep(delay)


class SelectorError(ValueError):
    """A discoveryNamespaceSelectors entry that cannot be evaluated."""


def check_selectors(selectors: Sequence[dict[str, Any]]) -> None:
    """Reject selectors Kubernetes would reject, naming the entry and field."""
    for i, sel in enumerate(selectors):
        where = f"discoveryNamespaceSelectors[{i}]"
        if not isinstance(sel, dict):
            raise SelectorError(f"{where}: must be an object with matchLabels and/or matchExpressions")
        unknown = set(sel) - {"matchLabels", "matchExpressions"}
        if unknown:
            raise SelectorError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}; "
                                "use matchLabels and matchExpressions")
        labels = sel.get("matchLabels") or {}
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise SelectorError(f"{where}.matchLabels: must map label names to string values")
        for j, expr in enumerate(sel.get("matchExpressions") or []):
            at = f"{where}.matchExpressions[{j}]"
            if not isinstance(expr, dict) or not expr.get("key"):
                raise SelectorError(f"{at}: needs a key")
            op, values = expr.get("operator"), expr.get("values") or []
            if op in ("In", "NotIn"):
                if not values:
                    raise SelectorError(f"{at}: operator {op} needs at least one value")
            elif op in ("Exists", "DoesNotExist"):
                if values:
                    raise SelectorError(f"{at}: operator {op} takes no values")
            else:
                raise SelectorError(f"{at}: operator must be In, NotIn, Exists or DoesNotExist, not {op!r}")


def _normalize(raw: Raw) -> Raw:
    """The object as the store should see it: without write noise (see module doc)."""
    obj = dict(raw)
    meta = dict(obj.get("metadata") or {})
    meta.pop("resourceVersion", None)
    meta.pop("managedFields", None)
    obj["metadata"] = meta
    if obj.get("kind") not in KEEP_STATUS:
        obj.pop("status", None)
    return obj


class KubeSource:
    def __init__(
        self,
        client: Any,
        store: Store,
        namespace_selectors: Sequence[dict[str, Any]] = (),
        kinds: Sequence[type[Resource]] = KINDS,
        missing_retry: float = MISSING_KIND_RETRY,
    ) -> None:
        check_selectors(namespace_selectors)
        self.client = client
        self.store = store
        self.selectors = list(namespace_selectors)
        self.kinds = {k.KIND: k for k in kinds}
        if self.selectors and Namespace.KIND not in self.kinds:
            self.kinds[Namespace.KIND] = Namespace  # selectors need the namespaces' labels
        # kind -> namespace ("" when cluster-scoped) -> name -> raw object from the API
        self._raw: dict[str, dict[str, dict[str, Raw]]] = defaultdict(lambda: defaultdict(dict))
        self._ns_labels: dict[str, dict[str, str]] = {}
        self.synced = asyncio.Event()
        self.informers: dict[str, Informer] = {}
        for kind, model in self.kinds.items():
            resource = for_model(model)
            fields = None
            if kind == "Secret":
                # Helm keeps every release in a Secret; lychgate never needs them.
                from lightkube import operators

                fields = {"type": operators.not_equal("helm.sh/release.v1")}
            self.informers[kind] = Informer(
                client, resource, functools.partial(self._replace, kind),
                functools.partial(self._event, kind), fields=fields, missing_retry=missing_retry,
            )

    # --- reads --------------------------------------------------------------------

    def raw(self, key: ObjectKey) -> Raw | None:
        """The object as last seen from the API server (with status and resourceVersion)."""
        return self._raw.get(key.kind, {}).get(key.namespace, {}).get(key.name)

    def selected(self, namespace: str) -> bool:
        """Is this namespace discovered (discoveryNamespaceSelectors, OR-ed)?"""
        if not self.selectors:
            return True
        labels = self._ns_labels.get(namespace)
        if labels is None:
            return False
        return any(matches(sel, labels) for sel in self.selectors)

    def all_problems(self) -> list[dict[str, Any]]:
        """The objects the API server holds that lychgate refuses (the store keeps why)."""
        return [{"file": "api-server", "document": None, "object": str(k), "message": r.message, "severity": "error"}
                for k, r in sorted(self.store.refused.items())]

    # --- running ------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        tasks = {kind: asyncio.create_task(inf.run(), name=f"watch-{kind}")
                 for kind, inf in self.informers.items()}
        waiter = asyncio.create_task(self._wait_synced())
        try:
            await stop.wait()
        finally:
            waiter.cancel()
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(waiter, *tasks.values(), return_exceptions=True)

    async def _wait_synced(self) -> None:
        await asyncio.gather(*(inf.synced.wait() for inf in self.informers.values()))
        self.store.synced = True
        self.synced.set()
        scope = "all namespaces" if not self.selectors else \
            f"{sum(1 for ns in self._ns_labels if self.selected(ns))} selected namespaces"
        log.info("initial list done: %d objects of %d kinds in %s",
                 sum(1 for _ in self.store.all()), len(self.informers), scope)

    # --- events -------------------------------------------------------------------

    def _replace(self, kind: str, items: list[Raw]) -> None:
        """A (re)list: the complete current set of this kind."""
        fresh: dict[str, dict[str, Raw]] = defaultdict(dict)
        for obj in items:
            meta = obj.get("metadata") or {}
            fresh[meta.get("namespace") or ""][meta.get("name", "")] = obj
        old = self._raw[kind]
        for ns, names in list(old.items()):
            for name in list(names):
                if name not in fresh.get(ns, {}):
                    self._event(kind, "DELETED", names[name])
        for names in fresh.values():
            for obj in names.values():
                self._event(kind, "MODIFIED", obj)

    def _event(self, kind: str, type_: str, obj: Raw) -> None:
        meta = obj.get("metadata") or {}
        ns, name = meta.get("namespace") or "", meta.get("name") or ""
        key = ObjectKey(kind, ns, name)
        if type_ == "DELETED":
            self._raw[kind][ns].pop(name, None)
            if not self._raw[kind][ns]:
                del self._raw[kind][ns]
            self._forget(key)
        else:
            self._raw[kind][ns][name] = obj
            if kind != Namespace.KIND and ns and not self.selected(ns):
                self._forget(key)
            else:
                self._admit(key, obj)
        if kind == Namespace.KIND:
            self._namespace_changed(name, None if type_ == "DELETED" else (meta.get("labels") or {}))

    def _admit(self, key: ObjectKey, raw: Raw) -> None:
        normal = _normalize(raw)
        try:
            obj = parse(normal)
        except ManifestError as err:
            message = str(err)
            before = self.store.refused.get(key)
            if before is None or before.message != message:
                kept = " (the last valid version stays in use)" if self.store.get_key(key) else ""
                log.error("%s%s", message, kept)
            # The API server took it, so no one else tells the user: its status will
            # (status/invalid.py). Without status or resourceVersion (normalized), our own
            # status write coming back as a watch event refuses nothing new.
            generation = (normal.get("metadata") or {}).get("generation")
            self.store.refuse(key, Refusal(message, err.fields, generation if isinstance(generation, int) else 0,
                                           normal))
            return
        if key in self.store.refused:
            log.info("%s: problem resolved", key)
        self.store.unrefuse(key)
        self.store.upsert(obj)

    def _forget(self, key: ObjectKey) -> None:
        self.store.unrefuse(key)
        self.store.delete(key)

    def _namespace_changed(self, namespace: str, labels: dict[str, str] | None) -> None:
        if not self.selectors:
            return
        before = self.selected(namespace)
        if labels is None:
            self._ns_labels.pop(namespace, None)
        else:
            self._ns_labels[namespace] = dict(labels)
        after = self.selected(namespace)
        if before == after:
            return
        log.info("namespace %s is %s discovered", namespace, "now" if after else "no longer")
        for kind, by_ns in self._raw.items():
            if kind == Namespace.KIND:
                continue
            for name, obj in list(by_ns.get(namespace, {}).items()):
                key = ObjectKey(kind, namespace, name)
                if after:
                    self._admit(key, obj)
                else:
                    self._forget(key)
