"""/healthz and /readyz for the kubelet (default 127.0.0.1:9093).

healthz answers as long as the event loop does: a wedged loop fails the
liveness probe, which is what should restart the pod. readyz also asks the
pipeline, so a control plane that has not finished its first sync or is not
serving xDS yet gets no traffic.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from lychgate.log import component_logger

log = component_logger("admin")

NOT_READY = "not ready: the first sync of all sources has not finished, or xDS is not serving yet"


async def healthz(request: web.Request) -> web.Response:
    """Liveness: 200 "ok" while the event loop runs."""
    return web.Response(text="ok\n", content_type="text/plain")


def readyz_handler(ready: Callable[[], bool]) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def readyz(request: web.Request) -> web.Response:
        """Readiness: 200 once the first sync is done and xDS serves, else 503 with the reason."""
        try:
            is_ready = ready()
        except Exception as exc:
            log.exception("readiness check failed")
            return web.Response(
                text=f"not ready: the readiness check failed: {type(exc).__name__}: {exc}\n",
                status=503,
                content_type="text/plain",
            )
        if is_ready:
            return web.Response(text="ready\n", content_type="text/plain")
        return web.Response(text=NOT_READY + "\n", status=503, content_type="text/plain")

    return readyz


def routes(ready: Callable[[], bool]) -> list[web.RouteDef]:
    return [web.get("/healthz", healthz), web.get("/readyz", readyz_handler(ready))]
