"""GatewayExtensions: the services ext auth and ext proc call, and their status.

An extension lives in a namespace and names its backing Service; a Service in
another namespace needs a ReferenceGrant there from GatewayExtension in the
extension's namespace. Each extension becomes its own Envoy cluster (HTTP/2
for gRPC), so two extensions sharing a Service never disagree about protocol.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from lychgate import cel, ir
from lychgate.api.gateway import BackendObjectReference
from lychgate.api.lychgate import GROUP
from lychgate.api.policy import (
    ExtAuthBufferSettings,
    ExtGrpcService,
    ExtHttpService,
    ExtProcProvider,
    ExtSvcRetryPolicy,
    GatewayExtension,
    MetadataNamespaces,
)
from lychgate.store import Store
from lychgate.translate.conditions import condition
from lychgate.translate.policies import extension_backend
from lychgate.translate.values import (
    CompileContext,
    Invalid,
    Unresolved,
    duration_ms,
    header_name,
)

EXT_AUTH, EXT_PROC, RATE_LIMIT = "ExtAuth", "ExtProc", "RateLimit"
# spec field -> extension type, in kgateway's order (exactly one is set)
TYPES = {"extAuth": "ExtAuth", "extProc": "ExtProc", "rateLimit": "RateLimit", "rateLimitQuota": "RateLimitQuota",
         "jwt": "JWT", "oauth2": "OAuth2"}
_ATTRS = {"extAuth": "ext_auth", "extProc": "ext_proc", "rateLimit": "rate_limit",
          "rateLimitQuota": "rate_limit_quota", "jwt": "jwt", "oauth2": "oauth2"}

# Extension types implemented by their own feature modules (jwt_auth, oauth2):
# type -> a function raising Invalid for the first field that cannot be served.
VALIDATORS: dict[str, Callable[[GatewayExtension], None]] = {}
# type -> (namespace, name) -> the service every listener gets a filter for, and its
# clusters; raises Unresolved. ExtAuth, ExtProc and RateLimit are registered at the bottom.
SERVICES: dict[str, Callable[[Store, str, str], tuple[ir.ExtensionService, list[ir.Cluster]]]] = {}


def cluster_name(ext: GatewayExtension) -> str:
    return f"extension/{ext.namespace}/{ext.name}"


def _present(ext: GatewayExtension) -> list[str]:
    return [field for field, attr in _ATTRS.items() if getattr(ext.spec, attr) is not None]


def extension_type(ext: GatewayExtension) -> str | None:
    present = _present(ext)
    return TYPES[present[0]] if len(present) == 1 else None


def validate(ext: GatewayExtension) -> None:
    """Raise Invalid naming the first field that cannot be served."""
    spec = ext.spec
    present = _present(ext)
    if len(present) != 1:
        raise Invalid("spec", f"exactly one of {', '.join(TYPES)} must be set"
                      + (f" (found {', '.join(present)})" if present else ""))
    kind = TYPES[present[0]]
    if spec.type is not None and spec.type != kind:
        raise Invalid("spec.type", f"is {spec.type} but the spec configures {present[0]}")
    if kind in VALIDATORS:
        VALIDATORS[kind](ext)
        return
    if kind not in (EXT_AUTH, EXT_PROC, RATE_LIMIT):
        raise Invalid(f"spec.{present[0]}", f"{kind} extensions are not supported by lychgate yet")
    if spec.rate_limit is not None:
        check_grpc(spec.rate_limit.grpc_service, "spec.rateLimit.grpcService")
        duration_ms(spec.rate_limit.timeout, "spec.rateLimit.timeout", 1)
    if spec.ext_auth is not None:
        auth = spec.ext_auth
        if (auth.grpc_service is None) == (auth.http_service is None):
            raise Invalid("spec.extAuth", "exactly one of grpcService or httpService must be set")
        if auth.grpc_service is not None:
            check_grpc(auth.grpc_service, "spec.extAuth.grpcService")
        if auth.http_service is not None:
            http = auth.http_service
            check_backend(http.backend_ref, "spec.extAuth.httpService.backendRef")
            if http.request_timeout is not None:
                duration_ms(http.request_timeout, "spec.extAuth.httpService.requestTimeout", 1)
            if http.path_prefix is not None and not http.path_prefix.startswith("/"):
                raise Invalid("spec.extAuth.httpService.pathPrefix", f"{http.path_prefix!r} must start with '/'")
            service_retry(http.retry, "spec.extAuth.httpService.retry")
            req = http.authorization_request
            for name in req.headers_to_add if req else {}:
                header_name(name, f"spec.extAuth.httpService.authorizationRequest.headersToAdd[{name}]")
            resp = http.authorization_response
            for label, names in (("headersToBackend", resp.headers_to_backend if resp else []),
                                 ("headersToClient", resp.headers_to_client if resp else []),
                                 ("headersToClientOnSuccess", resp.headers_to_client_on_success if resp else [])):
                for i, name in enumerate(names):  # matched exactly: a name no header can have never matches
                    header_name(name, f"spec.extAuth.httpService.authorizationResponse.{label}[{i}]")
        for i, name in enumerate(auth.headers_to_forward):
            header_name(name, f"spec.extAuth.headersToForward[{i}]", pseudo=True)
    if spec.ext_proc is not None:
        proc = spec.ext_proc
        check_grpc(proc.grpc_service, "spec.extProc.grpcService")
        for attr, label in (("message_timeout", "messageTimeout"), ("max_message_timeout", "maxMessageTimeout")):
            value = getattr(proc, attr)
            if value is not None:
                duration_ms(value, f"spec.extProc.{label}", 1)
        for i, expr in enumerate(proc.request_attributes):
            try:  # Envoy compiles each one as a CEL expression; a bad one would fail the whole listener
                cel.parse(expr)
            except cel.CelError as err:
                raise Invalid(f"spec.extProc.requestAttributes[{i}]", f"{expr!r} is not a CEL expression: {err}") from None


def check_grpc(svc: ExtGrpcService, path: str) -> None:
    check_backend(svc.backend_ref, f"{path}.backendRef")
    if svc.request_timeout is not None:
        duration_ms(svc.request_timeout, f"{path}.requestTimeout", 1)
    service_retry(svc.retry, f"{path}.retry")


def service_retry(retry: ExtSvcRetryPolicy | None, path: str) -> ir.ServiceRetry | None:
    if retry is None:
        return None
    backoff = retry.backoff
    base = duration_ms(backoff.base_interval, f"{path}.backoff.baseInterval", 1) if backoff else None
    top = duration_ms(backoff.max_interval, f"{path}.backoff.maxInterval", 1) if backoff and backoff.max_interval else None
    if base is not None and top is not None and top < base:
        raise Invalid(f"{path}.backoff.maxInterval", "must be at least baseInterval")
    return ir.ServiceRetry(retry.attempts, base, top)


def check_backend(ref: BackendObjectReference, path: str) -> None:
    if extension_backend.is_backend(ref.group, ref.kind):
        return
    if ref.group not in ("", "core") or ref.kind != "Service":
        raise Invalid(f"{path}.kind", f"{ref.group or 'core'}/{ref.kind} is not supported; use a Service "
                                      f"or a {GROUP} Backend")
    if ref.port is None:
        raise Invalid(f"{path}.port", "a port is required")


def _service_path(ext: GatewayExtension, svc: ExtGrpcService | ExtHttpService) -> str:
    """Where `svc` sits in the extension's spec (`spec.extAuth.grpcService`)."""
    for label, attr in _ATTRS.items():
        owner = getattr(ext.spec, attr)
        for field, name in (("grpc_service", "grpcService"), ("http_service", "httpService")):
            if owner is not None and getattr(owner, field, None) is svc:
                return f"spec.{label}.{name}"
    return "spec"


