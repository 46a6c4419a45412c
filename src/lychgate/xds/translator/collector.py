"""A telemetry collector (ir_listener.GrpcCollector) → Envoy's GrpcService (envoy_grpc)."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2, grpc_service_pb2

from lychgate import ir_listener


def grpc_service(c: ir_listener.GrpcCollector) -> grpc_service_pb2.GrpcService:
    svc = grpc_service_pb2.GrpcService(envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=c.cluster))
    if c.authority:
        svc.envoy_grpc.authority = c.authority
    if c.max_receive_message_length is not None:
        svc.envoy_grpc.max_receive_message_length.value = c.max_receive_message_length
    if c.skip_envoy_headers is not None:
        svc.envoy_grpc.skip_envoy_headers = c.skip_envoy_headers
    if c.timeout_ms is not None:
        svc.timeout.FromMilliseconds(c.timeout_ms)
    for key, value in c.initial_metadata:
        svc.initial_metadata.append(base_pb2.HeaderValue(key=key, value=value))
    if c.retries is not None:
        policy = svc.retry_policy
        policy.num_retries.value = c.retries
        if c.retry_base_ms is not None:
            policy.retry_back_off.base_interval.FromMilliseconds(c.retry_base_ms)
        if c.retry_max_ms is not None:
            policy.retry_back_off.max_interval.FromMilliseconds(c.retry_max_ms)
    return svc
