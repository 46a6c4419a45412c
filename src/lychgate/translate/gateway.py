"""Gateway API → IR: one pass over the store, producing per-Gateway IR and status.

Pure given its inputs: the store, the infrastructure facts (addresses) and the
feedback from running proxies (for example a port Envoy could not bind).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lychgate import ir
from lychgate.ai.config import AIConfig
from lychgate.api.base import ObjectKey
from lychgate.api.gateway import Gateway, GatewayClass, GRPCRoute, HTTPRoute, ParentReference
from lychgate.api.lychgate import GROUP as LYCHGATE_GROUP
from lychgate.api.lychgate import GatewayParameters
from lychgate.mcp.config import DEFAULT_RELAY_PORT, MCPConfig
from lychgate.store import Read, Store
from lychgate.translate import (
    ai_config,
    backend_config,
    backends,
    backendtls,
    gcp,
    hostnames,
    inference,
    listener_policy,
    mcp_config,
    mesh,
    parameters,
)
from lychgate.translate.aggregate import (
    POLICY_KINDS,
    ROUTE_LEVEL_KINDS,
    Aggregate,
    AnyRoute,
    Contribution,
    Entry,
)
from lychgate.translate.conditions import condition, resolved_refs
from lychgate.translate.grpcroutes import compile_grpc_route
from lychgate.translate.listeners import ListenerState, validate_listeners
from lychgate.translate.listenersets import listener_sets, set_status
from lychgate.translate.parents import (
    CONTROLLER_NAME,
    Attached,
    GatewayCtx,
    attach,
    find_parent,
    missing_parent,
    parent_status,
)
from lychgate.translate.policies import PolicyIndex
from lychgate.translate.policies.merge import deep_merge_fields
from lychgate.translate.quarantine import Entry as QuarantineEntry
from lychgate.translate.quarantine import Quarantine
from lychgate.translate.routes import CompiledRoute, compile_route, for_listener, precedence_key
from lychgate.translate.secrets import resolve_certificates
from lychgate.translate.streams import Streams, translate_streams

# Gateway API features the translator implements, for GatewayClass status.supportedFeatures
# (ascending, as the API asks).
SUPPORTED_FEATURES: tuple[str, ...] = (
    "BackendTLSPolicy",
    "BackendTLSPolicySANValidation",
    # Session persistence under the names newer Gateway API releases test (HTTPRoute and
    # GRPCRoute); HTTPRouteSessionPersistenceCookie below is the older name.
    "CookieSessionPersistence",
    "CookieSessionPersistencePermanentLifetime",
    "GRPCRoute",
    "GRPCRouteNamedRouteRule",
    "Gateway",
    "GatewayAddressEmpty",
    "GatewayBackendClientCertificate",
    "GatewayFrontendClientCertificateValidation",
    "GatewayFrontendClientCertificateValidationInsecureFallback",
    "GatewayHTTPListenerIsolation",
    "GatewayHTTPSListenerDetectMisdirectedRequests",
    "GatewayPort8080",
    "GatewayStaticAddresses",
    "HTTPRoute",
    "HTTPRoute303RedirectStatusCode",
    "HTTPRoute307RedirectStatusCode",
    "HTTPRoute308RedirectStatusCode",
    "HTTPRouteBackendProtocolH2C",
    "HTTPRouteBackendProtocolWebSocket",
    "HTTPRouteBackendRequestHeaderModification",
    "HTTPRouteBackendTimeout",
    "HTTPRouteCORS",
    "HTTPRouteHostRewrite",
    "HTTPRouteMethodMatching",
    "HTTPRouteNamedRouteRule",
    "HTTPRouteParentRefPort",
    "HTTPRoutePathRedirect",
    "HTTPRoutePathRewrite",
    "HTTPRoutePortRedirect",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestMultipleMirrors",
    "HTTPRouteRequestPercentageMirror",
    "HTTPRouteRequestTimeout",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteRetry",
    "HTTPRouteSchemeRedirect",
    "HTTPRouteSessionPersistenceCookie",
    "ListenerSet",
    "ReferenceGrant",
    "TCPRoute",
    "TLSRoute",
    "TLSRouteModeMixed",
    "TLSRouteModeTerminate",
    "UDPRoute",
)


@dataclass(frozen=True)
class ProxyIntent:
    """What the deployer needs to run one Gateway's proxy."""

    namespace: str
    name: str
    address: str
    log_level: str
    ports: tuple[int, ...]  # TCP
    udp_ports: tuple[int, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    parameters: GatewayParameters | None = None

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def self_managed(self) -> bool:
        """GatewayParameters `selfManaged`: the user runs the proxy; nothing is deployed for it."""
        return self.parameters is not None and self.parameters.spec.self_managed is not None


@dataclass
class Feedback:
    """Facts from the running data plane that status must reflect."""

    # (gateway ref, port) -> why Envoy could not program that listener
    listener_errors: dict[tuple[str, int], str] = field(default_factory=dict)
    # gateway ref -> None (no proxy yet) / "" (programmed) / why not
    proxy_state: dict[str, str | None] = field(default_factory=dict)
    # gateway ref -> why the proxy rejected its latest configuration (NACK), or
    # what strict validation holds back
    rejected: dict[str, str] = field(default_factory=dict)


@dataclass
class Translation:
    gateways: dict[str, ir.GatewayIR] = field(default_factory=dict)
    proxies: dict[str, ProxyIntent] = field(default_factory=dict)
    status: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)
    ai: AIConfig = field(default_factory=AIConfig)  # for the AI extension (credentials: never in `gateways`)
    mcp: MCPConfig = field(default_factory=MCPConfig)  # for the MCP relay: the MCP Backends' targets


