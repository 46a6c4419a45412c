"""A real endpoint picker (EPP) of the Gateway API Inference Extension, for tests.

It speaks Envoy's ext_proc gRPC protocol as the Inference Extension's
endpoint picker protocol defines it: for every request it names the model
server to use in the `x-gateway-destination-endpoint` request header and in
the `envoy.lb` dynamic metadata. It picks the endpoint with the shortest
queue (the tests set the queues), as the reference picker's queue scorer
does, and a request may ask for a model server by header instead.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as proc_pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as proc_grpc
from google.protobuf import struct_pb2

from tests.harness import free_port

DESTINATION = "x-gateway-destination-endpoint"
PREFER = "x-prefer-endpoint"


class EndpointPicker(proc_grpc.ExternalProcessorServicer):  # type: ignore[misc]
    def __init__(self, queues: dict[str, int]) -> None:
        self.queues = dict(queues)  # "ip:port" -> requests waiting at that model server
        self.picked: list[str] = []
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: Any = None

    def pick(self, headers: dict[str, str]) -> str:
        preferred = headers.get(PREFER)
        if preferred in self.queues:
            return preferred
        return min(sorted(self.queues), key=lambda ep: self.queues[ep])

    async def Process(
        self, requests: AsyncIterator[proc_pb.ProcessingRequest], context: Any
    ) -> AsyncIterator[proc_pb.ProcessingResponse]:
        async for req in requests:
            kind = req.WhichOneof("request")
            if kind == "request_headers":
                headers = {h.key: (h.raw_value.decode() or h.value) for h in req.request_headers.headers.headers}
                endpoint = self.pick(headers)
                self.picked.append(endpoint)
                metadata = struct_pb2.Struct()
                metadata.update({"envoy.lb": {DESTINATION: endpoint}})
                yield proc_pb.ProcessingResponse(
                    request_headers=proc_pb.HeadersResponse(response=proc_pb.CommonResponse(
                        header_mutation=proc_pb.HeaderMutation(set_headers=[base_pb2.HeaderValueOption(
                            header=base_pb2.HeaderValue(key=DESTINATION, raw_value=endpoint.encode()))]))),
                    dynamic_metadata=metadata,
                )
            elif kind == "request_body":
                yield proc_pb.ProcessingResponse(request_body=proc_pb.BodyResponse())
            elif kind == "request_trailers":
                yield proc_pb.ProcessingResponse(request_trailers=proc_pb.TrailersResponse())
            elif kind == "response_headers":
                yield proc_pb.ProcessingResponse(response_headers=proc_pb.HeadersResponse())
            elif kind == "response_body":
                yield proc_pb.ProcessingResponse(response_body=proc_pb.BodyResponse())

    def start(self) -> EndpointPicker:
        self._thread.start()

        async def go() -> Any:
            server = grpc.aio.server()
            proc_grpc.add_ExternalProcessorServicer_to_server(self, server)
            server.add_insecure_port(f"127.0.0.1:{self.port}")
            await server.start()
            return server

        self._server = asyncio.run_coroutine_threadsafe(go(), self._loop).result(10)
        return self

    def close(self) -> None:
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._server.stop(0), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
