"""Tracing of a listener (ListenerPolicy `tracing`) → an OpenTelemetry tracer in the connection manager.

Spans go over OTLP/gRPC to the collector's cluster; sampling percentages,
custom tags, the service name, the environment resource detector and the
AlwaysOn sampler are set as the policy asks.
"""

from __future__ import annotations

from envoy.config.trace.v3 import opentelemetry_pb2 as otel_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.extensions.tracers.opentelemetry.resource_detectors.v3 import (
    environment_resource_detector_pb2,
)
from envoy.extensions.tracers.opentelemetry.samplers.v3 import always_on_sampler_pb2
from envoy.type.metadata.v3 import metadata_pb2
from envoy.type.tracing.v3 import custom_tag_pb2

from lychgate import ir, ir_listener
from lychgate.xds.translator.collector import grpc_service
from lychgate.xds.translator.features import Feature, register


def custom_tag(t: ir_listener.TraceTag) -> custom_tag_pb2.CustomTag:
    tag = custom_tag_pb2.CustomTag(tag=t.name)
    if t.kind == "literal":
        tag.literal.value = t.value
    elif t.kind == "environment":
        tag.environment.name = t.value
        tag.environment.default_value = t.default or ""
    elif t.kind == "header":
        tag.request_header.name = t.value
        tag.request_header.default_value = t.default or ""
    else:
        getattr(tag.metadata.kind, t.metadata_kind.lower()).SetInParent()
        tag.metadata.metadata_key.CopyFrom(metadata_pb2.MetadataKey(
            key=t.value, path=[metadata_pb2.MetadataKey.PathSegment(key=k) for k in t.path]))
        tag.metadata.default_value = t.default or ""
    return tag


def tracing(t: ir_listener.Tracing) -> hcm_pb.HttpConnectionManager.Tracing:
    config = otel_pb.OpenTelemetryConfig(grpc_service=grpc_service(t.collector), service_name=t.service_name)
    if t.environment_detector:
        detector = config.resource_detectors.add(name="envoy.tracers.opentelemetry.resource_detectors.environment")
        detector.typed_config.Pack(environment_resource_detector_pb2.EnvironmentResourceDetectorConfig())
    if t.always_on:
        config.sampler.name = "envoy.tracers.opentelemetry.samplers.always_on"
        config.sampler.typed_config.Pack(always_on_sampler_pb2.AlwaysOnSamplerConfig())
    out = hcm_pb.HttpConnectionManager.Tracing(verbose=t.verbose, custom_tags=[custom_tag(x) for x in t.tags])
    for attr in ("client_sampling", "random_sampling", "overall_sampling"):
        value = getattr(t, attr)
        if value is not None:
            getattr(out, attr).value = value
    if t.max_path_tag_length is not None:
        out.max_path_tag_length.value = t.max_path_tag_length
    if t.spawn_upstream_span is not None:
        out.spawn_upstream_span.value = t.spawn_upstream_span
    out.provider.name = "envoy.tracers.opentelemetry"
    out.provider.typed_config.Pack(config)
    return out


class TracingFeature(Feature):
    name = "tracing"

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if listener.settings is not None and listener.settings.tracing is not None:
            hcm.tracing.CopyFrom(tracing(listener.settings.tracing))


register(TracingFeature())