AddressFor = Callable[[Gateway], str | None]
# Where clients reach a Gateway, for its status.addresses, when that is not the
# address Envoy binds (in Kubernetes: the Service's load balancer, not 0.0.0.0).
StatusAddresses = Callable[[Gateway], list[dict[str, str]]]


def translate(
    store: Store, address_for: AddressFor, feedback: Feedback | None = None,
    policy_merge: Mapping[str, Any] | None = None,
    status_addresses: StatusAddresses | None = None,
    state: Aggregate | None = None,
    waypoint_enabled: bool = False,
    inference_enabled: bool = False,
    quarantine: Quarantine | None = None,
    global_policy_namespace: str = "",
    ai_extension_port: int = ai_config.DEFAULT_EXTENSION_PORT,
    mcp_relay_port: int = DEFAULT_RELAY_PORT,
    gcp_metadata_server: str = gcp.DEFAULT_METADATA_SERVER,
    class_parameters_refs: Mapping[str, Mapping[str, str]] | None = None,
) -> Translation:
    """Translate the store. With a `state` kept across calls, a call after changes
    to routes, Services, EndpointSlices or ReferenceGrants only redoes the routes
    those changes reach (see translate/aggregate.py). Rules in `quarantine`
    answer 500 (translate/quarantine.py). `class_parameters_refs`: the installation's
    GatewayParameters of each class (Helm's gatewayClassParametersRefs), under all others."""
    with inference.serving(inference_enabled):
        out = _translate(store, address_for, feedback, policy_merge, status_addresses, state, waypoint_enabled,
                         quarantine or Quarantine(), global_policy_namespace, class_parameters_refs or {})
    if state is not None and state.revision is not None:
        store.forget_changes_until(state.revision)  # the state kept asks only what changed after it
    if store.count("Backend"):  # AI Backends are Backends: nothing to do without any
        ai_config.finish(out.gateways, ai_extension_port)
        out.ai = ai_config.build(store, out.gateways)
        mcp_config.finish(out.gateways, mcp_relay_port)
        out.mcp = mcp_config.build(store, out.gateways)
        gcp.finish(out.gateways, gcp_metadata_server)
    return out


