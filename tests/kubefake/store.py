"""The API server's storage and write semantics, without HTTP.

One global, monotonically increasing resourceVersion (like etcd's revision) is
stamped on every committed change; every change is also appended to a bounded
event history that watches replay from. Writes that change nothing are not
committed (no new resourceVersion, no watch event), as upstream.

Objects are kept in their storage version; the HTTP layer rewrites `apiVersion`
for the version a client asked for (all served versions of a CRD share storage,
like a CRD with conversion strategy None).
"""

from __future__ import annotations

import builtins
import copy
import random
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from . import errors, fields
from .defaults import Allocator
from .resources import Registry, ResourceType, crd_object, type_from_crd
from .validation import Validator, validate

Obj = dict[str, Any]
Key = tuple[str, str]  # (group, plural)

CRD_KEY: Key = ("apiextensions.k8s.io", "customresourcedefinitions")
NAMESPACE_KEY: Key = ("", "namespaces")
GC_MANAGER = "kube-controller-manager"


@dataclass(frozen=True)
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    key: Key
    obj: Obj  # the object after the change (the last state, for DELETED)
    old: Obj | None  # the object before it (None for ADDED)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    return meta


def _no_resource_version(meta: Obj) -> None:
    # etcd3 store Create: a (parseable, non-zero) resourceVersion means the object
    # was copied from a read; upstream answers with a plain 500.
    try:
        rv = int(meta.get("resourceVersion") or 0)
    except ValueError:
        rv = 0
    if rv:
        raise errors.ApiError(500, "InternalError", "resourceVersion should not be set on objects to be created")


def _content(obj: Obj, rt: ResourceType) -> Obj:
    """What metadata.generation tracks: everything but metadata (and status, when it
    has its own subresource)."""
    skip = {"metadata", "apiVersion", "kind"} | ({"status"} if rt.status else set())
    return {k: v for k, v in obj.items() if k not in skip}


def _without_times(obj: Obj) -> Obj:
    """For no-op detection: managedFields timestamps alone are not a change."""
    o = copy.deepcopy(obj)
    for m in _meta(o).get("managedFields") or []:
        m.pop("time", None)
    return o


