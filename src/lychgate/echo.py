"""A small echo backend: answers every request with JSON describing it.

The answer has the shape of the Gateway API conformance echo server (path,
host, method, proto, headers, namespace, ingress, service, pod), so the
quickstart, the tests and the conformance runner all read the same thing;
`/status/<code>` answers with that status code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from aiohttp import web


def echo_app(pod: str = "", service: str = "", namespace: str = "") -> web.Application:
    identity = {
        "namespace": namespace or os.environ.get("NAMESPACE", ""),
        "ingress": os.environ.get("INGRESS_NAME", ""),
        "service": service or os.environ.get("SERVICE_NAME", ""),
        "pod": pod or os.environ.get("POD_NAME", ""),
    }

    async def handle(request: web.Request) -> web.Response:
        headers: dict[str, list[str]] = {}
        for key, value in request.headers.items():
            headers.setdefault(key.title(), []).append(value)
        body: dict[str, Any] = {
            "path": request.path_qs,
            "host": request.host,
            "method": request.method,
            "proto": f"HTTP/{request.version.major}.{request.version.minor}",
            "headers": headers,
            **identity,
        }
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        if sockname:
            body["httpPort"] = str(sockname[1])
        status = 200
        if request.path.startswith("/status/"):
            code = request.path.removeprefix("/status/")
            status = int(code) if code.isdigit() and 200 <= int(code) < 600 else 400
        return web.json_response(body, status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def serve_echo(host: str, port: int, **identity: str) -> web.AppRunner:
    runner = web.AppRunner(echo_app(**identity), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


def run_echo(host: str, port: int, **identity: str) -> None:
    async def main() -> None:
        runner = await serve_echo(host, port, **identity)
        print(f"echo backend listening on http://{host}:{port}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