def _translate(
    store: Store, address_for: AddressFor, feedback: Feedback | None, policy_merge: Mapping[str, Any] | None,
    status_addresses: StatusAddresses | None, state: Aggregate | None, waypoint_enabled: bool,
    quarantine: Quarantine, global_policy_namespace: str, class_parameters_refs: Mapping[str, Mapping[str, str]],
) -> Translation:
    feedback = feedback or Feedback()
    state = state or Aggregate()
    out = Translation()
    classes = _our_classes(store, out, waypoint_enabled)
    ours = {(gw.namespace, gw.name): gw for gw in sorted(store.list(Gateway), key=lambda g: (g.namespace, g.name))
            if gw.spec.gateway_class_name in classes}
    # ListenerPolicies before the listeners: their client certificate validation
    # decides whether a TLS listener can be served at all.
    listeners: listener_policy.ListenerPolicyIndex | None = None
    if any(store.count(k.KIND) for k in listener_policy.KINDS):
        listeners = listener_policy.ListenerPolicyIndex(
            store, ours, {k: {l.name: l.port for l in gw.spec.listeners} for k, gw in ours.items()},
            feedback.listener_errors)
    ctxs: dict[tuple[str, str], GatewayCtx] = {}
    for key, gw in ours.items():
        if mesh.is_waypoint(gw):
            ctxs[key] = GatewayCtx(gw, mesh.waypoint_listeners(gw, store))
        else:
            sets = listener_sets(store, gw)
            checks = functools.partial(listeners.client_validation, gw) if listeners is not None else None
            ctxs[key] = GatewayCtx(gw, validate_listeners(gw, store, sets, checks), sets)
            if listeners is not None:
                # The policies heard of each listener before its certificates and conflicts were settled.
                listeners.not_served(gw, {l.name: why for l in ctxs[key].listeners
                                          if l.owner is None and (why := l.not_served) is not None})

    deep = deep_merge_fields(policy_merge)
    changes = _update_routes(store, state, ctxs, quarantine, deep)
    policies = state.policies
    state.touch_targets(policies.refresh(
        store, {k: c.gateway for k, c in ctxs.items()}, {k: {l.name for l in c.own} for k, c in ctxs.items()},
        deep, changes, global_policy_namespace))
    # The virtual hosts rebuilt this pass resolve their route rules again; waypoints, every pass.
    policies.ledger.release(state.dirty)
    policies.ledger.release(("mesh", k) for k in ctxs)
    out.status.update(state.route_statuses())
    streams = translate_streams(store, ctxs)
    out.status.update(streams.status)
    for ctx in ctxs.values():
        gw_key = (ctx.gateway.namespace, ctx.gateway.name)
        for listener in ctx.listeners:
            listener.attached_routes = (len(state.listener_routes.get((gw_key, listener.id), ()))
                                        + streams.attached.get((gw_key, listener.id), 0))

    # Waypoints (translate/mesh.py): Service-parented routes, before the Gateways' status is written.
    meshed = mesh.translate_mesh(
        store, {k: (c.gateway, c.listeners) for k, c in ctxs.items() if mesh.is_waypoint(c.gateway)}, policies)
    for ctx in ctxs.values():
        class_name = ctx.gateway.spec.gateway_class_name
        _finish_gateway(store, state, ctx, classes[class_name], class_parameters_refs.get(class_name), address_for,
                        feedback, out, policies, streams, status_addresses)
    meshed.finish(out.gateways, out.status)
    if listeners is not None:
        out.gateways = {ref: listeners.apply(g) for ref, g in out.gateways.items()}
        listeners.write_status(out.status)
    # Policy and pool status walk every Gateway's clusters or routes: only when there are any.
    if store.count("BackendTLSPolicy"):
        backendtls.write_status(store, backendtls.service_users(
            ((g.namespace, g.name), (c.name for c in g.clusters)) for g in out.gateways.values()), out.status)
    if store.count("Backend"):
        backends.write_status(store, out.status)
    if store.count(backend_config.KIND):
        backend_config.write_status(store, backend_config.backend_users(
            ((g.namespace, g.name), (c.name for c in g.clusters)) for g in out.gateways.values()), out.status)
    if store.count("InferencePool"):
        inference.pool_status(store, ((route, {gw for gw, *_ in c.attachments}) for route, c in state.routes.values()
                                      if isinstance(route, HTTPRoute)), out.status)
    state.drop_unrequested()
    policies.write_status(out.status)
    state.settle(store.revision)
    return out


