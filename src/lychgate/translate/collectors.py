"""gRPC services Envoy streams telemetry to: a ListenerPolicy's `grpcService` → a cluster.

An access log service or an OpenTelemetry collector is a Service named by
`backendRef` (another namespace needs a ReferenceGrant from ListenerPolicy);
each becomes an HTTP/2 cluster of its own, named after the Service and port,
so policies naming the same collector share it.
"""

from __future__ import annotations

import dataclasses

from lychgate import ir, ir_listener
from lychgate.api.listener_policy import CommonGrpcService
from lychgate.api.lychgate import GROUP
from lychgate.store import Store
from lychgate.translate.references import resolve_service
from lychgate.translate.values import Invalid, Unresolved, duration_ms, header_name


def collector(store: Store, kind: str, namespace: str, svc: CommonGrpcService,
              path: str) -> tuple[ir_listener.GrpcCollector, ir.Cluster]:
    """The collector and its cluster; Invalid for a value that cannot be served,
    Unresolved for a Service that cannot be reached (yet)."""
    ref = svc.backend_ref
    if ref.group not in ("", "core") or ref.kind != "Service":
        raise Invalid(f"{path}.backendRef.kind", f"{ref.group or 'core'}/{ref.kind} is not supported; use a Service")
    if ref.port is None:
        raise Invalid(f"{path}.backendRef.port", "a port is required")
    timeout = duration_ms(svc.timeout, f"{path}.timeout", 1) if svc.timeout else None
    metadata = tuple((header_name(h.key, f"{path}.initialMetadata[{i}].key"), h.value or "")
                     for i, h in enumerate(svc.initial_metadata))
    retries = base = most = None
    if svc.retry_policy is not None:
        retries = svc.retry_policy.num_retries or 1
        backoff = svc.retry_policy.retry_back_off
        if backoff is not None:
            base = duration_ms(backoff.base_interval, f"{path}.retryPolicy.retryBackOff.baseInterval", 1)
            most = (duration_ms(backoff.max_interval, f"{path}.retryPolicy.retryBackOff.maxInterval", 1)
                    if backoff.max_interval else base * 10)
            if most < base:
                raise Invalid(f"{path}.retryPolicy.retryBackOff.maxInterval", "must not be less than baseInterval")
    target_ns = ref.namespace or namespace
    res = resolve_service(store, from_group=GROUP, from_kind=kind, from_namespace=namespace,
                          group=ref.group, kind=ref.kind, namespace=target_ns, name=ref.name, port=ref.port)
    if res.cluster is None:
        raise Unresolved(res.reason, f"{path}.backendRef: {res.message}")
    cluster = dataclasses.replace(res.cluster, name=f"collector/{target_ns}/{ref.name}/{ref.port}", protocol="h2c")
    return ir_listener.GrpcCollector(
        cluster=cluster.name, authority=svc.authority, timeout_ms=timeout, initial_metadata=metadata,
        max_receive_message_length=svc.max_receive_message_length, skip_envoy_headers=svc.skip_envoy_headers,
        retries=retries, retry_base_ms=base, retry_max_ms=most,
    ), cluster
