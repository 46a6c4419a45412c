"""The control plane's HTTP servers: admin (debug, 9095), metrics (9092), health (9093).

The pipeline hands the admin server read-only views through AdminProviders;
the admin server never imports pipeline modules, so it can be built and tested
on its own and the pipeline can change what it keeps without touching this.

All three are separate aiohttp applications so each can bind its own address
(the admin one stays on loopback by default; spec §4.1 reaches it through a
port-forward), and run on the control plane's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from html import escape
from typing import Any

from aiohttp import abc, web
from prometheus_client.exposition import choose_encoder

from lychgate.admin import health, levels, metrics, pprof, snapshots
from lychgate.admin.pages import Endpoint, endpoint_list, page, wants_json
from lychgate.log import component_logger
from lychgate.settings import split_host_port

__all__ = [
    "AdminProviders",
    "build_admin_app",
    "build_health_app",
    "build_metrics_app",
    "serve",
]

log = component_logger("admin")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class AdminProviders:
    """Read-only views of the pipeline, called on the event-loop thread per request.

    They must be quick and must not block: they run on the loop that also runs
    the pipeline. The admin server converts, filters and redacts what they return.
    """

    # {"collections": {name: {"synced": bool, "items": [obj dict, ...]}}, ...}
    krt: Callable[[], dict[str, Any]]
    # {"proxies": [{"node": {...}, "gateway": "ns/name", "connected": bool,
    #   "types": {type_url: {"version_sent": str, "version_acked": str,
    #     "nack": {"version", "error", "at"} | None, "resources": [json dict, ...]}}}]}
    xds: Callable[[], dict[str, Any]]
    # True once the first sync is done and xDS is serving.
    ready: Callable[[], bool]


INDEX_ENDPOINTS: tuple[Endpoint, ...] = (
    *pprof.ENDPOINTS,
    *levels.ENDPOINTS,
    *snapshots.ENDPOINTS,
)


def _extra_endpoints(extra: Iterable[web.RouteDef]) -> list[Endpoint]:
    """Index entries for routes the caller added: GET ones, described by their docstring."""
    found = []
    for route in extra:
        if route.method not in ("GET", "*") or "{" in route.path:
            continue
        doc = (getattr(route.handler, "__doc__", None) or "").strip().splitlines()
        found.append(Endpoint(route.path, doc[0] if doc else ""))
    return found


def _index_handler(endpoints: list[Endpoint]) -> Handler:
    body = (
        "<p>Debug surfaces of this lychgate control plane. Profiles, levels and snapshots "
        "describe this process only. Prometheus metrics and health probes are served on "
        "their own addresses (defaults 127.0.0.1:9092/metrics and "
        "127.0.0.1:9093/healthz, /readyz).</p>"
        + endpoint_list(endpoints)
        + '<p class="note">Every endpoint also answers scripts: most take '
        "<code>?format=json</code>; see docs/debugging.md.</p>"
    )

    async def index(request: web.Request) -> web.Response:
        """The list of admin endpoints."""
        return page("lychgate admin", body)

    return index


def _not_found(request: web.Request) -> web.Response:
    message = f"no endpoint at {request.path}; the list of endpoints is at /"
    if wants_json(request) or "text/html" not in request.headers.get("Accept", ""):
        return web.json_response({"error": message, "index": "/"}, status=404)
    return page(
        "Not found",
        f"<p>No endpoint at <code>{escape(request.path)}</code>. "
        f'The list of endpoints is at <a href="/">/</a>.</p>',
        status=404,
    )


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """404 with a pointer to the index; unexpected errors logged and counted, not hidden."""
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return _not_found(request)
    except web.HTTPException:
        raise
    except Exception:
        log.exception("admin request %s %s failed", request.method, request.path)
        metrics.ERRORS.labels(component="admin").inc()
        raise


def build_admin_app(
    providers: AdminProviders, extra_routes: Iterable[web.RouteDef] = ()
) -> web.Application:
    """The debug server of spec §4.1: index, pprof, logging, krt and xDS snapshots."""
    extra = list(extra_routes)
    app = web.Application(middlewares=[_errors])
    endpoints = [*INDEX_ENDPOINTS, *_extra_endpoints(extra)]
    app.router.add_get("/", _index_handler(endpoints))
    app.add_routes(pprof.routes())
    app.add_routes(levels.routes())
    app.add_routes(snapshots.routes(providers.krt, providers.xds))
    app.add_routes(extra)
    return app


async def _metrics(request: web.Request) -> web.Response:
    """Prometheus exposition of lychgate.admin.metrics.REGISTRY (OpenMetrics if asked)."""
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    body = encoder(metrics.REGISTRY)
    # choose_encoder returns a full Content-Type header with parameters.
    return web.Response(body=body, headers={"Content-Type": content_type})


def build_metrics_app() -> web.Application:
    """/metrics from lychgate.admin.metrics.REGISTRY."""
    app = web.Application()
    app.router.add_get("/metrics", _metrics)
    return app


def build_health_app(providers: AdminProviders) -> web.Application:
    """/healthz (the loop is alive) and /readyz (providers.ready())."""
    app = web.Application()
    app.add_routes(health.routes(providers.ready))
    return app


class _DebugAccessLogger(abc.AbstractAccessLogger):
    """One debug line per request on lychgate.admin: quiet unless someone asks.

    aiohttp's default access log writes at info to its own logger, which would
    print every Prometheus scrape and kubelet probe.
    """

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.DEBUG)

    def log(self, request: Any, response: Any, time: float) -> None:
        self.logger.debug(
            "%s %s %s -> %s in %.1f ms",
            request.remote,
            request.method,
            request.path_qs,
            response.status,
            time * 1000,
        )


async def serve(app: web.Application, address: str) -> web.AppRunner:
    """Bind `app` on "HOST:PORT" (port 0 picks a free one; see runner.addresses).

    Returns the started runner; the caller stops it with `await runner.cleanup()`.
    """
    host, port = split_host_port(address)
    runner = web.AppRunner(app, access_log_class=_DebugAccessLogger, access_log=log)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    log.info("listening on %s", ", ".join(_address(a) for a in runner.addresses))
    return runner


def _address(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        host, port = addr[0], addr[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(addr)