def _update_routes(store: Store, state: Aggregate, ctxs: dict[tuple[str, str], GatewayCtx],
                   quarantine: Quarantine, deep: frozenset[str]) -> set[Read] | None:
    """Bring the aggregate up to date: every route on a full pass, else only the
    routes that changed or read something that changed. Returns what changed since
    the last pass (None: a full pass)."""
    # Which listeners routes may attach to: it can change with no Gateway or route changing
    # (a ConfigMap or ListenerPolicy that a listener's client certificate check reads).
    usable = tuple((k, tuple(l.usable for l in c.listeners)) for k, c in ctxs.items())
    signature = (tuple((k, c.gateway) for k, c in ctxs.items()), deep, usable)
    changes = store.changes_since(state.revision) if state.revision is not None else None
    incremental = (
        changes is not None
        and state.signature is not None
        and len(signature[0]) == len(state.signature[0])
        and all(a[0] == b[0] and a[1] is b[1] for a, b in zip(signature[0], state.signature[0], strict=True))
        and signature[1:] == state.signature[1:]
        and all(what != "key" or ident.kind in ROUTE_LEVEL_KINDS  # type: ignore[attr-defined]
                or ident.kind in POLICY_KINDS for what, ident in changes)  # type: ignore[attr-defined]
    )
    requarantined = quarantine.prune(store)
    if incremental:
        assert changes is not None
        state.subtrees.forget(changes)
        dirty = state.affected(changes) | requarantined
    else:
        state.reset()
        dirty = {r.key for r in store.list(HTTPRoute)} | {r.key for r in store.list(GRPCRoute)}
    state.signature = signature
    for key in sorted(dirty):
        state.remove(key)
        route = store.get_key(key)
        if isinstance(route, HTTPRoute | GRPCRoute):
            with store.tracking() as reads:
                contribution = _contribution(store, route, ctxs, quarantine.rules_of(key), state)
            state.add(key, route, contribution, reads)
    return changes if incremental else None


def _our_classes(store: Store, out: Translation, waypoint_enabled: bool) -> dict[str, GatewayClass]:
    ours: dict[str, GatewayClass] = {}
    for gc in store.list(GatewayClass):
        if gc.spec.controller_name != CONTROLLER_NAME:
            continue
        not_served = mesh.class_problem(gc, waypoint_enabled)
        if not_served:
            out.status[gc.key] = {"conditions": [condition("Accepted", False, "Unsupported", not_served, gc.generation)]}
            continue
        ours[gc.name] = gc
        ok, message = True, "GatewayClass is accepted by lychgate"
        ref = gc.spec.parameters_ref
        if ref is not None:
            if ref.group != LYCHGATE_GROUP or ref.kind != "GatewayParameters":
                ok, message = False, f"parametersRef must be {LYCHGATE_GROUP}/GatewayParameters, not {ref.group}/{ref.kind}"
            elif store.get(GatewayParameters, ref.namespace or "", ref.name) is None:
                ok, message = False, f"GatewayParameters {ref.namespace}/{ref.name} not found"
        out.status[gc.key] = {
            "conditions": [
                condition("Accepted", ok, "Accepted" if ok else "InvalidParameters", message, gc.generation)
            ],
            "supportedFeatures": [{"name": f} for f in SUPPORTED_FEATURES],
        }
    return ours


def _contribution(store: Store, route: AnyRoute, ctxs: dict[tuple[str, str], GatewayCtx],
                  quarantined: Mapping[int, QuarantineEntry], state: Aggregate) -> Contribution:
    """What one route adds, under every parent Gateway of ours (its status and Clusters
    the very objects of the routes with equal ones, from `state`)."""
    compiled: CompiledRoute | None = None
    parents: list[dict[str, Any]] = []
    attachments: list[tuple[tuple[str, str], str, str, tuple[str, ...]]] = []
    for ref in route.spec.parent_refs:
        found = find_parent(store, route, ref, ctxs)
        if found is None:
            continue  # not a parent of ours to report
        ctx, ns = found
        if ctx is None:
            parents.append(missing_parent(route, ref, ns))
            continue
        if compiled is None:
            compiled = (compile_grpc_route(store, route, quarantined) if isinstance(route, GRPCRoute)
                        else compile_route(store, route, quarantined, subtrees=state.subtrees))
        conds, attached = _attachment(store, route, ref, ctx, compiled)
        gw_key = state.gateway_key(ctx.gateway.namespace, ctx.gateway.name)
        attachments.extend((gw_key, listener.id, route_table(listener), tuple(hosts)) for listener, hosts in attached)
        parents.append(parent_status(route, ref, conds))
    return Contribution(
        attachments=tuple(attachments),
        routes=tuple(compiled.routes) if compiled else (),
        clusters=tuple(map(state.shared_cluster, compiled.clusters.values())) if compiled else (),
        status=state.status_pool.shared({"parents": parents}) if parents else None,
        delegated=compiled.delegation.entries() if compiled else (),
    )


