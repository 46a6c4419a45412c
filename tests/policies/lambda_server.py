"""A stand-in for the AWS Lambda Invoke API on loopback that checks what a real
one checks first: the SigV4 signature, recomputed with botocore (AWS's own
signing code) from the request as it arrived. It answers like a function would
(`{"statusCode", "headers", "body"}`) and records the events it was invoked with."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from botocore.credentials import Credentials

from tests.harness import free_port
from tests.policies.servers import Servers
from tests.sigv4 import expected_signature

_AUTH = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/lambda/aws4_request, "
                   r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$")


@dataclass
class LambdaServer:
    access_key: str
    secret_key: str
    port: int = 0
    invocations: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    def check_signature(self, request: web.Request, body: bytes) -> str:
        """"" when the request is signed with our key, else why not."""
        m = _AUTH.match(request.headers.get("authorization", ""))
        if m is None:
            return f"no SigV4 authorization header: {request.headers.get('authorization')!r}"
        access, _, region, signed, signature = m.groups()
        if access != self.access_key:
            return f"unknown access key {access}"
        names = signed.split(";")
        expected = expected_signature(request, body, names, Credentials(self.access_key, self.secret_key),
                                      "lambda", region)
        return "" if expected == signature else f"signature mismatch (signed headers {signed})"

    def app(self) -> web.Application:
        async def invoke(request: web.Request) -> web.Response:
            body = await request.read()
            problem = self.check_signature(request, body)
            if problem:
                self.rejected.append(problem)
                return web.json_response({"message": problem}, status=403)
            event = json.loads(body) if body else {}
            self.invocations.append({"function": request.match_info["function"], "event": event,
                                     "invocation_type": request.headers.get("x-amz-invocation-type")})
            who = (event.get("headers") or {}).get("x-user", "nobody")
            return web.json_response({"statusCode": 201, "headers": {"x-served-by": "lambda"},
                                      "body": f"hello {who} from {event.get('raw_path')}"})

        async def other(request: web.Request) -> web.Response:
            self.rejected.append(f"not an invocation: {request.method} {request.raw_path}")
            return web.json_response({"message": "unknown operation"}, status=404)

        app = web.Application()
        app.router.add_post("/2015-03-31/functions/{function}/invocations", invoke)
        app.router.add_route("*", "/{tail:.*}", other)
        return app


def start(servers: Servers, access_key: str, secret_key: str) -> LambdaServer:
    server = LambdaServer(access_key, secret_key, port=free_port())

    async def go() -> web.AppRunner:
        runner = web.AppRunner(server.app(), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", server.port).start()
        return runner

    runner = servers.loop.run(go())
    servers._stops.append(runner.cleanup)
    return server
