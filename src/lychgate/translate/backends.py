"""Backend objects as backendRefs: static hosts, dynamic forward proxy, AWS Lambda
(translate/aws_lambda.py), Google Cloud services (translate/gcp.py), priority groups (translate/priority_groups.py), MCP servers
(translate/mcp_config.py).

A route (or GatewayExtension) naming `group: gateway.lychgate.dev, kind: Backend`
gets a cluster named `backend_<namespace>_<name>_0`, kgateway's name (`.../dfp` for a forward proxy); the backendRef's port is not
used, the Backend's hosts carry theirs. A Backend that cannot be served keeps
its routes' share of traffic at 500, and its own status says why.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any, Literal

from lychgate import ir
from lychgate.api.backend import GROUPS, Backend
from lychgate.api.base import ObjectKey
from lychgate.store import Store
from lychgate.translate import (
    ai_backends,
    aws_lambda,
    backend_config,
    gcp,
    mcp_config,
    priority_groups,
)
from lychgate.translate.conditions import condition
from lychgate.translate.grants import grant_allows
from lychgate.translate.values import Invalid, Unresolved

_H2 = frozenset({"http2", "grpc", "kubernetes.io/h2c"})


def is_backend_ref(group: str, kind: str) -> bool:
    return group in GROUPS and kind == "Backend"


def cluster_name(namespace: str, name: str) -> str:
    return f"backend_{namespace}_{name}_0"  # kgateway's name (a Backend has no port: 0)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def aws_lambda_of(clusters: Iterable[ir.Cluster | None]) -> ir.AwsLambda | None:
    """The function a rule's requests invoke: that of its first Lambda backend (Envoy's
    filter acts only on requests routed to a Lambda cluster, so other backends are untouched)."""
    return next((c.aws_lambda for c in clusters if c is not None and c.aws_lambda is not None), None)


def ai_route_of(clusters: Iterable[ir.Cluster | None]) -> ir.AIRoute | None:
    """A rule to an AI Backend: one attempt per priority group of its first AI backend."""
    cluster = next((c for c in clusters if c is not None and c.discovery == "ai"), None)
    if cluster is None:
        return None
    return ir.AIRoute(groups=len({e.priority for e in cluster.ai_endpoints}))


def gcp_of(clusters: Iterable[ir.Cluster | None]) -> bool:
    """A rule to a GCP Backend: its listener fetches identity tokens for its requests."""
    return any(c is not None and c.gcp_audience is not None for c in clusters)


def mcp_of(clusters: Iterable[ir.Cluster | None]) -> bool:
    """A rule to an MCP Backend: Envoy's MCP filter reads its requests."""
    return any(c is not None and c.discovery == "mcp" for c in clusters)


def problem(store: Store, backend: Backend) -> str:
    """Why the Backend cannot be served, or ""."""
    if backend.spec.ai is not None:
        try:
            ai_backends.providers_of(store, backend)
        except (Invalid, Unresolved) as err:
            return str(err)
    if backend.spec.gcp is not None:
        return gcp.problem(backend)
    if backend.spec.aws is not None:
        if refused := aws_lambda.refusal(backend):
            return refused
        try:
            aws_lambda.function(store, backend)
        except aws_lambda.LambdaProblem as err:
            return str(err)
    for i, group in enumerate(backend.spec.priority_groups or ()):
        for j, ref in enumerate(group.backend_refs):
            why = priority_groups.member_problem(store, backend, ref.name)
            member = store.get(Backend, backend.namespace, ref.name)
            if not why and member is not None:
                why = problem(store, member)
            if why:
                return f"priorityGroups[{i}].backendRefs[{j}]: {why}"
    return ""


def cluster(store: Store, backend: Backend) -> ir.Cluster:
    name = cluster_name(backend.namespace, backend.name)
    config = backend_config.for_backend(store, backend)
    if backend.spec.ai is not None:  # its providers; their credentials go to the AI extension only
        endpoints = tuple(ir.AIEndpoint(p.id, p.host, p.port, p.tls, group)
                          for group, p in ai_backends.providers_of(store, backend))
        return ir.Cluster(name=name, endpoints=(), discovery="ai", ai_endpoints=endpoints, config=config)
    if backend.spec.aws is not None:
        scheme, host, port = aws_lambda.endpoint(backend)
        tls = ir.UpstreamTLS(sni=host, ca=None, sans=(("Hostname", host),)) if scheme == "https" else None
        return ir.Cluster(name=name, endpoints=(ir.Endpoint(host, port),), discovery="static" if _is_ip(host) else "dns",
                          tls=tls, config=config, aws_lambda=aws_lambda.function(store, backend))
    if backend.spec.gcp is not None:
        return gcp.cluster(backend, name, config, _is_ip(backend.spec.gcp.host))
    if backend.spec.mcp is not None:  # the relay beside Envoy (its port: mcp_config.finish) serves its targets
        return ir.Cluster(name=name, endpoints=(), discovery="mcp", config=config,
                          mcp_backend=f"{backend.namespace}/{backend.name}")
    if backend.spec.dynamic_forward_proxy is not None:
        return ir.Cluster(name=f"{name}/dfp", endpoints=(), discovery="forward_proxy", config=config,
                          forward_proxy_tls=bool(backend.spec.dynamic_forward_proxy.enable_tls))
    if backend.spec.priority_groups is not None:  # its groups are resolved with the routes (references.py)
        return ir.Cluster(name=name, endpoints=(), discovery="priority_groups", config=config)
    static = backend.spec.static
    assert static is not None
    app = static.app_protocol or ""
    protocol: Literal["http1", "h2c", "ws"] = "h2c" if app in _H2 else "ws" if app == "kubernetes.io/ws" else "http1"
    discovery: Literal["static", "dns"] = "static" if all(_is_ip(h.host) for h in static.hosts) else "dns"
    return ir.Cluster(name=name, endpoints=tuple(ir.Endpoint(h.host, h.port) for h in static.hosts),
                      protocol=protocol, discovery=discovery, config=config)


def resolve(store: Store, from_group: str, from_kind: str, from_namespace: str, group: str,
            namespace: str, name: str) -> tuple[ir.Cluster | None, str, str]:
    """(cluster, reason, message) for a backendRef to a Backend; reason "ResolvedRefs" when usable."""
    if not grant_allows(store, from_group, from_kind, from_namespace, group, "Backend", namespace, name):
        return None, "RefNotPermitted", (
            f"Backend {namespace}/{name} is in another namespace and no ReferenceGrant in {namespace} "
            f"allows {from_kind} from {from_namespace} to refer to it")
    backend = store.get(Backend, namespace, name)
    if backend is None:
        return None, "BackendNotFound", f"Backend {namespace}/{name} not found"
    why = problem(store, backend)
    if why:
        return None, "InvalidKind", f"Backend {namespace}/{name}: {why}"
    return cluster(store, backend), "ResolvedRefs", ""


def write_status(store: Store, out: dict[ObjectKey, dict[str, Any]]) -> None:
    for backend in store.list(Backend):
        why = problem(store, backend)
        ready = mcp_config.summary(store, backend) if backend.spec.mcp is not None else "ready for routes"
        accepted = (condition("Accepted", False, "Invalid", why, backend.generation) if why
                    else condition("Accepted", True, "Accepted", f"{backend.spec.kind} backend is {ready}",
                                   backend.generation))
        out[backend.key] = {"conditions": [accepted]}
