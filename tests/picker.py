"""Real endpoint pickers (EPPs) of the Gateway API Inference Extension, for tests.

They speak Envoy's ext_proc gRPC protocol as the Inference Extension's endpoint
picker protocol (proposal 004) defines it, the way the reference picker does:

- the request is streamed (FULL_DUPLEX_STREAMED): the picker reads the headers
  and the whole body (where an OpenAI-style request names its model), then
  answers the headers with its pick and hands the body back unchanged;
- the pick, "ip:port" or a comma-separated fallback list, goes in the request
  header `x-gateway-destination-endpoint` and/or the same key of the
  `envoy.lb` dynamic metadata (`answer`: "both", "header" or "metadata");
- on the response, the picker reads the endpoint that served the request from
  the `envoy.lb` metadata the proxy sends (`x-gateway-destination-endpoint-served`)
  and hands the response body back chunk by chunk.

It serves TLS with a certificate of its own nobody trusts, as the reference
picker does by default (`tls=False`: plaintext, as with --secure-serving=false).

`Picker` does the protocol; `choose()` is the policy. `EndpointPicker` picks
the endpoint with the shortest queue (the tests set the queues), as the
reference picker's queue scorer does; a request may ask for an endpoint (or a
list) by header instead.
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
from envoy.type.v3 import http_status_pb2
from google.protobuf import json_format, struct_pb2

from tests.certs import CA
from tests.harness import free_port

DESTINATION = "x-gateway-destination-endpoint"
SERVED = "x-gateway-destination-endpoint-served"
LB_NAMESPACE = "envoy.lb"
PREFER = "x-prefer-endpoint"
SERVED_HEADER = "x-picker-saw-served"  # a response header: what the proxy reported as served


def header_map(headers: proc_pb.HttpHeaders) -> dict[str, str]:
    return {h.key: (h.raw_value.decode() or h.value) for h in headers.headers.headers}


def _set_headers(pairs: list[tuple[str, str]]) -> proc_pb.CommonResponse:
    return proc_pb.CommonResponse(header_mutation=proc_pb.HeaderMutation(set_headers=[
        base_pb2.HeaderValueOption(header=base_pb2.HeaderValue(key=k, raw_value=v.encode())) for k, v in pairs]))


def _streamed(body: bytes, end: bool) -> proc_pb.CommonResponse:
    return proc_pb.CommonResponse(body_mutation=proc_pb.BodyMutation(
        streamed_response=proc_pb.StreamedBodyResponse(body=body, end_of_stream=end)))


class Picker(proc_grpc.ExternalProcessorServicer):  # type: ignore[misc]
    """The ext_proc side of the endpoint picker protocol; subclasses choose endpoints."""

    def __init__(self, answer: str = "both", host: str = "127.0.0.1", port: int | None = None,
                 tls: bool = True, ca: CA | None = None) -> None:
        self.answer = answer  # where the pick goes: "both", "header" or "metadata"
        self.tls = tls
        self.ca = ca  # signs the certificate (for epp.example.com); None: a CA thrown away
        self.host = host
        self.port = port or free_port()
        self.picked: list[str] = []  # the pick of every request, in order
        self.served: list[str] = []  # the endpoint the proxy reported for every response
        self.requests = 0  # request streams opened by the proxy
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: Any = None

    # --- policy ------------------------------------------------------------------------

    def choose(self, headers: dict[str, str], body: bytes) -> list[str] | int:
        """The endpoints to try in order, or an HTTP status to answer instead (503: none)."""
        raise NotImplementedError

    def response_headers(self, served: str, picked: str) -> list[tuple[str, str]]:
        """Headers the picker adds to the response once it knows who served it."""
        return [(SERVED_HEADER, served)]

    # --- protocol ----------------------------------------------------------------------

    def _pick_response(self, headers: dict[str, str], body: bytes) -> tuple[proc_pb.ProcessingResponse, str]:
        choice = self.choose(headers, body)
        if isinstance(choice, int):
            return proc_pb.ProcessingResponse(immediate_response=proc_pb.ImmediateResponse(
                status=http_status_pb2.HttpStatus(code=choice), body=b"no endpoint to pick")), ""
        value = ",".join(choice)
        self.picked.append(value)
        out = proc_pb.ProcessingResponse(request_headers=proc_pb.HeadersResponse(
            response=_set_headers([(DESTINATION, value)]) if self.answer != "metadata" else None))
        if self.answer != "header":
            metadata = struct_pb2.Struct()
            metadata.update({LB_NAMESPACE: {DESTINATION: value}})
            out.dynamic_metadata.CopyFrom(metadata)
        return out, value

    async def Process(
        self, requests: AsyncIterator[proc_pb.ProcessingRequest], context: Any
    ) -> AsyncIterator[proc_pb.ProcessingResponse]:
        self.requests += 1
        headers: dict[str, str] = {}
        body = b""
        picked = ""
        async for req in requests:
            kind = req.WhichOneof("request")
            if kind == "request_headers":
                headers = header_map(req.request_headers)
                if req.request_headers.end_of_stream:  # no body: pick now
                    out, picked = self._pick_response(headers, b"")
                    yield out
                    if out.HasField("immediate_response"):
                        return
            elif kind == "request_body":
                body += req.request_body.body
                if req.request_body.end_of_stream:
                    out, picked = self._pick_response(headers, body)
                    yield out
                    if out.HasField("immediate_response"):
                        return
                    yield proc_pb.ProcessingResponse(request_body=proc_pb.BodyResponse(response=_streamed(body, True)))
            elif kind == "request_trailers":
                if not picked:  # the body ended with the trailers
                    out, picked = self._pick_response(headers, body)
                    yield out
                    if out.HasField("immediate_response"):
                        return
                    yield proc_pb.ProcessingResponse(request_body=proc_pb.BodyResponse(response=_streamed(body, False)))
                yield proc_pb.ProcessingResponse(request_trailers=proc_pb.TrailersResponse())
            elif kind == "response_headers":
                lb = json_format.MessageToDict(req.metadata_context.filter_metadata[LB_NAMESPACE]) \
                    if LB_NAMESPACE in req.metadata_context.filter_metadata else {}
                served = str(lb.get(SERVED, ""))
                self.served.append(served)
                yield proc_pb.ProcessingResponse(response_headers=proc_pb.HeadersResponse(
                    response=_set_headers(self.response_headers(served, picked))))
            elif kind == "response_body":
                yield proc_pb.ProcessingResponse(response_body=proc_pb.BodyResponse(
                    response=_streamed(req.response_body.body, req.response_body.end_of_stream)))
            elif kind == "response_trailers":
                yield proc_pb.ProcessingResponse(response_trailers=proc_pb.TrailersResponse())

    def start(self) -> Picker:
        self._thread.start()

        async def go() -> Any:
            server = grpc.aio.server()
            proc_grpc.add_ExternalProcessorServicer_to_server(self, server)
            if self.tls:  # without `ca`, self-signed in effect: signed by a CA made here and thrown away
                cert, key = (self.ca or CA("endpoint picker")).issue("epp.example.com", ["epp.example.com"])
                server.add_secure_port(f"{self.host}:{self.port}", grpc.ssl_server_credentials([(key, cert)]))
            else:
                server.add_insecure_port(f"{self.host}:{self.port}")
            await server.start()
            return server

        self._server = asyncio.run_coroutine_threadsafe(go(), self._loop).result(10)
        return self

    def close(self) -> None:
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._server.stop(0), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


class EndpointPicker(Picker):
    """Shortest queue wins; `x-prefer-endpoint: a,b` asks for those endpoints in that order."""

    def __init__(self, queues: dict[str, int], answer: str = "both", port: int | None = None,
                 tls: bool = True, ca: CA | None = None) -> None:
        super().__init__(answer, port=port, tls=tls, ca=ca)
        self.queues = dict(queues)  # "ip:port" -> requests waiting at that model server

    def choose(self, headers: dict[str, str], body: bytes) -> list[str] | int:
        preferred = [p.strip() for p in headers.get(PREFER, "").split(",") if p.strip()]
        if preferred:
            return preferred
        if not self.queues:
            return 503
        return [min(sorted(self.queues), key=lambda ep: self.queues[ep])]
