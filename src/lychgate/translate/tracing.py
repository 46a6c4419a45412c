"""`httpSettings.tracing` → an OpenTelemetry tracer (IR) sending spans to a collector.

The collector is a Service (`provider.openTelemetry.grpcService.backendRef`)
speaking OTLP over gRPC. Sampling percentages, custom span attributes, the
service name (default: `<gateway>.<namespace>`, as kgateway), the environment
resource detector and the AlwaysOn sampler are kgateway's fields.
"""

from __future__ import annotations

from lychgate import ir, ir_listener
from lychgate.api.listener_policy import Tracing
from lychgate.api.trace_attributes import CustomAttribute
from lychgate.store import Store
from lychgate.translate.collectors import collector
from lychgate.translate.values import Invalid, header_name

# Filled in per Gateway: a policy may serve several.
SERVICE_NAME_OF_GATEWAY = ""


def compile_tracing(store: Store, kind: str, namespace: str, value: Tracing, path: str,
                    clusters: dict[str, ir.Cluster]) -> ir_listener.Tracing:
    otel = value.provider.open_telemetry
    if otel is None:
        raise Invalid(f"{path}.provider", "openTelemetry must be set")
    col, cluster = collector(store, kind, namespace, otel.grpc_service, f"{path}.provider.openTelemetry.grpcService")
    clusters[cluster.name] = cluster
    detectors = [d.environment_resource_detector for d in otel.resource_detectors]
    if any(d is None for d in detectors):
        raise Invalid(f"{path}.provider.openTelemetry.resourceDetectors", "each needs environmentResourceDetector")
    return ir_listener.Tracing(
        collector=col,
        service_name=otel.service_name or SERVICE_NAME_OF_GATEWAY,
        client_sampling=value.client_sampling, random_sampling=value.random_sampling,
        overall_sampling=value.overall_sampling, verbose=bool(value.verbose),
        max_path_tag_length=value.max_path_tag_length,
        tags=tuple(trace_tag(a, f"{path}.attributes[{i}]") for i, a in enumerate(value.attributes)),
        spawn_upstream_span=value.spawn_upstream_span,
        # The last detector listed wins (kgateway's rule).
        environment_detector=bool(detectors and detectors[-1] and detectors[-1].enable),
        always_on=otel.sampler is not None and otel.sampler.always_on is not None,
    )


def trace_tag(attr: CustomAttribute, path: str) -> ir_listener.TraceTag:
    kinds = [k for k in ("literal", "environment", "request_header", "metadata") if getattr(attr, k) is not None]
    if len(kinds) != 1:
        raise Invalid(path, "exactly one of literal, environment, requestHeader or metadata must be set")
    if attr.literal is not None:
        return ir_listener.TraceTag(attr.name, "literal", attr.literal.value)
    if attr.environment is not None:
        return ir_listener.TraceTag(attr.name, "environment", attr.environment.name, attr.environment.default_value)
    if attr.request_header is not None:
        name = header_name(attr.request_header.name, f"{path}.requestHeader.name", pseudo=True)
        return ir_listener.TraceTag(attr.name, "header", name, attr.request_header.default_value)
    meta = attr.metadata
    assert meta is not None
    return ir_listener.TraceTag(attr.name, "metadata", meta.metadata_key.key, meta.default_value,
                                metadata_kind=meta.kind, path=tuple(p.key for p in meta.metadata_key.path))
