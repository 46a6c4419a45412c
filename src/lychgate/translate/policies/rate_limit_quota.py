"""RateLimitQuota GatewayExtensions (a rate limit quota server, RLQS) and
`rateLimit.quota`: the bucket a route's requests fall in. The server assigns each
bucket its quota (allow all, deny all, a token bucket) over
envoy.service.rate_limit_quota.v3; Envoy applies `noAssignmentBehavior` until it
has, and `expiredAssignmentBehavior` once an assignment lapses."""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.api.policy import GatewayExtension
from lychgate.store import Store
from lychgate.translate.policies.extensions import (
    SERVICES,
    VALIDATORS,
    check_grpc,
    cluster_name,
    extension_cluster,
    lookup,
    service_retry,
    use_service,
)
from lychgate.translate.values import CompileContext, Invalid, duration_ms, header_name

RATE_LIMIT_QUOTA = "RateLimitQuota"
DEFAULT_REPORTING_MS = 5000  # kgateway's default reporting interval


def _validate(ext: GatewayExtension) -> None:
    provider = ext.spec.rate_limit_quota
    assert provider is not None
    check_grpc(provider.grpc_service, "spec.rateLimitQuota.grpcService")


def quota_service(store: Store, namespace: str, name: str) -> tuple[ir.ExtensionService, list[ir.Cluster]]:
    ext = lookup(store, namespace, name, RATE_LIMIT_QUOTA)
    provider = ext.spec.rate_limit_quota
    assert provider is not None
    grpc = provider.grpc_service
    service = ir.RateLimitQuotaService(
        name=f"{ext.namespace}/{ext.name}", cluster=cluster_name(ext), domain=provider.domain,
        authority=grpc.authority,
        timeout_ms=duration_ms(grpc.request_timeout, "") if grpc.request_timeout else None,
        retry=service_retry(grpc.retry, ""),
    )
    return service, [extension_cluster(store, ext, grpc, grpc=True)]


def _bucket(entries: list[dict[str, Any]], path: str) -> tuple[tuple[str, str, str], ...]:
    out: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        where, key = f"{path}[{i}]", entry["key"]
        if key in seen:
            raise Invalid(f"{where}.key", f"{key!r} appears twice in the bucket")
        seen.add(key)
        if entry["type"] == "Generic":
            if entry.get("header") is not None or entry.get("value") is None:
                raise Invalid(where, "a Generic entry sets value (and not header)")
            out.append((key, "generic", entry["value"]))
        else:
            if entry.get("value") is not None or entry.get("header") is None:
                raise Invalid(where, "a Header entry sets header (and not value)")
            out.append((key, "header", header_name(entry["header"], f"{where}.header")))
    return tuple(out)


def compile_quota(ctx: CompileContext, value: dict[str, Any], path: str) -> ir.RateLimitQuota:
    """`rateLimit.quota` as the route's bucket; raises Invalid, or Unresolved when its
    extension cannot be used (the policy is then not applied)."""
    bucket = _bucket(value["bucket"], f"{path}.bucket")
    interval = value.get("reportingInterval")
    # Envoy refuses a reporting interval under 100 ms.
    reporting = duration_ms(interval, f"{path}.reportingInterval", 100) if interval else DEFAULT_REPORTING_MS
    expired = value.get("expiredAssignmentBehavior")
    expiry = None
    if expired is not None:
        timeout = duration_ms(expired["timeout"], f"{path}.expiredAssignmentBehavior.timeout", 1)
        expiry = (expired.get("strategy", "Allow"), timeout)
    # After the fields: an invalid policy says so before a missing extension does.
    service = use_service(ctx, RATE_LIMIT_QUOTA, value["extensionRef"])
    assert isinstance(service, ir.RateLimitQuotaService)
    return ir.RateLimitQuota(
        service=service, bucket=bucket, reporting_interval_ms=reporting,
        no_assignment=value.get("noAssignmentBehavior"), expired=expiry, deny_status=value.get("denyStatus"),
    )


VALIDATORS[RATE_LIMIT_QUOTA] = _validate
SERVICES[RATE_LIMIT_QUOTA] = quota_service
