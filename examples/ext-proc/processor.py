"""The external processor of the ext-proc example: Envoy's ext_proc gRPC API.

For each request it adds `x-request-id-seen: <id>` and `x-processed-by: example`
(the backend sees them); for each response it adds `x-processed: true` (the
client sees it); a request carrying `x-block` is answered by the processor itself
with 403. Run it next to `lychgate run examples/ext-proc`:

    .venv/bin/python examples/ext-proc/processor.py        # listens on 127.0.0.1:9002
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc
from envoy.type.v3 import http_status_pb2


def set_headers(**headers: str) -> pb.CommonResponse:
    return pb.CommonResponse(header_mutation=pb.HeaderMutation(set_headers=[
        base_pb2.HeaderValueOption(header=base_pb2.HeaderValue(key=k.replace("_", "-"), raw_value=v.encode()))
        for k, v in headers.items()
    ]))


class Processor(pb_grpc.ExternalProcessorServicer):  # type: ignore[misc]
    async def Process(  # noqa: N802
        self, requests: AsyncIterator[pb.ProcessingRequest], context: Any
    ) -> AsyncIterator[pb.ProcessingResponse]:
        async for req in requests:
            kind = req.WhichOneof("request")
            if kind == "request_headers":
                headers = {h.key: (h.raw_value.decode() or h.value) for h in req.request_headers.headers.headers}
                print(f"request {headers.get(':method')} {headers.get(':path')}", flush=True)
                if "x-block" in headers:
                    yield pb.ProcessingResponse(immediate_response=pb.ImmediateResponse(
                        status=http_status_pb2.HttpStatus(code=http_status_pb2.Forbidden),
                        body=b"blocked by the external processor\n"))
                    continue
                yield pb.ProcessingResponse(request_headers=pb.HeadersResponse(response=set_headers(
                    x_processed_by="example", x_request_id_seen=headers.get("x-request-id", "?"))))
            elif kind == "response_headers":
                yield pb.ProcessingResponse(response_headers=pb.HeadersResponse(
                    response=set_headers(x_processed="true")))
            elif kind == "request_body":
                yield pb.ProcessingResponse(request_body=pb.BodyResponse())
            elif kind == "response_body":
                yield pb.ProcessingResponse(response_body=pb.BodyResponse())
            elif kind == "request_trailers":
                yield pb.ProcessingResponse(request_trailers=pb.TrailersResponse())
            elif kind == "response_trailers":
                yield pb.ProcessingResponse(response_trailers=pb.TrailersResponse())


async def main(host: str, port: int) -> None:
    server = grpc.aio.server()
    pb_grpc.add_ExternalProcessorServicer_to_server(Processor(), server)
    server.add_insecure_port(f"{host}:{port}")
    await server.start()
    print(f"ext_proc server listening on {host}:{port}", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9002)
    args = parser.parse_args()
    try:
        asyncio.run(main(args.host, args.port))
    except KeyboardInterrupt:
        pass