def extension_cluster(store: Store, ext: GatewayExtension, svc: ExtGrpcService | ExtHttpService, grpc: bool) -> ir.Cluster:
    ref = svc.backend_ref
    res = extension_backend.resolve(store, "GatewayExtension", ext.namespace, ref, "an extension service")
    if res.reason == "InvalidKind":
        raise Unresolved("InvalidKind", f"GatewayExtension {ext.namespace}/{ext.name} "
                                        f"{_service_path(ext, svc)}.backendRef: {res.message}")
    if res.cluster is None:
        what = "Backend" if extension_backend.is_backend(ref.group, ref.kind) else "Service"
        where = f"{ref.namespace or ext.namespace}/{ref.name}"
        if res.reason == "RefNotPermitted":
            raise Unresolved(
                "RefNotPermitted",
                f"ReferenceGrant missing for {what} {where}: GatewayExtension {ext.namespace}/{ext.name} "
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
        "percentage_enabled": auth.percentage_enabled,
    }
    if auth.grpc_service is not None:
        grpc = auth.grpc_service
        cluster = extension_cluster(store, ext, grpc, grpc=True)
        timeout = duration_ms(grpc.request_timeout, "") if grpc.request_timeout else None
        return ir.ExtAuthService(protocol="grpc", authority=grpc.authority, timeout_ms=timeout,
                                 retry=service_retry(grpc.retry, ""), **common), cluster
    http = auth.http_service
    assert http is not None
    cluster = extension_cluster(store, ext, http, grpc=False)
    timeout = duration_ms(http.request_timeout, "") if http.request_timeout else None
    req, resp = http.authorization_request, http.authorization_response

    def lower(names: list[str] | None) -> tuple[str, ...]:
        return tuple(h.lower() for h in names or [])

    return ir.ExtAuthService(
        protocol="http", timeout_ms=timeout, path_prefix=http.path_prefix, retry=service_retry(http.retry, ""),
        headers_to_add=tuple(sorted((k.lower(), v) for k, v in (req.headers_to_add if req else {}).items())),
        allowed_upstream_headers=lower(resp.headers_to_backend if resp else None),
        allowed_client_headers=lower(resp.headers_to_client if resp else None),
        allowed_client_headers_on_success=lower(resp.headers_to_client_on_success if resp else None),
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
    cluster = extension_cluster(store, ext, grpc, grpc=True)
    mode = processing_mode(proc.processing_mode.model_dump(by_alias=True, exclude_none=True)
                           if proc.processing_mode else None)
    return ir.ExtProcService(
        name=f"{ext.namespace}/{ext.name}", cluster=cluster_name(ext), authority=grpc.authority,
        timeout_ms=duration_ms(grpc.request_timeout, "") if grpc.request_timeout else None,
        fail_open=proc.fail_open, processing_mode=mode or ir.ProcessingMode(),
        message_timeout_ms=duration_ms(proc.message_timeout, "") if proc.message_timeout else None,
        max_message_timeout_ms=(duration_ms(proc.max_message_timeout, "")
                                if proc.max_message_timeout else None),
        stat_prefix=proc.stat_prefix, route_cache_action=proc.route_cache_action, retry=service_retry(grpc.retry, ""),
        allow_mode_override=proc.allow_processing_mode_override,
        allowed_override_modes=tuple(
            processing_mode(m.model_dump(by_alias=True, exclude_none=True)) or ir.ProcessingMode()
            for m in proc.allowed_processing_mode_overrides),
        forward_typed_metadata=tuple(fwd.typed) if (fwd := _forwarding(proc)) else (),
        forward_untyped_metadata=tuple(fwd.untyped) if fwd else (),
        receive_untyped_metadata=tuple(proc.metadata_options.receiving.untyped)
        if proc.metadata_options and proc.metadata_options.receiving else (),
        request_attributes=tuple(proc.request_attributes),
        **_stage(proc),
    ), cluster


def _forwarding(proc: ExtProcProvider) -> MetadataNamespaces | None:
    return proc.metadata_options.forwarding if proc.metadata_options else None


def _stage(proc: ExtProcProvider) -> dict[str, Any]:
    """filterStage as ir.ExtProcService fields; unset keeps kgateway's default (After AuthZ)."""
    stage = proc.filter_stage
    return {"stage": (stage.stage, stage.predicate), "stage_weight": stage.weight} if stage else {}


def rate_limit_service(store: Store, namespace: str, name: str) -> tuple[ir.RateLimitService, ir.Cluster]:
    ext = lookup(store, namespace, name, RATE_LIMIT)
    limit = ext.spec.rate_limit
    assert limit is not None
    grpc = limit.grpc_service
    return ir.RateLimitService(
        name=f"{ext.namespace}/{ext.name}", cluster=cluster_name(ext), domain=limit.domain, authority=grpc.authority,
        timeout_ms=duration_ms(limit.timeout, ""), fail_open=limit.fail_open,
        x_ratelimit_headers=limit.x_rate_limit_headers == "DraftVersion03",
        percent_enabled=limit.percent_enabled, percent_enforced=limit.percent_enforced,
    ), extension_cluster(store, ext, grpc, grpc=True)


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
    kind = extension_type(ext)
    conds = [condition("Accepted", True, "Valid", f"{kind} extension is valid", gen)]
    try:
        if kind in VALIDATORS:  # a feature module's type: resolved when its service resolves
            _service, clusters = SERVICES[kind](store, ext.namespace, ext.name)
            ready = sum(len(c.endpoints) for c in clusters)
            where = f"; {ready} ready endpoint(s)" if clusters else ""
            conds.append(condition("ResolvedRefs", True, "ResolvedRefs", f"every reference resolved{where}", gen))
            return {"conditions": conds}
        if ext.spec.ext_auth is not None:
            svc: ExtGrpcService | ExtHttpService | None = ext.spec.ext_auth.grpc_service or ext.spec.ext_auth.http_service
        elif ext.spec.rate_limit is not None:
            svc = ext.spec.rate_limit.grpc_service
        else:
            svc = ext.spec.ext_proc.grpc_service if ext.spec.ext_proc else None
        assert svc is not None
        cluster = extension_cluster(store, ext, svc, grpc=isinstance(svc, ExtGrpcService))
        ready = len(cluster.endpoints)
        ref = svc.backend_ref
        where = f"{ref.namespace or ext.namespace}/{ref.name}"
        what = (f"Backend {where}" if extension_backend.is_backend(ref.group, ref.kind)
                else f"Service {where} port {ref.port}")
        conds.append(condition("ResolvedRefs", True, "ResolvedRefs", f"{what}: {ready} ready endpoint(s)", gen))
    except Unresolved as err:
        conds.append(condition("ResolvedRefs", False, err.reason, err.message, gen))
    return {"conditions": conds}


def use_service(ctx: CompileContext, kind: str, ref: dict[str, str]) -> ir.ExtensionService:
    """The service of the extension a policy names, its clusters added to the context;
    raises Unresolved when it cannot be used."""
    service, clusters = SERVICES[kind](ctx.store, ref["namespace"], ref["name"])
    ctx.clusters.update((c.name, c) for c in clusters)
    return service


def _ext_auth(store: Store, namespace: str, name: str) -> tuple[ir.ExtensionService, list[ir.Cluster]]:
    service, cluster = ext_auth_service(store, namespace, name)
    return service, [cluster]


def _ext_proc(store: Store, namespace: str, name: str) -> tuple[ir.ExtensionService, list[ir.Cluster]]:
    service, cluster = ext_proc_service(store, namespace, name)
    return service, [cluster]


def _rate_limit(store: Store, namespace: str, name: str) -> tuple[ir.ExtensionService, list[ir.Cluster]]:
    service, cluster = rate_limit_service(store, namespace, name)
    return service, [cluster]


SERVICES[EXT_AUTH] = _ext_auth
SERVICES[EXT_PROC] = _ext_proc
SERVICES[RATE_LIMIT] = _rate_limit