def route_table(listener: ListenerState) -> str:
    """The RouteConfiguration a listener's routes go into: one per plain HTTP port
    (hostnames keep listeners apart), one per HTTPS listener (its own TLS chain)."""
    # Interned: every route's attachments hold the name.
    if listener.spec.protocol == "HTTPS":
        return sys.intern(f"https-{listener.spec.port}-{listener.id}")
    return sys.intern(f"http-{listener.spec.port}")


def _attachment(
    store: Store, route: AnyRoute, ref: ParentReference, ctx: GatewayCtx, compiled: CompiledRoute
) -> tuple[list[dict[str, Any]], Attached]:
    """A route's conditions under one parent, and the (listener, hostnames) it attaches to."""
    gen = route.generation
    refused, attached = attach(store, route, ref, ctx, list(route.spec.hostnames))
    conds: list[dict[str, Any]] = []
    if refused is not None:
        conds.append(refused)
    elif compiled.rule_count and len(compiled.replaced) == compiled.rule_count:
        conds.append(condition("Accepted", False, "UnsupportedValue",
                               "every rule is invalid and answers 500: " + "; ".join(compiled.replaced), gen))
    else:
        message = f"attached to {', '.join(l.name for l, _ in attached)}"
        if compiled.notes:
            message += "; not honoured: " + "; ".join(compiled.notes)
        conds.append(condition("Accepted", True, "Accepted", message, gen))
    conds.append(resolved_refs(compiled.unresolved_reason, compiled.unresolved, gen))
    if compiled.replaced and len(compiled.replaced) < compiled.rule_count:
        conds.append(condition("PartiallyInvalid", True, "UnsupportedValue",
                               "replaced by a direct 500 response: " + "; ".join(compiled.replaced), gen))
    if compiled.quarantined:
        conds.append(condition("Programmed", False, "Rejected", "; ".join(compiled.quarantined), gen))
    return conds, attached


def _parameters(store: Store, gw: Gateway, gc: GatewayClass, installed: Mapping[str, str] | None,
                ports: tuple[int, ...]) -> tuple[GatewayParameters | None, str | None]:
    """The GatewayParameters of the installation (`installed`: Helm's gatewayClassParametersRefs
    for the class), of the class and of the Gateway, merged in that order (translate/parameters.py);
    `ports`: the Gateway's TCP listener ports, which its proxy's objects expose."""
    cref = gc.spec.parameters_ref
    layers = [parameters.installed(store, gc.name, installed),
              store.get(GatewayParameters, cref.namespace or "", cref.name)
              if cref and cref.group == LYCHGATE_GROUP and cref.kind == "GatewayParameters" else None]
    infra = gw.spec.infrastructure
    if infra and infra.parameters_ref:
        ref = infra.parameters_ref
        if ref.group != LYCHGATE_GROUP or ref.kind != "GatewayParameters":
            return None, f"spec.infrastructure.parametersRef must be {LYCHGATE_GROUP}/GatewayParameters, not {ref.group}/{ref.kind}"
        params = store.get(GatewayParameters, gw.namespace, ref.name)
        if params is None:
            return None, f"spec.infrastructure.parametersRef: GatewayParameters {gw.namespace}/{ref.name} not found"
        layers.append(params)
    merged, problem = parameters.checked(gw, layers, ports)
    if merged is not None and problem is not None:
        return None, f"GatewayParameters {merged.namespace}/{merged.name}: {problem}"
    return merged, None


