"""MCP Backends, for Envoy and for the MCP relay (lychgate.mcp).

Envoy gets, per Gateway whose routes use an MCP Backend, the relay's loopback port: the
Backend's cluster has that one endpoint (xds/translator/mcp_gateway.py names the
Backend in a header the relay reads). The relay gets the MCPConfig built here: each MCP
Backend's targets resolved to addresses. Static targets are taken as written; a
`selector` target is every port, of the Services it selects, whose appProtocol says MCP
(kgateway's `kgateway.dev/mcp`, or `agentgateway.dev/mcp`), named `<service>-<port>`,
at the path of the Service's annotation `kgateway.dev/mcp-path` (else /mcp), with its
ready endpoints as replicas (the relay opens each session on the next one and keeps it
there: the server holds the session). Built whole each pass (a few Backends): a Service that gains
the label or an endpoint shows up without touching routes.
"""

from __future__ import annotations

import dataclasses

from lychgate import ir
from lychgate.api.backend import Backend
from lychgate.api.core import Namespace, Service
from lychgate.api.mcp import McpSelector, McpTargetSelector
from lychgate.api.selectors import matches
from lychgate.mcp import config as relay
from lychgate.store import Store
from lychgate.translate.service_endpoints import service_endpoints

APP_PROTOCOLS = frozenset({"kgateway.dev/mcp", "agentgateway.dev/mcp"})
PATH_ANNOTATIONS = ("kgateway.dev/mcp-path", "agentgateway.dev/mcp-path")


def backend_id(backend: Backend) -> str:
    return f"{backend.namespace}/{backend.name}"


def finish(gateways: dict[str, ir.GatewayIR], port: int) -> None:
    """Gateways with MCP clusters learn where the relay is; the clusters get it as their endpoint."""
    for ref, gw in gateways.items():
        if any(c.discovery == "mcp" for c in gw.clusters):
            relay_endpoint = (ir.Endpoint("127.0.0.1", port),)
            clusters = tuple(dataclasses.replace(c, endpoints=relay_endpoint) if c.discovery == "mcp" else c
                             for c in gw.clusters)
            gateways[ref] = dataclasses.replace(gw, clusters=clusters, mcp_relay_port=port)


def build(store: Store, gateways: dict[str, ir.GatewayIR]) -> relay.MCPConfig:
    """Every MCP Backend some Gateway routes to, its targets resolved; nothing while none does."""
    used = {c.mcp_backend for gw in gateways.values() for c in gw.clusters if c.discovery == "mcp"}
    out = relay.MCPConfig()
    for backend in store.list(Backend):
        if backend.spec.mcp is not None and backend_id(backend) in used:
            out.backends[backend_id(backend)] = relay.Backend(backend_id(backend), targets_of(store, backend))
    return out


def for_gateway(config: relay.MCPConfig, gateway: ir.GatewayIR) -> relay.MCPConfig:
    """The Backends one Gateway's proxy routes to: another Gateway's targets never reach its Pod."""
    ids = {c.mcp_backend for c in gateway.clusters if c.discovery == "mcp"}
    return relay.MCPConfig({i: b for i, b in config.backends.items() if i in ids})


def per_gateway(config: relay.MCPConfig, gateways: dict[str, ir.GatewayIR]) -> dict[str, relay.MCPConfig]:
    return {ref: for_gateway(config, gw) for ref, gw in gateways.items() if gw.mcp_relay_port}


def targets_of(store: Store, backend: Backend) -> tuple[relay.Target, ...]:
    return tuple(t for found in _by_entry(store, backend) for t in found)


def summary(store: Store, backend: Backend) -> str:
    """The Backend's targets as its status says them; a selector that finds nothing is named."""
    by_entry = _by_entry(store, backend)
    names = [t.name for found in by_entry for t in found]
    empty = [f"targets[{i}]" for i, found in enumerate(by_entry) if not found]
    out = f"ready for routes: {len(names)} targets ({', '.join(names)})" if names else "ready for routes: no target yet"
    if empty:
        out += (f"; {', '.join(empty)} selects no Service port with appProtocol "
                f"{' or '.join(sorted(APP_PROTOCOLS))} and a ready endpoint")
    return out


def _by_entry(store: Store, backend: Backend) -> list[list[relay.Target]]:
    """The targets of each entry of `mcp.targets` (a static one: itself; a selector: what it finds)."""
    assert backend.spec.mcp is not None
    return [[_static(entry)] if entry.static is not None else _selected(store, backend.namespace,
                                                                         entry.services_selected)
            for entry in backend.spec.mcp.targets]


def _static(entry: McpTargetSelector) -> relay.Target:
    static = entry.static
    assert static is not None
    protocol: relay.Protocol = "SSE" if static.protocol == "SSE" else "StreamableHTTP"
    return relay.Target(entry.target_name, static.host, static.port, static.path or relay.DEFAULT_PATHS[protocol],
                        protocol)


def _selected(store: Store, namespace: str, selector: McpSelector | None) -> list[relay.Target]:
    out: list[relay.Target] = []
    if selector is None:
        return out
    for service in sorted(_services(store, namespace, selector), key=lambda s: (s.namespace, s.name)):
        annotations = service.metadata.annotations or {}
        path = next((annotations[a] for a in PATH_ANNOTATIONS if a in annotations), relay.DEFAULT_PATHS["StreamableHTTP"])
        for port in service.spec.ports:
            if port.app_protocol not in APP_PROTOCOLS:
                continue
            endpoints = service_endpoints(store, service, port)
            if endpoints:
                out.append(relay.Target(f"{service.name}-{port.port}", endpoints[0].address, endpoints[0].port, path,
                                        replicas=tuple((e.address, e.port) for e in endpoints)))
    return out


def _services(store: Store, namespace: str, selector: McpSelector) -> list[Service]:
    """The Services the selector finds: its label selectors turned to plain dicts once, not
    once a Service (this runs every pass), and only the namespaces it searches listed."""
    by_namespace, by_service = selector.namespaces, selector.services
    in_namespaces = None if by_namespace is None else by_namespace.model_dump(by_alias=True)
    of_services = None if by_service is None else by_service.model_dump(by_alias=True)
    namespaces = ({namespace} if in_namespaces is None else
                  {ns.name for ns in store.list(Namespace) if matches(in_namespaces, ns.metadata.labels or {})})
    return [s for ns in namespaces for s in store.list(Service, ns)
            if of_services is None or matches(of_services, s.metadata.labels or {})]
