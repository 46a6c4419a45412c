"""/snapshots/krt and /snapshots/xds: what the control plane holds and sends.

Both call a provider of the pipeline on the event-loop thread (the pipeline's
state belongs to that thread, so no locking is needed), convert the result to
plain JSON data, filter it and redact secret material before it leaves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from lychgate.admin import metrics
from lychgate.admin.pages import Endpoint, flag, json_body, jsonable
from lychgate.admin.redact import redact, redact_kubernetes_secret
from lychgate.log import component_logger

ENDPOINTS = (
    Endpoint(
        "/snapshots/krt?pretty",
        "objects and derived collections the control plane holds, with their sync state "
        "(JSON; filters ?kind=&namespace=&name=)",
    ),
    Endpoint(
        "/snapshots/xds?pretty",
        "the xDS resources sent to each connected proxy, with versions sent/ACKed and NACK "
        "errors (JSON; filters ?gateway=ns/name&type=Listener)",
    ),
)

NO_PROXY_MESSAGE = (
    "no proxy is connected: an xDS snapshot exists once a Gateway of a lychgate class "
    "has a proxy and that proxy has connected to the control plane over xDS"
)

Provider = Callable[[], dict[str, Any]]
Handler = Callable[[web.Request], Awaitable[web.Response]]

log = component_logger("admin")


class ProviderFailed(Exception):
    """A pipeline provider raised; the response says which, the log says why."""


def _call(provider: Provider, what: str) -> Any:
    try:
        return jsonable(provider())
    except Exception as exc:
        log.exception("the %s snapshot provider failed", what)
        metrics.ERRORS.labels(component="admin").inc()
        raise ProviderFailed(f"the {what} provider failed: {type(exc).__name__}: {exc}") from exc


def _field(item: Mapping[str, Any], name: str) -> Any:
    """metadata.<name> for Kubernetes objects, else a top-level field."""
    meta = item.get("metadata")
    if isinstance(meta, Mapping) and name in meta:
        return meta[name]
    return item.get(name)


def _matches(
    item: Any, collection: str, kind: str | None, namespace: str | None, name: str | None
) -> bool:
    if not isinstance(item, Mapping):
        return kind is None and namespace is None and name is None
    if kind is not None:
        # Derived collections may hold kind-less items; their collection name stands in.
        item_kind = item.get("kind")
        if str(item_kind if item_kind is not None else collection).lower() != kind:
            return False
    if namespace is not None and _field(item, "namespace") != namespace:
        return False
    return name is None or _field(item, "name") == name


def filter_krt(
    data: Mapping[str, Any], kind: str | None, namespace: str | None, name: str | None
) -> dict[str, Any]:
    """Keep the items that match every given filter; drop collections left empty by them."""
    out = dict(data)
    collections = data.get("collections")
    if not isinstance(collections, Mapping):
        return out
    filtering = any(f is not None for f in (kind, namespace, name))
    kept: dict[str, Any] = {}
    for cname, coll in collections.items():
        if not isinstance(coll, Mapping):
            kept[cname] = coll
            continue
        items = coll.get("items") or []
        matching = [i for i in items if _matches(i, cname, kind, namespace, name)]
        if filtering and not matching:
            continue
        kept[cname] = {**coll, "items": matching}
    out["collections"] = kept
    return out


def redact_krt(data: Mapping[str, Any]) -> Any:
    """Generic redaction, plus: every item of a collection named like Secrets is a Secret.

    Items of a "secrets" collection may come without kind/apiVersion (list items
    from the API server have none), so shape-based detection alone could miss them.
    """
    out = dict(data)
    collections = data.get("collections")
    if isinstance(collections, Mapping):
        fixed: dict[str, Any] = {}
        for cname, coll in collections.items():
            if "secret" in cname.lower() and isinstance(coll, Mapping):
                items = [
                    redact_kubernetes_secret(i) if isinstance(i, Mapping) else i
                    for i in coll.get("items") or []
                ]
                coll = {**coll, "items": items}
            fixed[cname] = coll
        out["collections"] = fixed
    return redact(out)


def _query(request: web.Request, name: str) -> str | None:
    value = request.query.get(name)
    return value.strip() if value else None


def krt_handler(provider: Provider) -> Handler:
    async def krt(request: web.Request) -> web.Response:
        """JSON of the store's collections; ?kind=&namespace=&name= filter, ?pretty indents."""
        try:
            return _krt(request, provider)
        except ProviderFailed as exc:
            return json_body(redact({"error": str(exc)}), status=500)

    return krt


def _krt(request: web.Request, provider: Provider) -> web.Response:
    data = _call(provider, "krt")
    if not isinstance(data, Mapping):
        data = {"collections": {}, "unexpected": data}
    kind = _query(request, "kind")
    filtered = filter_krt(
        data, kind.lower() if kind else None, _query(request, "namespace"), _query(request, "name")
    )
    return json_body(redact_krt(filtered), pretty=flag(request, "pretty"))


def filter_xds(
    data: Mapping[str, Any], gateway: str | None, type_filter: str | None
) -> dict[str, Any]:
    out = dict(data)
    proxies = [p for p in data.get("proxies") or [] if isinstance(p, Mapping)]
    connected = [p for p in proxies if p.get("connected", True)]
    if not connected:
        out["message"] = NO_PROXY_MESSAGE
    if gateway is not None:
        selected = [p for p in proxies if p.get("gateway") == gateway]
        if not selected and proxies:
            known = sorted({str(p.get("gateway")) for p in proxies})
            out["message"] = (
                f"no proxy of gateway {gateway!r}; proxies belong to: {', '.join(known)}"
            )
        elif not selected:
            out["message"] = NO_PROXY_MESSAGE
        proxies = selected
    if type_filter is not None:
        needle = type_filter.lower()
        proxies = [
            {**p, "types": {t: v for t, v in (p.get("types") or {}).items() if needle in t.lower()}}
            for p in proxies
        ]
    out["proxies"] = proxies
    return out


def xds_handler(provider: Provider) -> Handler:
    async def xds(request: web.Request) -> web.Response:
        """JSON of every proxy's xDS state; ?gateway=ns/name and ?type=<substring> filter."""
        try:
            return _xds(request, provider)
        except ProviderFailed as exc:
            return json_body(redact({"error": str(exc)}), status=500)

    return xds


def _xds(request: web.Request, provider: Provider) -> web.Response:
    data = _call(provider, "xds")
    if not isinstance(data, Mapping):
        data = {"proxies": [], "unexpected": data}
    filtered = filter_xds(data, _query(request, "gateway"), _query(request, "type"))
    return json_body(redact(filtered), pretty=flag(request, "pretty"))


def routes(krt: Provider, xds: Provider) -> list[web.RouteDef]:
    return [
        web.get("/snapshots/krt", krt_handler(krt)),
        web.get("/snapshots/xds", xds_handler(xds)),
    ]
