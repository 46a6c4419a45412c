"""A minimal OpenTelemetry collector: OTLP/gRPC logs and traces, printed one line each.

    .venv/bin/python examples/observability/collector.py [--port 4317]

It speaks the real OTLP services (opentelemetry.proto.collector.{logs,trace}.v1)
with the message classes that come with lychgate's Envoy protos; in production
point the ListenerPolicy at an OpenTelemetry Collector, Jaeger or Tempo instead.
"""

from __future__ import annotations

import argparse
from concurrent import futures
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as logs
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as traces


def _attrs(values: Any) -> dict[str, str]:
    return {kv.key: str(getattr(kv.value, kv.value.WhichOneof("value") or "string_value")) for kv in values}


def export_logs(request: logs.ExportLogsServiceRequest, context: Any) -> logs.ExportLogsServiceResponse:
    for rl in request.resource_logs:
        for sl in rl.scope_logs:
            for record in sl.log_records:
                print(f"log  {record.body.string_value}  {_attrs(record.attributes)}", flush=True)
    return logs.ExportLogsServiceResponse()


def export_traces(request: traces.ExportTraceServiceRequest, context: Any) -> traces.ExportTraceServiceResponse:
    for rs in request.resource_spans:
        service = _attrs(rs.resource.attributes).get("service.name", "?")
        for ss in rs.scope_spans:
            for span in ss.spans:
                tags = _attrs(span.attributes)
                print(f"span {service} trace={span.trace_id.hex()} {tags.get('http.method', '')} "
                      f"{tags.get('http.url', '')} -> {tags.get('http.status_code', '')} "
                      f"tenant={tags.get('tenant', '')}", flush=True)
    return traces.ExportTraceServiceResponse()


def _service(name: str, method: Any, request: Any) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(name, {"Export": grpc.unary_unary_rpc_method_handler(
        method, request_deserializer=request.FromString, response_serializer=lambda m: m.SerializeToString())})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=4317)
    args = parser.parse_args()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers([
        _service("opentelemetry.proto.collector.logs.v1.LogsService", export_logs, logs.ExportLogsServiceRequest),
        _service("opentelemetry.proto.collector.trace.v1.TraceService", export_traces, traces.ExportTraceServiceRequest),
    ])
    server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    print(f"OTLP collector listening on 127.0.0.1:{args.port}", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
