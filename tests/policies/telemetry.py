"""Real telemetry receivers Envoy streams to, on loopback ports.

- AlsReceiver: Envoy's gRPC access log service (`envoy.service.accesslog.v3.AccessLogService`,
  generated stubs from xds-protos): keeps every HTTP log entry and the log name it came under.
- OtlpReceiver: an OpenTelemetry collector's OTLP/gRPC logs and trace services
  (`opentelemetry.proto.collector.{logs,trace}.v1`, stubs from opentelemetry-proto):
  keeps every log record and span with their resource attributes.

They run on the policy tests' shared loop (tests/policies/servers.py) and record
what they received so tests assert on what Envoy actually sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from envoy.data.accesslog.v3 import accesslog_pb2 as entry_pb
from envoy.service.accesslog.v3 import als_pb2, als_pb2_grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

from tests.harness import free_port
from tests.policies.servers import Servers


@dataclass
class AlsReceiver(als_pb2_grpc.AccessLogServiceServicer):  # type: ignore[misc]
    entries: list[tuple[str, entry_pb.HTTPAccessLogEntry]] = field(default_factory=list)  # (log name, entry)
    port: int = 0

    async def StreamAccessLogs(self, requests: AsyncIterator[als_pb2.StreamAccessLogsMessage],
                               context: Any) -> als_pb2.StreamAccessLogsResponse:
        log_name = ""
        async for message in requests:
            if message.HasField("identifier"):  # the first message of a stream only
                log_name = message.identifier.log_name
            self.entries.extend((log_name, e) for e in message.http_logs.log_entry)
        return als_pb2.StreamAccessLogsResponse()

    def paths(self) -> list[str]:
        return [e.request.path for _, e in self.entries]


def attributes(values: Any) -> dict[str, Any]:
    """OTLP KeyValues as a plain dict (strings, ints, lists)."""
    return {kv.key: _value(kv.value) for kv in values}


def _value(v: common_pb2.AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return attributes(v.kvlist_value.values)
    return getattr(v, kind) if kind else None


@dataclass
class OtlpReceiver(logs_service_pb2_grpc.LogsServiceServicer, trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    # (resource attributes, log record / span)
    logs: list[tuple[dict[str, Any], Any]] = field(default_factory=list)
    spans: list[tuple[dict[str, Any], Any]] = field(default_factory=list)
    port: int = 0

    async def Export(self, request: Any, context: Any) -> Any:
        if isinstance(request, logs_service_pb2.ExportLogsServiceRequest):
            for rl in request.resource_logs:
                resource = attributes(rl.resource.attributes)
                self.logs.extend((resource, r) for sl in rl.scope_logs for r in sl.log_records)
            return logs_service_pb2.ExportLogsServiceResponse()
        for rs in request.resource_spans:
            resource = attributes(rs.resource.attributes)
            self.spans.extend((resource, s) for ss in rs.scope_spans for s in ss.spans)
        return trace_service_pb2.ExportTraceServiceResponse()


def _start(servers: Servers, add: Callable[[Any], None]) -> tuple[int, Callable[[], Any]]:
    port = free_port()

    async def go() -> Any:
        server = grpc.aio.server()
        add(server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        return server

    server = servers.loop.run(go())
    return port, lambda: servers.loop.run(server.stop(0))


def start_als(servers: Servers) -> tuple[AlsReceiver, Callable[[], Any]]:
    receiver = AlsReceiver()
    receiver.port, stop = _start(servers, lambda s: als_pb2_grpc.add_AccessLogServiceServicer_to_server(receiver, s))
    return receiver, stop


def start_otlp(servers: Servers) -> tuple[OtlpReceiver, Callable[[], Any]]:
    receiver = OtlpReceiver()

    def add(server: Any) -> None:
        # One servicer answers both services: Export tells them apart by request type.
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(receiver, server)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)

    receiver.port, stop = _start(servers, add)
    return receiver, stop
