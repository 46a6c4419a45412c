"""The running control plane's read API, used by `lychgate get` and the debug pages.

Served on the admin address under /api/v1. Objects come back as the API
server would return them: the manifest with defaults, metadata and status.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from aiohttp import web

from lychgate.admin.redact import redact
from lychgate.api.base import ObjectKey, Resource
from lychgate.api.registry import BY_KIND
from lychgate.controlplane import ControlPlane
from lychgate.log import RECENT
from lychgate.xds import types


def _prune(value: Any) -> Any:
    """Drop empty lists and maps: defaults a reader does not need to see."""
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if v not in ({}, [])}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def object_dict(cp: ControlPlane, obj: Resource) -> dict[str, Any]:
    out: dict[str, Any] = _prune(obj.model_dump(by_alias=True, exclude_none=True, mode="json"))
    status = cp.status.get(obj.key)
    if status is not None:
        out["status"] = status
    elif not out.get("status"):
        # An object the control plane writes no status for keeps the one it came with
        # (a Pod's IP and readiness, which InferencePools route by).
        out.pop("status", None)
    return out


def refused_dict(cp: ControlPlane, key: ObjectKey) -> dict[str, Any]:
    """An object a source refused and has no valid version of: its manifest as written,
    at the generation it was refused, with the status that says why (status/invalid.py)."""
    refusal = cp.store.refused[key]
    out = dict(refusal.raw)
    meta = out.get("metadata")
    out["metadata"] = {**(meta if isinstance(meta, dict) else {}), "generation": refusal.generation,
                       **({"namespace": key.namespace} if key.namespace else {})}
    status = cp.status.get(key)
    if status is not None:
        out["status"] = status
    return out


def krt_snapshot(cp: ControlPlane) -> dict[str, Any]:
    collections: dict[str, Any] = {}
    for kind in sorted(BY_KIND):
        cls = BY_KIND[kind]
        items = sorted(cp.store.list(cls), key=lambda o: (o.namespace, o.name))
        collections[kind] = {"synced": cp.store.synced, "items": [object_dict(cp, o) for o in items]}
    collections["GatewayIR"] = {
        "synced": cp.passes > 0,
        "items": [dataclasses.asdict(g) for g in cp.translation.gateways.values()],
    }
    collections["IntendedRoutes"] = {
        "synced": cp.passes > 0,
        "items": [{"gateway": ref, "routes": cp.intended_routes(ref)} for ref in sorted(cp.translation.gateways)],
    }
    collections["Quarantine"] = {"synced": cp.passes > 0, "items": cp.quarantine.as_items()}
    collections["ProxyIntent"] = {
        "synced": cp.passes > 0,
        "items": [
            {**{k: v for k, v in dataclasses.asdict(p).items() if k != "parameters"}}
            for p in cp.translation.proxies.values()
        ],
    }
    return {
        "revision": cp.store.revision,
        "passes": cp.passes,
        "lastPass": dataclasses.asdict(cp.last_pass) if cp.last_pass else None,
        "collections": collections,
    }


def xds_snapshot(cp: ControlPlane) -> dict[str, Any]:
    proxies = []
    for conn in cp.ads.connections.values():
        snap = cp.cache.get(conn.gateway)
        summary = conn.summary()
        resources = cp.cache.resources_json(conn.gateway)
        type_out: dict[str, Any] = {}
        for type_url, state in conn.types.items():
            short = types.SHORT.get(type_url, type_url)
            type_out[type_url] = {
                "version_sent": state.version_sent,
                "version_acked": state.version_acked,
                "version_current": snap.version(type_url) if snap else None,
                "nack": state.nack,
                "resources": resources.get(short, {}).get("resources", []),
            }
        proxies.append({
            "node": summary["node"],
            "gateway": conn.gateway,
            "connected": True,
            "connectedSeconds": summary["connectedSeconds"],
            "types": type_out,
        })
    return {"proxies": proxies}


def routes(
    cp: ControlPlane,
    problems: Callable[[], list[dict[str, Any]]],
    proxies: Callable[[], list[dict[str, Any]]],
) -> list[web.RouteDef]:
    async def list_objects(request: web.Request) -> web.Response:
        """Objects with their status: ?kind=Gateway&namespace=&name= (what `lychgate get` reads)."""
        kind = request.query.get("kind", "")
        cls = BY_KIND.get(kind)
        if cls is None:
            return web.json_response(
                {"error": f"unknown kind {kind!r}; known: {', '.join(sorted(BY_KIND))}"}, status=400
            )
        ns = request.query.get("namespace") or None
        name = request.query.get("name") or None
        found = [(o.key, object_dict(cp, o)) for o in cp.store.list(cls, ns) if name is None or o.name == name]
        found += [(key, refused_dict(cp, key)) for key in cp.store.refused
                  if key.kind == kind and cp.store.get_key(key) is None
                  and (ns is None or key.namespace == ns) and (name is None or key.name == name)]
        items = [redact(obj) for _, obj in sorted(found, key=lambda kv: (kv[0].namespace, kv[0].name))]
        # The items whose newest manifest a source refused (shown at their last valid version, or
        # as written): `lychgate get` marks them even where their status cannot say it.
        refused = [{"namespace": key.namespace, "name": key.name} for key, _ in sorted(
            found, key=lambda kv: (kv[0].namespace, kv[0].name)) if key in cp.store.refused]
        return web.json_response({"kind": kind, "items": items, "refused": refused})

    async def list_problems(_request: web.Request) -> web.Response:
        """Manifest problems: file, document, object and field of each error."""
        return web.json_response({"items": problems()})

    async def list_proxies(_request: web.Request) -> web.Response:
        """The proxy of each Gateway: address, admin port, pid, restarts, log file."""
        return web.json_response({"items": proxies()})

    async def recent_logs(_request: web.Request) -> web.Response:
        """The control plane's last warnings and errors (newest last)."""
        return web.json_response({"items": list(RECENT)})

    return [
        web.get("/api/v1/logs", recent_logs),
        web.get("/api/v1/objects", list_objects),
        web.get("/api/v1/problems", list_problems),
        web.get("/api/v1/proxies", list_proxies),
    ]