class Store:
    def __init__(self, registry: Registry, *, history_size: int = 1000, enforce_namespaces: bool = True) -> None:
        self.registry = registry
        self.history_size = history_size
        self.enforce_namespaces = enforce_namespaces
        self.rv = 0
        self.compacted_rv = 0  # watches from an rv below this get 410 Expired
        self.history: deque[Event] = deque()
        self.alloc = Allocator()
        self.subscribers: list[Callable[[Event], None]] = []
        self.validators: dict[Key, list[Validator]] = {}
        self.changes: Counter[tuple[str, str, str, str, str]] = Counter()
        self._objects: dict[Key, dict[tuple[str, str], Obj]] = {}
        self._uids: dict[str, tuple[Key, str, str]] = {}

    # --- reads ------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self._objects.get(rt.key, {}).get((namespace, name))
        if obj is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return copy.deepcopy(obj)

    def find(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        obj = self._objects.get(rt.key, {}).get((namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, rt: ResourceType, namespace: str | None = None) -> list[Obj]:
        objs = self._objects.get(rt.key, {})
        # etcd key order: /registry/<resource>/<namespace>/<name>
        return [copy.deepcopy(objs[k]) for k in sorted(objs) if namespace is None or k[0] == namespace]

    def events_after(self, rv: int) -> Iterator[Event]:
        return (e for e in list(self.history) if e.rv > rv)

    # --- commit -----------------------------------------------------------------------

    def _commit(self, rt: ResourceType, type_: str, obj: Obj, old: Obj | None, sub: str = "") -> Obj:
        self.rv += 1
        meta = _meta(obj)
        meta["resourceVersion"] = str(self.rv)
        ns, name = meta.get("namespace", ""), meta["name"]
        bucket = self._objects.setdefault(rt.key, {})
        if type_ == "DELETED":
            bucket.pop((ns, name), None)
            self._uids.pop(meta.get("uid", ""), None)
        else:
            bucket[(ns, name)] = obj
            self._uids[meta["uid"]] = (rt.key, ns, name)
        self.changes[(rt.group, rt.plural, ns, name, sub)] += 1
        event = Event(self.rv, type_, rt.key, copy.deepcopy(obj), copy.deepcopy(old) if old else None)
        self.history.append(event)
        while len(self.history) > self.history_size:
            self.compacted_rv = self.history.popleft().rv
        for notify in list(self.subscribers):
            notify(event)
        return copy.deepcopy(obj)

    def compact(self) -> None:
        """Forget all history, as an etcd compaction does: any watch that resumes
        from a resourceVersion older than now gets 410 Expired."""
        self.history.clear()
        self.compacted_rv = self.rv

    # --- helpers ----------------------------------------------------------------------

    def _check_namespace(self, rt: ResourceType, namespace: str) -> None:
        if not rt.namespaced or not self.enforce_namespaces:
            return
        if ("", namespace) not in self._objects.get(NAMESPACE_KEY, {}):
            raise errors.not_found("", "namespaces", namespace)

    def _check_gvk(self, rt: ResourceType, body: Obj, version: str) -> None:
        want = rt.api_version(version)
        if body.get("apiVersion") and body["apiVersion"] != want:
            raise errors.bad_request(
                f"the API version in the data ({body['apiVersion']}) does not match the expected API version ({want})"
            )
        if body.get("kind") and body["kind"] != rt.kind:
            raise errors.bad_request(f"the kind in the data ({body['kind']}) does not match the expected kind ({rt.kind})")
        body["apiVersion"] = rt.api_version(rt.storage_version)
        body["kind"] = rt.kind

    def _scope(self, rt: ResourceType, sub: str) -> fields.Scope:
        if sub == "status":
            return "status"
        return "main" if rt.status else "all"

    def _validate(self, rt: ResourceType, obj: Obj) -> None:
        validate(rt, obj, self.validators.get(rt.key, []))

    # --- create -----------------------------------------------------------------------

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        body: Obj,
        *,
        version: str,
        manager: str,
        dry_run: bool = False,
        applied: bool = False,
    ) -> Obj:
        obj = copy.deepcopy(body)
        self._check_gvk(rt, obj, version)
        meta = _meta(obj)
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        _no_resource_version(meta)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise errors.invalid(rt.group, rt.kind, "", [("metadata.name", "Required value: name or generateName is required")])
            suffix = "".join(random.choices("bcdfghjklmnpqrstvwxz2456789", k=5))
            meta["name"] = meta["generateName"] + suffix
        self._check_namespace(rt, namespace)
        if self.find(rt, namespace if rt.namespaced else "", meta["name"]) is not None:
            raise errors.already_exists(rt.group, rt.plural, meta["name"])
        now = now_rfc3339()
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(k, None)
        if rt.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if rt.status:
            obj.pop("status", None)  # status is only written through /status
        if rt.defaulter is not None:
            rt.defaulter(rt, obj, None, self.alloc)
        self._validate(rt, obj)
        if rt.key == CRD_KEY:
            self._crd_type(obj)  # validate before committing
        if not applied:
            meta.pop("managedFields", None)
            fields.record_update(None, obj, manager=manager, lists=rt.list_types, scope=self._scope(rt, ""),
                                 api_version=rt.api_version(version), now=now)
        if dry_run:
            return obj
        out = self._commit(rt, "ADDED", obj, None)
        if rt.key == CRD_KEY:
            self._install(obj)
        self._collect_dangling(rt, out)
        return self.find(rt, namespace if rt.namespaced else "", meta["name"]) or out

    # --- update (PUT, patch results, apply results) ------------------------------------

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Obj,
        *,
        sub: str,
        version: str,
        manager: str,
        dry_run: bool = False,
        applied: bool = False,
    ) -> Obj:
        """Replace an object with `body` (PUT semantics; patches and applies end
        here with the patched object). A resourceVersion in `body` must be current."""
        ns = namespace if rt.namespaced else ""
        old = self.get(rt, ns, name)
        new = copy.deepcopy(body)
        self._check_gvk(rt, new, version)
        meta, old_meta = _meta(new), _meta(old)
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        if rt.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
        rv = meta.get("resourceVersion")
        if rv and rv != old_meta["resourceVersion"]:
            raise errors.conflict(rt.group, rt.plural, name, errors.STALE)
        if meta.get("uid") and meta["uid"] != old_meta["uid"]:
            raise errors.conflict(rt.group, rt.plural, name,
                                  f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {old_meta['uid']}")

        if sub == "status":
            # Only .status is taken from a status write (CRD and built-in status strategies).
            candidate = copy.deepcopy(old)
            if new.get("status") is None:
                candidate.pop("status", None)
            else:
                candidate["status"] = new["status"]
            if applied:
                _meta(candidate)["managedFields"] = meta.get("managedFields", [])
            new, meta = candidate, _meta(candidate)
        else:
            for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
                if k in old_meta:
                    meta[k] = old_meta[k]
                else:
                    meta.pop(k, None)
            meta["name"] = name
            if rt.namespaced:
                meta["namespace"] = namespace
            if not applied:
                meta["managedFields"] = old_meta.get("managedFields", [])
            if rt.status:
                if old.get("status") is None:
                    new.pop("status", None)
                else:
                    new["status"] = old["status"]  # the main endpoint ignores .status
        meta.pop("resourceVersion", None)
        if old_meta.get("deletionTimestamp") and set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or []):
            raise errors.invalid(rt.group, rt.kind, name, [
                ("metadata.finalizers", "Forbidden: no new finalizers can be added if the object is being deleted")])
        if rt.defaulter is not None:
            rt.defaulter(rt, new, old, self.alloc)
        self._validate(rt, new)
        if rt.generation and _content(new, rt) != _content(old, rt):
            meta["generation"] = int(old_meta.get("generation", 0)) + 1
        now = now_rfc3339()
        if not applied:
            fields.record_update(old, new, manager=manager, lists=rt.list_types, scope=self._scope(rt, sub),
                                 api_version=rt.api_version(version), now=now)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if _without_times(new) == _without_times(old):
            return old  # a no-op write: no new resourceVersion, no event
        if dry_run:
            return new
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(rt, new, "Background")  # the last finalizer is gone
        out = self._commit(rt, "MODIFIED", new, old, sub)
        if rt.key == CRD_KEY:
            self._install(out)
        self._collect_dangling(rt, out)
        return self.find(rt, ns, name) or out

    def apply(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        config: Obj,
        *,
        sub: str,
        version: str,
        manager: str,
        force: bool,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """Server-side apply; returns (object, created)."""
        if not config.get("apiVersion") or not config.get("kind"):
            raise errors.bad_request("apiVersion and kind must be set in an apply configuration")
        self._check_gvk(rt, dict(config), version)
        cmeta = config.get("metadata") or {}
        if cmeta.get("name") and cmeta["name"] != name:
            raise errors.bad_request(f"the name of the object ({cmeta['name']}) does not match the name on the URL ({name})")
        ns = namespace if rt.namespaced else ""
        live = self.find(rt, ns, name)
        now = now_rfc3339()
        api_version = rt.api_version(version)
        ident = (name, rt.group, rt.plural)
        if live is None:
            if sub == "status":
                raise errors.not_found(rt.group, rt.plural, name)
            _no_resource_version(cmeta)
            obj = fields.server_side_apply(None, config, manager=manager, force=force, lists=rt.list_types,
                                           scope=self._scope(rt, ""), api_version=api_version, now=now, ident=ident)
            obj.update(apiVersion=config["apiVersion"], kind=config["kind"])
            meta = _meta(obj)
            meta["name"] = name
            if rt.namespaced:
                meta["namespace"] = namespace
            return self.create(rt, namespace, obj, version=version, manager=manager, dry_run=dry_run, applied=True), True
        rv = cmeta.get("resourceVersion")
        if rv and rv != _meta(live)["resourceVersion"]:
            raise errors.conflict(rt.group, rt.plural, name, errors.STALE)
        obj = fields.server_side_apply(live, config, manager=manager, force=force, lists=rt.list_types,
                                       scope=self._scope(rt, sub), api_version=api_version, now=now, ident=ident)
        _meta(obj).pop("resourceVersion", None)
        obj["apiVersion"] = api_version  # live is in storage form; the write is in `version`
        return self.update(rt, namespace, name, obj, sub=sub, version=version, manager=manager,
                           dry_run=dry_run, applied=True), False

    # --- delete -----------------------------------------------------------------------

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        propagation: str | None = None,
        preconditions: Obj | None = None,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """Returns (object, gone). With finalizers the object is only marked
        (deletionTimestamp) and stays until an update empties its finalizers."""
        ns = namespace if rt.namespaced else ""
        obj = self.get(rt, ns, name)
        meta = _meta(obj)
        pre = preconditions or {}
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            raise errors.conflict(rt.group, rt.plural, name,
                                  f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            raise errors.conflict(rt.group, rt.plural, name,
                                  f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                                  f"ResourceVersion in object meta: {meta['resourceVersion']}")
        if dry_run:
            return obj, True
        finalizers = meta.get("finalizers") or []
        foreground = propagation == "Foreground" and bool(self._dependents(meta["uid"]))
        if not finalizers and not foreground:
            return self._remove(rt, obj, propagation or "Background"), True
        if meta.get("deletionTimestamp"):
            return obj, False
        # Graceful path: mark the object; it goes when its last finalizer does.
        old = copy.deepcopy(obj)
        meta["deletionTimestamp"] = now_rfc3339()
        meta["deletionGracePeriodSeconds"] = 0
        if foreground:
            meta["finalizers"] = [*finalizers, "foregroundDeletion"]
        if rt.generation:
            meta["generation"] = int(meta.get("generation", 0)) + 1
        marked = self._commit(rt, "MODIFIED", obj, old)
        if not foreground:
            return marked, False
        # Foreground: dependents go first, then the GC drops its finalizer.
        self._collect_dependents(meta["uid"], "Foreground")
        cur = self.find(rt, ns, name)
        if cur is None:
            return marked, True
        _meta(cur)["finalizers"] = [f for f in _meta(cur).get("finalizers") or [] if f != "foregroundDeletion"]
        result = self.update(rt, ns, name, cur, sub="", version=rt.storage_version, manager=GC_MANAGER)
        return result, self.find(rt, ns, name) is None

    def _remove(self, rt: ResourceType, obj: Obj, propagation: str) -> Obj:
        meta = _meta(obj)
        out = self._commit(rt, "DELETED", obj, copy.deepcopy(obj))
        if rt.key == NAMESPACE_KEY:
            # Simplified namespace controller: contents go synchronously.
            for other in self.registry:
                if other.namespaced:
                    for o in self.list(other, meta["name"]):
                        self.delete(other, meta["name"], _meta(o)["name"], propagation="Background")
        if rt.key == CRD_KEY:
            self._uninstall(obj)
        self._collect_dependents(meta["uid"], propagation)
        return out

    # --- garbage collection ----------------------------------------------------------

    def _owner_state(self, dependent: Obj, ref: Obj) -> str:
        """'solid' (owner exists), 'dangling' (it does not), 'deleting' (foreground
        deletion in progress) or 'unknown' (kind not served)."""
        owner_rt = self.registry.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
        if owner_rt is None:
            return "unknown"
        ns = _meta(dependent).get("namespace", "") if owner_rt.namespaced else ""
        owner = self._objects.get(owner_rt.key, {}).get((ns, ref.get("name", "")))
        if owner is None or _meta(owner).get("uid") != ref.get("uid"):
            return "dangling"
        if "foregroundDeletion" in (_meta(owner).get("finalizers") or []):
            return "deleting"  # an owner waiting for its dependents does not keep them
        return "solid"

    def _gc_update(self, key: Key, ns: str, name: str, refs: builtins.list[Obj]) -> None:
        rt = self.registry.get(*key)
        obj = self._objects.get(key, {}).get((ns, name))
        if rt is None or obj is None:
            return
        new = copy.deepcopy(obj)
        if refs:
            _meta(new)["ownerReferences"] = refs
        else:
            _meta(new).pop("ownerReferences", None)
        version = rt.storage_version
        self.update(rt, ns, name, new, sub="", version=version, manager=GC_MANAGER)

    def _collect(self, key: Key, ns: str, name: str, propagation: str = "Background") -> None:
        """One pass of the garbage collector over one object."""
        rt = self.registry.get(*key)
        obj = self._objects.get(key, {}).get((ns, name))
        if rt is None or obj is None:
            return
        refs = _meta(obj).get("ownerReferences") or []
        if not refs:
            return
        states = [self._owner_state(obj, r) for r in refs]
        if "solid" not in states and "unknown" not in states:
            self.delete(rt, ns, name, propagation=propagation)
        elif "dangling" in states or "deleting" in states:
            # Another owner keeps it: only the references to gone/going owners are dropped.
            keep = [r for r, s in zip(refs, states, strict=True) if s in ("solid", "unknown")]
            self._gc_update(key, ns, name, keep)

    def _dependents(self, owner_uid: str) -> builtins.list[tuple[Key, tuple[str, str]]]:
        return [
            (key, k)
            for key, bucket in self._objects.items()
            for k, o in bucket.items()
            if any(r.get("uid") == owner_uid for r in _meta(o).get("ownerReferences") or [])
        ]

    def _collect_dependents(self, owner_uid: str, propagation: str) -> None:
        for key, (ns, name) in self._dependents(owner_uid):
            if propagation == "Orphan":
                obj = self._objects.get(key, {}).get((ns, name))
                if obj is not None:
                    refs = [r for r in _meta(obj).get("ownerReferences") or [] if r.get("uid") != owner_uid]
                    self._gc_update(key, ns, name, refs)
            else:
                self._collect(key, ns, name, propagation)

    def _collect_dangling(self, rt: ResourceType, obj: Obj) -> None:
        meta = _meta(obj)
        if meta.get("ownerReferences"):
            self._collect(rt.key, meta.get("namespace", ""), meta["name"])

    # --- CRDs -------------------------------------------------------------------------

    def _crd_type(self, crd: Obj) -> ResourceType:
        try:
            rt = type_from_crd(crd)
        except (KeyError, ValueError) as e:
            raise errors.invalid("apiextensions.k8s.io", "CustomResourceDefinition",
                                 _meta(crd).get("name", ""), [("spec", str(e))]) from e
        if _meta(crd).get("name") != f"{rt.plural}.{rt.group}":
            raise errors.invalid("apiextensions.k8s.io", "CustomResourceDefinition", _meta(crd).get("name", ""),
                                 [("metadata.name", 'Invalid value: must be spec.names.plural+"."+spec.group')])
        return rt

    def _install(self, crd: Obj) -> None:
        rt = self._crd_type(crd)
        self.registry.add(rt)
        if not (crd.get("status") or {}).get("conditions"):
            # The apiextensions controller marks a CRD Established once it serves it.
            old = copy.deepcopy(crd)
            crd = copy.deepcopy(crd)
            crd["status"] = {
                "acceptedNames": crd["spec"]["names"],
                "storedVersions": [rt.storage_version],
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                     "lastTransitionTime": now_rfc3339(), "message": "no conflicts found"},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                     "lastTransitionTime": now_rfc3339(), "message": "the initial names have been accepted"},
                ],
            }
            crd_rt = self.registry.get(*CRD_KEY)
            assert crd_rt is not None
            self._commit(crd_rt, "MODIFIED", crd, old, "status")

    def _uninstall(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        key = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
        rt = self.registry.get(*key)
        if rt is None:
            return
        for o in self.list(rt):
            self._commit(rt, "DELETED", o, copy.deepcopy(o))
        self.registry.remove(*key)

    def register(self, rt: ResourceType) -> None:
        """Serve a new type; custom types also get their CRD object, as in a cluster."""
        self.registry.add(rt)
        crd_rt = self.registry.get(*CRD_KEY)
        if rt.builtin or crd_rt is None:
            return
        crd = crd_object(rt)
        existing = self.find(crd_rt, "", crd["metadata"]["name"])
        if existing is None:
            self.create(crd_rt, "", crd, version="v1", manager="kubefake")
        self.registry.add(rt)  # keep the caller's richer type (defaulter, list table)

    def install_crd(self, crd: Obj) -> ResourceType:
        crd_rt = self.registry.get(*CRD_KEY)
        assert crd_rt is not None
        name = _meta(crd).get("name", "")
        existing = self.find(crd_rt, "", name)
        if existing is None:
            self.create(crd_rt, "", crd, version="v1", manager="kubefake")
        else:
            body = copy.deepcopy(crd)
            self.update(crd_rt, "", name, body, sub="", version="v1", manager="kubefake")
        rt = self.registry.get(*self._crd_type(crd).key)
        assert rt is not None
        return rt