@functools.lru_cache(maxsize=4096)
def _presenting(cluster: ir.Cluster, certificate: ir.Certificate) -> ir.Cluster:
    """A TLS cluster that presents the Gateway's client certificate. Cached: the same
    cluster object every pass, so the xDS wire cache serializes it once."""
    assert cluster.tls is not None
    return dataclasses.replace(cluster, tls=dataclasses.replace(cluster.tls, client_certificate=certificate))


def _backend_client_certificate(store: Store, gw: Gateway) -> tuple[ir.Certificate | None, dict[str, Any] | None]:
    """The certificate the Gateway presents to TLS backends (spec.tls.backend), and
    the Gateway's ResolvedRefs condition about it (None when none is configured)."""
    ref = gw.spec.tls.backend.client_certificate_ref if gw.spec.tls and gw.spec.tls.backend else None
    if ref is None:
        return None, None
    resolved = resolve_certificates(store, "Gateway", gw.namespace, [ref])
    if resolved.reason != "ResolvedRefs":
        reason = "RefNotPermitted" if resolved.reason == "RefNotPermitted" else "InvalidClientCertificateRef"
        message = resolved.message.replace("tls.certificateRefs[0]", "spec.tls.backend.clientCertificateRef")
        return None, condition("ResolvedRefs", False, reason, message, gw.generation)
    return resolved.certificates[0], condition("ResolvedRefs", True, "ResolvedRefs",
                                               "the backend client certificate is resolved", gw.generation)


def _virtual_host(
    gw: Gateway, gw_key: tuple[str, str], table: str, host: str, entries: list[Entry], policies: PolicyIndex,
    port: int, port_listeners: dict[str, str | None], https: bool,
) -> ir.VirtualHost:
    # Listener isolation: a request belongs to the most specific listener whose
    # hostname matches it; routes that came through another listener don't serve it.
    owner = hostnames.owner(host, port_listeners)
    name = f"{table.removeprefix('http-')}/{host}" if table.startswith("http-") else f"{table}/{host}"
    mine = [e for e in entries if e[2] == owner]
    if https and not mine:
        return _misdirected_host(gw, name, (host,))
    ordered = sorted(mine, key=lambda e: precedence_key(e[0], e[1]))
    # (the ledger keeps it while the host lives: one gateway key for all of them)
    vkey = (gw_key, table, host)
    routes = tuple(for_listener(policies.apply(vkey, gw, listener, route, r), port, https)
                   for route, r, listener in ordered)
    return ir.VirtualHost(name=name, domains=(host,), routes=routes)


MISDIRECTED_BODY = "this host is served by another listener of this gateway; open a new connection for it\n"


def _misdirected_host(gw: Gateway, name: str, domains: tuple[str, ...]) -> ir.VirtualHost:
    """HTTP 421: the connection's TLS name chose one listener, the Host header
    belongs to another (a client reusing a connection across hostnames)."""
    source = ir.RouteSource("Gateway", gw.namespace, gw.name, 0, 0, "misdirected")
    route = ir.Route(source=source, match=ir.Match(), action=ir.DirectResponse(421, MISDIRECTED_BODY))
    return ir.VirtualHost(name=name, domains=domains, routes=(route,))


def _https_tables(gw: Gateway, agg: Aggregate, serving: list[ListenerState], address: str,
                  policies: PolicyIndex) -> list[ir.HTTPListener]:
    """One TLS filter chain and RouteConfiguration per HTTPS listener."""
    out = []
    gw_key = (gw.namespace, gw.name)
    for port in sorted({l.spec.port for l in serving if l.spec.protocol == "HTTPS"}):
        on_port = [l for l in serving if l.spec.port == port and l.spec.protocol in ("HTTPS", "TLS")]
        names = {l.id: l.spec.hostname for l in on_port}
        for listener in (l for l in on_port if l.spec.protocol == "HTTPS"):
            table = route_table(listener)
            vhosts = agg.virtual_hosts(gw_key, table, functools.partial(
                _virtual_host, gw, gw_key, policies=policies, port=port, port_listeners=names, https=True))
            taken = {d for vh in vhosts for d in vh.domains}
            # Hosts other listeners of the port own answer 421; with a hostname of
            # its own, every other host does too.
            others = [h for n, h in names.items() if n != listener.id and h and h not in taken]
            if listener.spec.hostname and "*" not in taken:
                others.append("*")
            extra = [_misdirected_host(gw, f"{table}/misdirected/{h}", (h,)) for h in others]
            assert listener.tls is not None
            extensions, policy_filters = policies.filters_for(vhosts)
            out.append(ir.HTTPListener(
                name=table, address=address, port=port, virtual_hosts=(*vhosts, *extra),
                server_names=(listener.spec.hostname,) if listener.spec.hostname else (),
                tls=listener.tls, extensions=extensions, policy_filters=policy_filters))
    return out


