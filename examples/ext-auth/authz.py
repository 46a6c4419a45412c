"""The authorization service of the ext-auth example: Envoy's ext_authz gRPC API.

Allows `Authorization: Bearer letmein`, telling the backend who the caller is
(`x-user`) and dropping the credential; denies everything else with 403 and a
reason. Run it next to `lychgate run examples/ext-auth`:

    .venv/bin/python examples/ext-auth/authz.py            # listens on 127.0.0.1:9001
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.service.auth.v3 import external_auth_pb2 as pb
from envoy.service.auth.v3 import external_auth_pb2_grpc as pb_grpc
from envoy.type.v3 import http_status_pb2
from google.rpc import code_pb2, status_pb2

TOKENS = {"letmein": "ada"}


def header(key: str, value: str) -> base_pb2.HeaderValueOption:
    return base_pb2.HeaderValueOption(header=base_pb2.HeaderValue(key=key, value=value))


class Authorization(pb_grpc.AuthorizationServicer):  # type: ignore[misc]
    async def Check(self, request: pb.CheckRequest, context: Any) -> pb.CheckResponse:  # noqa: N802
        http = request.attributes.request.http
        token = http.headers.get("authorization", "").removeprefix("Bearer ")
        where = dict(request.attributes.context_extensions).get("route", "?")
        user = TOKENS.get(token)
        print(f"{http.method} {http.host}{http.path} (route {where}): {'allow ' + user if user else 'deny'}", flush=True)
        if user:
            return pb.CheckResponse(
                status=status_pb2.Status(code=code_pb2.OK),
                ok_response=pb.OkHttpResponse(headers=[header("x-user", user)], headers_to_remove=["authorization"]),
            )
        return pb.CheckResponse(
            status=status_pb2.Status(code=code_pb2.PERMISSION_DENIED),
            denied_response=pb.DeniedHttpResponse(
                status=http_status_pb2.HttpStatus(code=http_status_pb2.Forbidden),
                headers=[header("x-auth-reason", "missing or unknown bearer token")],
                body="forbidden: send Authorization: Bearer letmein\n",
            ),
        )


async def main(host: str, port: int) -> None:
    server = grpc.aio.server()
    pb_grpc.add_AuthorizationServicer_to_server(Authorization(), server)
    server.add_insecure_port(f"{host}:{port}")
    await server.start()
    print(f"ext_authz server listening on {host}:{port}", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9001)
    args = parser.parse_args()
    try:
        asyncio.run(main(args.host, args.port))
    except KeyboardInterrupt:
        pass
