"""GatewayExtensions: the services ext auth and ext proc call, and their status.

An extension lives in a namespace and names its backing Service; a Service in
another namespace needs a ReferenceGrant there from GatewayExtension in the
extension's namespace. Each extension becomes its own Envoy cluster (HTTP/2
for gRPC), so two extensions sharing a Service never disagree about protocol.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lychgate import ir
from lychgate.api.backend import GROUPS as BACKEND_GROUPS
from lychgate.api.lychgate import GROUP
from lychgate.api.policy import (
    ExtAuthBufferSettings,
    ExtGrpcService,
    ExtHttpService,
    GatewayExtension,
)
from lychgate.store import Store
from lychgate.translate.conditions import condition
from lychgate.translate.policies.common import Invalid, Unresolved, duration_ms, header_name
from lychgate.translate.references import resolve_service

EXT_AUTH, EXT_PROC, RATE_LIMIT = "ExtAuth", "ExtProc", "RateLimit"


def cluster_name(ext: GatewayExtension) -> str:
    return f"extension/{ext.namespace}/{ext.name}"


def extension_type(ext: GatewayExtension) -> str | None:
    spec = ext.spec
    present = [t for t, v in (("ExtAuth", spec.ext_auth), ("ExtProc", spec.ext_proc),
                              ("RateLimit", spec.rate_limit),
                              ("JWTProviders", spec.jwt_providers or None)) if v]
    return present[0] if len(present) == 1 else None


def validate(ext: GatewayExtension) -> None:
    """Raise Invalid naming the first field that cannot be served."""
    spec = ext.spec
    present = [t for t, v in (("extAuth", spec.ext_auth), ("extProc", spec.ext_proc),
                              ("rateLimit", spec.rate_limit),
                              ("jwtProviders", spec.jwt_providers or None)) if v]
    if len(present) != 1:
        raise Invalid("spec", "exactly one of extAuth, extProc, rateLimit or jwtProviders must be set"
                      + (f" (found {', '.join(present)})" if present else ""))
    kind = extension_type(ext)
    if spec.type is not None and spec.type != kind:
        raise Invalid("spec.type", f"is {spec.type} but the spec configures {present[0]}")
    if spec.rate_limit is not None:
        _check_grpc(spec.rate_limit.grpc_service, "spec.rateLimit.grpcService")
        duration_ms(spec.rate_limit.timeout, "spec.rateLimit.timeout", 1)
    if spec.jwt_providers:
        raise Invalid("spec.jwtProviders", "JWT providers are not supported by lychgate yet")
    if spec.ext_auth is not None:
        auth = spec.ext_auth
        if (auth.grpc_service is None) == (auth.http_service is None):
            raise Invalid("spec.extAuth", "exactly one of grpcService or httpService must be set")
        if auth.grpc_service is not None:
            _check_grpc(auth.grpc_service, "spec.extAuth.grpcService")
        if auth.http_service is not None:
            http = auth.http_service
            _check_backend(http.backend_ref.kind, http.backend_ref.group, http.backend_ref.port,
                           "spec.extAuth.httpService.backendRef")
            if http.request_timeout is not None:
                duration_ms(http.request_timeout, "spec.extAuth.httpService.requestTimeout", 1)
            if http.path_prefix is not None and not http.path_prefix.startswith("/"):
                raise Invalid("spec.extAuth.httpService.pathPrefix", f"{http.path_prefix!r} must start with '/'")
            if http.retry is not None:
                raise Invalid("spec.extAuth.httpService.retry", "not supported by lychgate yet")
            req = http.authorization_request
            for i, h in enumerate(req.headers_to_add if req else []):
                header_name(h.name, f"spec.extAuth.httpService.authorizationRequest.headersToAdd[{i}].name")
            resp = http.authorization_response
            if resp and resp.dynamic_metadata_from_headers:
                raise Invalid("spec.extAuth.httpService.authorizationResponse.dynamicMetadataFromHeaders",
                              "not supported by lychgate yet")
        for i, name in enumerate(auth.headers_to_forward):
            header_name(name, f"spec.extAuth.headersToForward[{i}]", pseudo=True)
    if spec.ext_proc is not None:
        proc = spec.ext_proc
        _check_grpc(proc.grpc_service, "spec.extProc.grpcService")
        for attr, label in (("message_timeout", "messageTimeout"), ("max_message_timeout", "maxMessageTimeout")):
            value = getattr(proc, attr)
            if value is not None:
                duration_ms(value, f"spec.extProc.{label}", 1)
        if proc.metadata_options is not None:
            raise Invalid("spec.extProc.metadataOptions", "not supported by lychgate yet")


def _check_grpc(svc: ExtGrpcService, path: str) -> None:
    _check_backend(svc.backend_ref.kind, svc.backend_ref.group, svc.backend_ref.port, f"{path}.backendRef")
    if svc.request_timeout is not None:
        duration_ms(svc.request_timeout, f"{path}.requestTimeout", 1)
    if svc.retry is not None:
        raise Invalid(f"{path}.retry", "not supported by lychgate yet")


def _check_backend(kind: str, group: str, port: int | None, path: str) -> None:
    if group in BACKEND_GROUPS and kind == "Backend":
        return  # a Backend's hosts carry their own ports
    if group not in ("", "core") or kind != "Service":
        raise Invalid(f"{path}.kind", f"{group or 'core'}/{kind} is not supported; use a Service or a Backend")
    if port is None:
        raise Invalid(f"{path}.port", "a port is required")


def _cluster(store: Store, ext: GatewayExtension, svc: ExtGrpcService | ExtHttpService, grpc: bool) -> ir.Cluster:
    ref = svc.backend_ref
    res = resolve_service(
        store, from_group=GROUP, from_kind="GatewayExtension", from_namespace=ext.namespace,
        group=ref.group, kind=ref.kind, namespace=ref.namespace or ext.namespace, name=ref.name,
        port=ref.port,
    )
    if res.cluster is None:
        where = f"{ref.namespace or ext.namespace}/{ref.name}"
        if res.reason == "RefNotPermitted":
            raise Unresolved(
                "RefNotPermitted",
                f"ReferenceGrant missing for Service {where}: GatewayExtension {ext.namespace}/{ext.name} "
                f"may not refer to it until a ReferenceGrant in namespace {ref.namespace or ext.namespace} allows "
                f"{GROUP}/GatewayExtension from namespace {ext.namespace}",
            )
        raise Unresolved("BackendNotFound", f"GatewayExtension {ext.namespace}/{ext.name}: {res.message}")
    return dataclasses.replace(res.cluster, name=cluster_name(ext), protocol="h2c" if grpc else res.cluster.protocol)


def _buffer(settings: ExtAuthBufferSettings | None) -> ir.BodyBuffer | None:
    if settings is None:
        return None
    return ir.BodyBuffer(settings.max_request_bytes, settings.allow_partial_message, settings.pack_as_bytes)


def lookup(store: Store, namespace: str, name: str, want: str) -> GatewayExtension:
    ext = store.get(GatewayExtension, namespace, name)
    if ext is None:
        raise Unresolved("ExtensionNotFound", f"GatewayExtension {namespace}/{name} not found")
    try:
        validate(ext)
    except Invalid as err:
        raise Unresolved("ExtensionNotAccepted",
                         f"GatewayExtension {namespace}/{name} is not accepted: {err}") from None
    kind = extension_type(ext)
    if kind != want:
        raise Unresolved("InvalidExtension",
                         f"GatewayExtension {namespace}/{name} is of type {kind}, not {want}")
    return ext


def ext_auth_service(store: Store, namespace: str, name: str) -> tuple[ir.ExtAuthService, ir.Cluster]:
    ext = lookup(store, namespace, name, EXT_AUTH)
    auth = ext.spec.ext_auth
    assert auth is not None
    common: dict[str, Any] = {
        "name": f"{ext.namespace}/{ext.name}", "cluster": cluster_name(ext),
        "fail_open": auth.fail_open, "status_on_error": auth.status_on_error,
        "clear_route_cache": auth.clear_route_cache,
        "headers_to_forward": tuple(h.lower() for h in auth.headers_to_forward),
        "with_request_body": _buffer(auth.with_request_body), "stat_prefix": auth.stat_prefix,
    }
    if auth.grpc_service is not None:
        grpc = auth.grpc_service
        cluster = _cluster(store, ext, grpc, grpc=True)
        timeout = duration_ms(grpc.request_timeout, "") if grpc.request_timeout else None
        return ir.ExtAuthService(protocol="grpc", authority=grpc.authority, timeout_ms=timeout, **common), cluster
    http = auth.http_service
    assert http is not None
    cluster = _cluster(store, ext, http, grpc=False)
    timeout = duration_ms(http.request_timeout, "") if http.request_timeout else None
    req, resp = http.authorization_request, http.authorization_response
    headers = common.pop("headers_to_forward")
    if req and req.allowed_headers:
        headers = tuple(dict.fromkeys(headers + tuple(h.lower() for h in req.allowed_headers)))
    return ir.ExtAuthService(
        protocol="http", timeout_ms=timeout, path_prefix=http.path_prefix,
        headers_to_forward=headers,
        headers_to_add=tuple((h.name.lower(), h.value) for h in (req.headers_to_add if req else [])),
        allowed_upstream_headers=tuple(h.lower() for h in (resp.allowed_upstream_headers if resp else [])),
        allowed_client_headers=tuple(h.lower() for h in (resp.allowed_client_headers if resp else [])),
        **common,
    ), cluster


def processing_mode(mode: dict[str, Any] | None) -> ir.ProcessingMode | None:
    if not mode:
        return None
    return ir.ProcessingMode(
        request_header=mode.get("requestHeaderMode"), response_header=mode.get("responseHeaderMode"),
        request_body=mode.get("requestBodyMode"), response_body=mode.get("responseBodyMode"),
        request_trailer=mode.get("requestTrailerMode"), response_trailer=mode.get("responseTrailerMode"),
    )


def ext_proc_service(store: Store, namespace: str, name: str) -> tuple[ir.ExtProcService, ir.Cluster]:
    ext = lookup(store, namespace, name, EXT_PROC)
    proc = ext.spec.ext_proc
    assert proc is not None
    grpc = proc.grpc_service
    cluster = _cluster(store, ext, grpc, grpc=True)
    mode = processing_mode(proc.processing_mode.model_dump(by_alias=True, exclude_none=True)
                           if proc.processing_mode else None)
    return ir.ExtProcService(
        name=f"{ext.namespace}/{ext.name}", cluster=cluster_name(ext), authority=grpc.authority,
        timeout_ms=duration_ms(grpc.request_timeout, "") if grpc.request_timeout else None,
        fail_open=proc.fail_open, processing_mode=mode or ir.ProcessingMode(),
        message_timeout_ms=duration_ms(proc.message_timeout, "") if proc.message_timeout else None,
        max_message_timeout_ms=(duration_ms(proc.max_message_timeout, "")
                                if proc.max_message_timeout else None),
        stat_prefix=proc.stat_prefix, route_cache_action=proc.route_cache_action,
    ), cluster


def rate_limit_service(store: Store, namespace: str, name: str) -> tuple[ir.RateLimitService, ir.Cluster]:
    ext = lookup(store, namespace, name, RATE_LIMIT)
    limit = ext.spec.rate_limit
    assert limit is not None
    grpc = limit.grpc_service
    return ir.RateLimitService(
        name=f"{ext.namespace}/{ext.name}", cluster=cluster_name(ext), domain=limit.domain, authority=grpc.authority,
        timeout_ms=duration_ms(limit.timeout, ""), fail_open=limit.fail_open,
        x_ratelimit_headers=limit.x_rate_limit_headers == "DraftVersion03",
    ), _cluster(store, ext, grpc, grpc=True)


def extension_status(store: Store, ext: GatewayExtension) -> dict[str, Any]:
    """Accepted (the spec can be served) and ResolvedRefs (its Service can be reached)."""
    gen = ext.generation
    try:
        validate(ext)
    except Invalid as err:
        return {"conditions": [
            condition("Accepted", False, "Invalid", f"invalid field {err}", gen),
            condition("ResolvedRefs", False, "Invalid", "not resolved: the extension is invalid", gen),
        ]}
    conds = [condition("Accepted", True, "Valid", f"{extension_type(ext)} extension is valid", gen)]
    try:
        if ext.spec.ext_auth is not None:
            svc: ExtGrpcService | ExtHttpService | None = ext.spec.ext_auth.grpc_service or ext.spec.ext_auth.http_service
        elif ext.spec.rate_limit is not None:
            svc = ext.spec.rate_limit.grpc_service
        else:
            svc = ext.spec.ext_proc.grpc_service if ext.spec.ext_proc else None
        assert svc is not None
        cluster = _cluster(store, ext, svc, grpc=isinstance(svc, ExtGrpcService))
        ready = len(cluster.endpoints)
        ref = svc.backend_ref
        target = (f"Backend {ref.namespace or ext.namespace}/{ref.name}" if ref.kind == "Backend"
                  else f"Service {ref.namespace or ext.namespace}/{ref.name} port {ref.port}")
        conds.append(condition("ResolvedRefs", True, "ResolvedRefs", f"{target}: {ready} ready endpoint(s)", gen))
    except Unresolved as err:
        conds.append(condition("ResolvedRefs", False, err.reason, err.message, gen))
    return {"conditions": conds}