def _gateway_conditions(ctx: GatewayCtx, address: str | None, params_error: str | None,
                        feedback: Feedback, self_managed: bool = False) -> tuple[list[dict[str, Any]], bool]:
    """A Gateway's Accepted and Programmed conditions (and the InsecureFrontendValidationMode
    warning), and whether its proxy is to serve."""
    gw = ctx.gateway
    gen = gw.generation
    ref = f"{gw.namespace}/{gw.name}"
    conds: list[dict[str, Any]] = []
    own_usable = [l for l in ctx.own if l.usable]
    unsupported = [f"spec.addresses[{i}]: type {a.type} is not supported (use IPAddress)"
                   for i, a in enumerate(gw.spec.addresses) if a.type != "IPAddress"]
    # Requested addresses the proxy does not get (locally: not loopback, or beyond the first).
    unusable = [a.value for a in gw.spec.addresses if a.type == "IPAddress" and a.value and a.value != address]
    if unsupported:
        conds.append(condition("Accepted", False, "UnsupportedAddress", "; ".join(unsupported), gen))
    elif params_error:
        conds.append(condition("Accepted", False, "InvalidParameters", params_error, gen))
    elif not own_usable:
        conds.append(condition("Accepted", False, "ListenersNotValid", "no listener is valid", gen))
    elif len(own_usable) < len(ctx.own):
        bad = ", ".join(l.name for l in ctx.own if not l.usable)
        conds.append(condition("Accepted", True, "ListenersNotValid", f"invalid listeners are not served: {bad}", gen))
    else:
        conds.append(condition("Accepted", True, "Accepted", "Gateway is accepted", gen))

    serving = not unsupported and not params_error and bool(own_usable) and address is not None
    state = feedback.proxy_state.get(ref)
    if unusable:
        conds.append(condition("Programmed", False, "AddressNotUsable",
                               f"requested addresses {', '.join(unusable)} cannot be used"
                               + (f"; serving on {address}" if address else ""), gen))
    elif address is None:
        conds.append(condition("Programmed", False, "AddressNotAssigned", "no address could be assigned", gen))
    elif not serving:
        conds.append(condition("Programmed", False, "Invalid", "Gateway is not accepted, so no proxy is run", gen))
    elif ref in feedback.rejected:
        conds.append(condition("Programmed", False, "Invalid", feedback.rejected[ref], gen))
    elif state == "":
        conds.append(condition("Programmed", True, "Programmed", "proxy is running and has accepted its configuration", gen))
    elif self_managed:
        conds.append(condition("Programmed", False, "Pending", (
            f"self-managed (GatewayParameters selfManaged): waiting for a proxy with node id {ref} to connect "
            "to xDS and accept its configuration"), gen))
    else:
        conds.append(condition("Programmed", False, "Pending", state or "waiting for the proxy to start and accept its configuration", gen))

    insecure = [l.name for l in ctx.own if l.tls is not None and l.tls.client_optional]
    if insecure:
        # The Gateway API asks for this warning: these listeners let clients in without a valid certificate.
        conds.append(condition("InsecureFrontendValidationMode", True, "ConfigurationChanged",
                               f"listeners {', '.join(insecure)} accept clients without a valid certificate "
                               "(AllowInsecureFallback)", gen))
    return conds, serving


