"""The HTTP surface: Kubernetes REST paths, verbs, content types, watch streams.

Paths: /api/v1/..., /apis/<group>/<version>/..., optional namespaces/<ns>/,
<plural>[/<name>[/status]], the legacy /watch/ prefix, discovery, /version and
health endpoints. An unknown group/version answers a plain-text 404 (the API
server's NotFoundHandler); an unknown resource in a served group/version answers
a JSON Status 404, as upstream.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from aiohttp import web

from . import discovery, errors
from .errors import ApiError
from .patches import PatchError, json_patch, merge_patch, strategic_merge
from .resources import ResourceType
from .selectors import SelectorError, parse_fields, parse_labels
from .store import Obj, Store
from .watch import Watcher, present

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

log = logging.getLogger(__name__)


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings, as the API server's JSON model does."""


_YamlLoader.yaml_implicit_resolvers = {
    k: [r for r in v if r[0] != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _yaml_load(text: str) -> Any:
    return yaml.load(text, Loader=_YamlLoader)  # a SafeLoader subclass: safe


@dataclass
class RequestRecord:
    """One request as the server saw it (the request log for assertions)."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any
    user_agent: str
    verb: str = ""  # get, list, watch, create, update, patch, delete, deletecollection
    resource: str = ""  # qualified plural, e.g. "gateways.gateway.networking.k8s.io"
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    status: int = 0
    time: float = field(default_factory=time.monotonic)


@dataclass
class Target:
    rt: ResourceType
    version: str
    namespace: str | None
    name: str | None
    sub: str
    legacy_watch: bool


# (record) -> an error to answer instead, or None to proceed.
Reactor = Callable[[RequestRecord], ApiError | None]


def json_response(obj: Any, status: int = 200) -> web.Response:
    # Exactly "application/json": lightkube builds ApiError only for that header value.
    # ASCII-escaped so no U+2028-like character can split a watch line on the client.
    return web.Response(body=json.dumps(obj, separators=(",", ":")).encode(), status=status,
                        content_type="application/json")


def status_response(err: ApiError) -> web.Response:
    return json_response(err.status(), err.code)


def _flag(query: Any, name: str) -> bool:
    return str(query.get(name, "")).lower() in ("true", "1")


class Api:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.registry = store.registry
        self.requests: list[RequestRecord] = []
        self.reactors: list[Reactor] = []
        self.watchers: list[Watcher] = []
        self.bookmark_interval: float = 60.0
        self.address = ""
        self.internal_errors: list[Exception] = []

    # --- entry point ------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        rec = RequestRecord(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            content_type=request.headers.get("Content-Type", ""),
            body=_decode_for_log(raw),
            user_agent=request.headers.get("User-Agent", ""),
        )
        self.requests.append(rec)
        try:
            resp = await self._route(request, raw, rec)
        except ApiError as e:
            resp = status_response(e)
        except Exception as e:
            # A bug in the stand-in, not an API answer: keep it visible to the test.
            log.exception("kubefake failed on %s %s", request.method, request.path_qs)
            self.internal_errors.append(e)
            resp = status_response(ApiError(500, "InternalError", f"Internal error occurred: kubefake: {e!r}"))
        rec.status = resp.status
        return resp

    async def _route(self, request: web.Request, raw: bytes, rec: RequestRecord) -> web.StreamResponse:
        segs = [s for s in request.path.split("/") if s]
        if not segs:
            return json_response({"paths": ["/api", "/apis", "/version", "/healthz"]})
        if segs[0] in ("healthz", "livez", "readyz") and len(segs) == 1:
            return web.Response(text="ok")
        if segs == ["version"]:
            return json_response(discovery.version_info())
        if segs == ["api"]:
            return json_response(discovery.api_versions(self.address))
        if segs == ["apis"]:
            return json_response(discovery.api_group_list(self.registry))
        if segs[0] == "apis" and len(segs) == 2:
            group_doc = discovery.api_group(self.registry, segs[1])
            return json_response(group_doc) if group_doc else _page_not_found()
        if (segs[0] == "api" and len(segs) == 2) or (segs[0] == "apis" and len(segs) == 3):
            group, version = ("", segs[1]) if segs[0] == "api" else (segs[1], segs[2])
            doc = discovery.api_resource_list(self.registry, group, version)
            return json_response(doc) if doc else _page_not_found()
        target = self._target(segs)
        if target is None:
            return _page_not_found()
        return await self._dispatch(request, raw, rec, target)

    def _target(self, segs: list[str]) -> Target | None:
        if segs[0] == "api" and len(segs) >= 3:
            group, version, rest = "", segs[1], segs[2:]
        elif segs[0] == "apis" and len(segs) >= 4:
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            return None
        if version not in self.registry.group_versions().get(group, []):
            return None
        legacy_watch = rest[0] == "watch"
        if legacy_watch:
            rest = rest[1:]
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise errors.resource_not_found()
        rt = self.registry.served(group, version, rest[0])
        if rt is None:
            raise errors.resource_not_found()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if (namespace is not None and not rt.namespaced) or (rt.namespaced and name and namespace is None):
            raise errors.resource_not_found()
        if sub and (sub != "status" or not rt.status):
            raise errors.resource_not_found()
        return Target(rt, version, namespace, name, sub, legacy_watch)

    async def _dispatch(self, request: web.Request, raw: bytes, rec: RequestRecord, t: Target) -> web.StreamResponse:
        q = request.query
        method = request.method
        is_watch = t.legacy_watch or _flag(q, "watch")
        if t.name is None:
            verb = {"GET": "watch" if is_watch else "list", "POST": "create", "DELETE": "deletecollection"}.get(method)
        else:
            verb = {"GET": "watch" if is_watch else "get", "PUT": "update", "PATCH": "patch",
                    "DELETE": "delete"}.get(method)
        rec.verb, rec.resource, rec.subresource = verb or method.lower(), t.rt.qualified(), t.sub
        rec.namespace, rec.name = t.namespace or "", t.name or ""
        if verb is None:
            raise errors.method_not_allowed()
        if verb == "create":
            body = _body_object(raw, request.headers.get("Content-Type", ""))
            rec.name = (body.get("metadata") or {}).get("name", "")
        for react in list(self.reactors):
            err = react(rec)
            if err is not None:
                raise err
        if verb == "list":
            return self._list(t, q)
        if verb == "watch":
            return await self._watch(request, t, q)
        ns = t.namespace or ""
        dry_run = q.get("dryRun") == "All"
        manager = q.get("fieldManager") or _manager_from_agent(rec.user_agent)
        if len(manager) > 128:
            raise errors.invalid("meta.k8s.io", "PatchOptions", "", [("fieldManager", "Too long: may not be more than 128 bytes")])
        if verb == "get":
            return json_response(present(t.rt, self.store.get(t.rt, ns if t.rt.namespaced else "", t.name or ""), t.version))
        if verb == "create":
            created = self.store.create(t.rt, ns, body, version=t.version, manager=manager, dry_run=dry_run)
            return json_response(present(t.rt, created, t.version), 201)
        if verb == "deletecollection":
            return self._delete_collection(t, raw, q, dry_run)
        assert t.name is not None
        if verb == "update":
            body = _body_object(raw, request.headers.get("Content-Type", ""))
            updated = self.store.update(t.rt, ns, t.name, body, sub=t.sub, version=t.version, manager=manager,
                                        dry_run=dry_run)
            return json_response(present(t.rt, updated, t.version))
        if verb == "patch":
            return self._patch(t, raw, request.headers.get("Content-Type", ""), q, manager, dry_run)
        return self._delete(t, raw, q, dry_run)

    # --- list / watch -----------------------------------------------------------------

    def _selectors(self, t: Target, q: Any) -> tuple[Any, Any]:
        supported = ("metadata.name", "metadata.namespace", *t.rt.field_labels)
        try:
            labels = parse_labels(q.get("labelSelector", ""))
            fields_ = parse_fields(q.get("fieldSelector", ""), supported)
        except SelectorError as e:
            raise errors.bad_request(str(e)) from e
        if t.name is not None:  # GET .../<name>?watch=1 and the legacy /watch/.../<name>
            fields_ = [*fields_, *parse_fields(f"metadata.name={t.name}", supported)]
        return labels, fields_

    def _list(self, t: Target, q: Any) -> web.Response:
        labels, fields_ = self._selectors(t, q)
        rv = q.get("resourceVersion", "")
        if rv not in ("", "0"):
            n = _parse_rv(rv)
            if n > self.store.rv:
                raise ApiError(504, "Timeout", f"Too large resource version: {n}, current: {self.store.rv}",
                               {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                                "retryAfterSeconds": 1})
            if q.get("resourceVersionMatch") == "Exact" and n < self.store.compacted_rv:
                raise errors.expired(f"too old resource version: {n} ({self.store.compacted_rv})")
        watcher = Watcher(t.rt, t.version, t.namespace, labels, fields_, False)
        items = [o for o in self.store.list(t.rt, t.namespace) if watcher.matches(o)]
        list_rv = self.store.rv
        start: list[str] | None = None
        if q.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(q["continue"].encode()))
                list_rv, start = int(token["rv"]), list(token["start"])
            except (ValueError, KeyError, TypeError) as e:
                raise errors.bad_request(f"continue key is not valid: {e}") from e
            if list_rv < self.store.compacted_rv:
                raise errors.expired("The provided continue parameter is too old to display a consistent list result. "
                                     "You can start a new list without the continue parameter.")
            items = [o for o in items if _pos(o) > tuple(start)]
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        limit = _parse_int(q.get("limit") or "0", "limit")
        if limit > 0 and len(items) > limit:
            rest = len(items) - limit
            items = items[:limit]
            token = {"rv": list_rv, "start": list(_pos(items[-1]))}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
            meta["remainingItemCount"] = rest
        out_items = []
        for o in items:
            item = present(t.rt, o, t.version)
            if not t.rt.list_item_gvk:
                item.pop("apiVersion", None)
                item.pop("kind", None)
            out_items.append(item)
        return json_response({"kind": t.rt.list_kind, "apiVersion": t.rt.api_version(t.version),
                              "metadata": meta, "items": out_items})

    async def _watch(self, request: web.Request, t: Target, q: Any) -> web.StreamResponse:
        labels, fields_ = self._selectors(t, q)
        rv = q.get("resourceVersion", "")
        send_initial = _flag(q, "sendInitialEvents")
        if send_initial and q.get("resourceVersionMatch") != "NotOlderThan":
            raise errors.invalid("meta.k8s.io", "ListOptions", "", [
                ("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for watch unless "
                                      "resourceVersionMatch is set to NotOlderThan")])
        # 0 (like absent) means the server's own default: here, no timeout.
        timeout = float(_parse_int(q["timeoutSeconds"], "timeoutSeconds")) if q.get("timeoutSeconds") else None
        timeout = timeout or None
        w = Watcher(t.rt, t.version, t.namespace, labels, fields_, _flag(q, "allowWatchBookmarks"),
                    transport=request.transport)
        expired: ApiError | None = None
        # Everything up to the subscription runs without awaiting, so no event can
        # slip between the initial state/replay and the live stream.
        if rv in ("", "0") or send_initial:
            for o in self.store.list(t.rt, t.namespace):
                if w.matches(o):
                    w.send("ADDED", o)
            if send_initial:
                w.bookmark(self.store.rv, initial_events_end=True)
        else:
            n = _parse_rv(rv)
            if n < self.store.compacted_rv:
                expired = errors.expired(f"too old resource version: {n} ({self.store.compacted_rv})")
            else:
                for ev in self.store.events_after(n):
                    w.offer(ev)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        if expired is not None:
            # A watch that cannot be served from history is a 200 with one ERROR
            # event (the watch cache's errWatcher), not an HTTP 410.
            await resp.prepare(request)
            await resp.write(_line("ERROR", expired.status()))
            await resp.write_eof()
            return resp
        self.store.subscribers.append(w.offer)
        self.watchers.append(w)
        try:
            await resp.prepare(request)
            await self._pump(w, resp, timeout)
            await resp.write_eof()
        except ConnectionResetError:
            pass  # the client went away mid-write
        finally:
            self.store.subscribers.remove(w.offer)
            self.watchers.remove(w)
        return resp

    async def _pump(self, w: Watcher, resp: web.StreamResponse, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait: float | None = self.bookmark_interval if w.bookmarks else None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                wait = left if wait is None else min(wait, left)
            try:
                item = await asyncio.wait_for(w.queue.get(), wait)
            except TimeoutError:
                if deadline is None or time.monotonic() < deadline:
                    w.bookmark(self.store.rv)
                continue
            if item is None:
                return
            await resp.write(_line(*item))

    # --- patch / delete ---------------------------------------------------------------

    def _patch(self, t: Target, raw: bytes, content_type: str, q: Any, manager: str, dry_run: bool) -> web.Response:
        ctype = content_type.split(";")[0].strip()
        ns, name = t.namespace or "", t.name or ""
        force = _flag(q, "force")
        if ctype == APPLY_PATCH:
            if not q.get("fieldManager"):
                raise errors.invalid("meta.k8s.io", "PatchOptions", "",
                                     [("fieldManager", "Required value: is required for apply patch")])
            try:
                config = _yaml_load(raw.decode() or "{}")
            except yaml.YAMLError as e:
                raise errors.bad_request(f"error decoding YAML: {e}") from e
            if not isinstance(config, dict):
                raise errors.bad_request("apply configuration must be an object")
            obj, created = self.store.apply(t.rt, ns, name, config, sub=t.sub, version=t.version, manager=manager,
                                            force=force, dry_run=dry_run)
            return json_response(present(t.rt, obj, t.version), 201 if created else 200)
        if "force" in q:
            raise errors.invalid("meta.k8s.io", "PatchOptions", "",
                                 [("force", "Forbidden: may not be specified for non-apply patch")])
        accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH] + ([STRATEGIC_PATCH] if t.rt.builtin else [])
        if ctype not in accepted:
            # Custom resources have no Go types, hence no strategic merge patch: 415.
            raise errors.unsupported_media_type(ctype, accepted)
        try:
            patch = json.loads(raw or b"null")
        except ValueError as e:
            raise errors.bad_request(f"error decoding patch: {e}") from e
        current = present(t.rt, self.store.get(t.rt, ns if t.rt.namespaced else "", name), t.version)
        try:
            if ctype == JSON_PATCH:
                patched = json_patch(current, patch)
            elif ctype == MERGE_PATCH:
                if not isinstance(patch, dict):
                    raise errors.bad_request("a merge patch must be a JSON object")
                patched = merge_patch(current, patch)
            else:
                if not isinstance(patch, dict):
                    raise errors.bad_request("a strategic merge patch must be a JSON object")
                patched = strategic_merge(current, patch, t.rt.list_types)
        except PatchError as e:
            raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: {e}") from e
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        obj = self.store.update(t.rt, ns, name, patched, sub=t.sub, version=t.version, manager=manager,
                                dry_run=dry_run)
        return json_response(present(t.rt, obj, t.version))

    def _delete_options(self, raw: bytes, q: Any) -> tuple[str | None, Obj]:
        opts: Obj = {}
        if raw.strip():
            try:
                opts = json.loads(raw)
            except ValueError as e:
                raise errors.bad_request(f"error decoding DeleteOptions: {e}") from e
        propagation = q.get("propagationPolicy") or opts.get("propagationPolicy")
        if propagation is None and (opts.get("orphanDependents") is True or q.get("orphanDependents") == "true"):
            propagation = "Orphan"
        if propagation not in (None, "Orphan", "Background", "Foreground"):
            raise errors.invalid("meta.k8s.io", "DeleteOptions", "", [
                ("propagationPolicy", f'Unsupported value: "{propagation}": supported values: "Foreground", '
                                      '"Background", "Orphan", "nil"')])
        return propagation, opts.get("preconditions") or {}

    def _delete(self, t: Target, raw: bytes, q: Any, dry_run: bool) -> web.Response:
        propagation, pre = self._delete_options(raw, q)
        ns = t.namespace or ""
        obj, gone = self.store.delete(t.rt, ns, t.name or "", propagation=propagation, preconditions=pre,
                                      dry_run=dry_run)
        if not gone or not t.rt.builtin:
            # Custom resources (and objects held by finalizers) come back as the object.
            return json_response(present(t.rt, obj, t.version))
        meta = obj.get("metadata") or {}
        details: dict[str, Any] = {"name": meta.get("name"), "kind": t.rt.plural, "uid": meta.get("uid")}
        if t.rt.group:
            details["group"] = t.rt.group
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "details": details})

    def _delete_collection(self, t: Target, raw: bytes, q: Any, dry_run: bool) -> web.Response:
        propagation, _ = self._delete_options(raw, q)
        labels, fields_ = self._selectors(t, q)
        w = Watcher(t.rt, t.version, t.namespace, labels, fields_, False)
        deleted = []
        for o in self.store.list(t.rt, t.namespace):
            if w.matches(o):
                meta = o["metadata"]
                obj, _ = self.store.delete(t.rt, meta.get("namespace", ""), meta["name"], propagation=propagation,
                                           dry_run=dry_run)
                deleted.append(present(t.rt, obj, t.version))
        return json_response({"kind": t.rt.list_kind, "apiVersion": t.rt.api_version(t.version),
                              "metadata": {"resourceVersion": str(self.store.rv)}, "items": deleted})


# --- small helpers ----------------------------------------------------------------------


def _page_not_found() -> web.Response:
    return web.Response(status=404, text="404 page not found\n", content_type="text/plain")


def _line(type_: str, obj: Obj) -> bytes:
    return json.dumps({"type": type_, "object": obj}, separators=(",", ":")).encode() + b"\n"


def _pos(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace", ""), meta.get("name", ""))


def _parse_rv(rv: str) -> int:
    try:
        n = int(rv)
    except ValueError as e:
        raise errors.bad_request(f'invalid resource version "{rv}"') from e
    if n < 0:
        raise errors.bad_request(f'invalid resource version "{rv}"')
    return n


def _parse_int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError as e:
        raise errors.bad_request(f"invalid value for {name}: {value!r}: must be an integer") from e


def _manager_from_agent(user_agent: str) -> str:
    # The API server's default manager: the User-Agent up to its first "/".
    return (user_agent.split("/")[0] or "unknown")[:128]


def _body_object(raw: bytes, content_type: str) -> Obj:
    ctype = content_type.split(";")[0].strip()
    try:
        if ctype in ("application/json", ""):
            body = json.loads(raw or b"null")
        elif ctype in ("application/yaml", "application/x-yaml"):
            body = _yaml_load(raw.decode())
        else:
            raise errors.unsupported_media_type(ctype, ["application/json", "application/yaml"])
    except (ValueError, yaml.YAMLError) as e:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {e}") from e
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be an object")
    return _drop_nulls(body)


def _drop_nulls(v: Any) -> Any:
    # Go decoding into typed structs (and CRD pruning) turns `null` fields into
    # absent ones; clients that serialise None as null rely on that.
    if isinstance(v, dict):
        return {k: _drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_nulls(x) for x in v]
    return v


def _decode_for_log(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        try:
            return _yaml_load(raw.decode())
        except (yaml.YAMLError, UnicodeDecodeError):
            return raw