def _finish_gateway(
    store: Store,
    agg: Aggregate,
    ctx: GatewayCtx,
    gc: GatewayClass,
    installed: Mapping[str, str] | None,
    address_for: AddressFor,
    feedback: Feedback,
    out: Translation,
    policies: PolicyIndex,
    streams: Streams,
    status_addresses: StatusAddresses | None = None,
) -> None:
    gw = ctx.gateway
    gen = gw.generation
    ref = f"{gw.namespace}/{gw.name}"
    params, params_error = _parameters(store, gw, gc, installed, tuple(sorted(
        {l.spec.port for l in ctx.listeners if l.spec.protocol != "UDP"})))
    address = address_for(gw)

    for listener in ctx.listeners:
        error = feedback.listener_errors.get((ref, listener.spec.port))
        if listener.usable and error:
            listener.programmed_error = error

    self_managed = params is not None and params.spec.self_managed is not None
    conds, serving = _gateway_conditions(ctx, address, params_error, feedback, self_managed)
    client_cert, cert_condition = _backend_client_certificate(store, gw)
    if cert_condition is not None:
        conds.append(cert_condition)
    status: dict[str, Any] = {
        "conditions": conds,
        "listeners": [l.status(gen) for l in ctx.own],
    }
    accepted_sets = 0
    for ls, allowed in ctx.sets:
        ls_status = set_status(ls, allowed, [l for l in ctx.listeners if l.owner == (ls.namespace, ls.name)])
        out.status[ls.key] = ls_status
        accepted_sets += ls_status["conditions"][0]["status"] == "True"
    if ctx.sets:
        status["attachedListenerSets"] = accepted_sets
    if address is not None:
        addresses = status_addresses(gw) if status_addresses is not None else \
            [{"type": "IPAddress", "value": address}]
        if addresses:
            status["addresses"] = addresses
    out.status[gw.key] = status
    if not serving or address is None:
        return

    listeners: list[ir.HTTPListener] = []
    gw_key = (gw.namespace, gw.name)
    used = agg.cluster_users[gw_key]
    serving_listeners = [l for l in ctx.listeners if l.serving]
    for port in sorted({l.spec.port for l in serving_listeners if l.spec.protocol in ("HTTP", "HBONE")}):
        names = {l.id: l.spec.hostname for l in serving_listeners if l.spec.port == port}
        vhosts = agg.virtual_hosts(gw_key, f"http-{port}", functools.partial(
            _virtual_host, gw, gw_key, policies=policies, port=port, port_listeners=names, https=False))
        extensions, policy_filters = policies.filters_for(vhosts)
        listeners.append(ir.HTTPListener(name=f"http-{port}", address=address, port=port, virtual_hosts=tuple(vhosts),
                                         extensions=extensions, policy_filters=policy_filters))
    listeners += _https_tables(gw, agg, serving_listeners, address, policies)
    if store.count("InferencePool"):  # walks every route: only when pools exist
        listeners = [dataclasses.replace(l, pickers=inference.pickers(l.virtual_hosts)) for l in listeners]
    stream_listeners = streams.listeners(gw_key, address)
    extra = {**streams.clusters.get(gw_key, {}), **policies.clusters_for(ref)}
    # (The names in order are kept only for the routes' clusters alone, the common case.)
    served, in_order = used.clusters()
    clusters, order = ({**served, **extra}, None) if extra else (served, in_order)
    if client_cert is not None:
        clusters = {k: _presenting(c, client_cert) if c.tls is not None else c for k, c in clusters.items()}
    out.gateways[ref] = ir.GatewayIR(
        namespace=gw.namespace, name=gw.name, listeners=tuple(listeners),
        clusters=tuple(map(clusters.__getitem__, order or sorted(clusters))), streams=stream_listeners,
    )
    log_level = params.spec.kube.envoy_container.bootstrap.log_level if params else "info"
    infra = gw.spec.infrastructure
    out.proxies[ref] = ProxyIntent(
        namespace=gw.namespace, name=gw.name, address=address, log_level=log_level,
        ports=tuple(sorted({l.port for l in (*listeners, *stream_listeners) if not isinstance(l, ir.UDPListener)})),
        udp_ports=tuple(sorted({l.port for l in stream_listeners if isinstance(l, ir.UDPListener)})),
        labels=tuple(sorted(infra.labels.items())) if infra else (),
        annotations=tuple(sorted(infra.annotations.items())) if infra else (),
        parameters=params,
    )
