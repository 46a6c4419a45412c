"""Gateway API → IR: one pass over the store, producing per-Gateway IR and status.

Pure given its inputs: the store, the infrastructure facts (addresses) and the
feedback from running proxies (for example a port Envoy could not bind).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.gateway import GROUP, Gateway, GatewayClass, HTTPRoute, ParentReference
from lychgate.api.lychgate import GROUP as LYCHGATE_GROUP
from lychgate.api.lychgate import GatewayParameters
from lychgate.store import Store
from lychgate.translate import inference, mesh
from lychgate.translate.aggregate import ROUTE_LEVEL_KINDS, Aggregate, Contribution
from lychgate.translate.conditions import condition
from lychgate.translate.hostnames import effective_hostnames
from lychgate.translate.listeners import ListenerState, validate_listeners
from lychgate.translate.policies import PolicyIndex
from lychgate.translate.routes import CompiledRoute, compile_route, precedence_key

CONTROLLER_NAME = "gateway.lychgate.dev/lychgate"

# Gateway API features the translator implements, for GatewayClass status.supportedFeatures
# (ascending, as the API asks).
SUPPORTED_FEATURES: tuple[str, ...] = (
    "Gateway",
    "GatewayPort8080",
    "HTTPRoute",
    "HTTPRouteBackendRequestHeaderModification",
    "HTTPRouteBackendTimeout",
    "HTTPRouteHostRewrite",
    "HTTPRouteMethodMatching",
    "HTTPRoutePathRedirect",
    "HTTPRoutePathRewrite",
    "HTTPRoutePortRedirect",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteRequestTimeout",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteSchemeRedirect",
    "ReferenceGrant",
)


@dataclass(frozen=True)
class ProxyIntent:
    """What the deployer needs to run one Gateway's proxy."""

    namespace: str
    name: str
    address: str
    log_level: str
    ports: tuple[int, ...]
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    parameters: GatewayParameters | None = None

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Feedback:
    """Facts from the running data plane that status must reflect."""

    # (gateway ref, port) -> why Envoy could not program that listener
    listener_errors: dict[tuple[str, int], str] = field(default_factory=dict)
    # gateway ref -> None (no proxy yet) / "" (programmed) / why not
    proxy_state: dict[str, str | None] = field(default_factory=dict)
    # gateway ref -> why the proxy rejected its latest configuration (NACK)
    rejected: dict[str, str] = field(default_factory=dict)
    # (kind, namespace, name) of a route -> why strict validation blocked it
    blocked_routes: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)


@dataclass
class Translation:
    gateways: dict[str, ir.GatewayIR] = field(default_factory=dict)
    proxies: dict[str, ProxyIntent] = field(default_factory=dict)
    status: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)


AddressFor = Callable[[Gateway], str | None]
# Where clients reach a Gateway, for its status.addresses, when that is not the
# address Envoy binds (in Kubernetes: the Service's load balancer, not 0.0.0.0).
StatusAddresses = Callable[[Gateway], list[dict[str, str]]]


@dataclass
class _GatewayCtx:
    gateway: Gateway
    listeners: list[ListenerState]
    by_name: dict[str, ListenerState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name = {l.name: l for l in self.listeners}


def translate(
    store: Store, address_for: AddressFor, feedback: Feedback | None = None,
    policy_merge: Mapping[str, Any] | None = None,
    status_addresses: StatusAddresses | None = None,
    state: Aggregate | None = None,
    waypoint_enabled: bool = False,
    inference_enabled: bool = False,
) -> Translation:
    """Translate the store. With a `state` kept across calls, a call after changes
    to routes, Services, EndpointSlices or ReferenceGrants only redoes the routes
    those changes reach (see translate/aggregate.py)."""
    with inference.serving(inference_enabled):
        return _translate(store, address_for, feedback, policy_merge, status_addresses, state, waypoint_enabled)


def _translate(
    store: Store, address_for: AddressFor, feedback: Feedback | None, policy_merge: Mapping[str, Any] | None,
    status_addresses: StatusAddresses | None, state: Aggregate | None, waypoint_enabled: bool,
) -> Translation:
    feedback = feedback or Feedback()
    state = state or Aggregate()
    out = Translation()
    classes = _our_classes(store, out, waypoint_enabled)
    ctxs: dict[tuple[str, str], _GatewayCtx] = {}
    for gw in sorted(store.list(Gateway), key=lambda g: (g.namespace, g.name)):
        if gw.spec.gateway_class_name in classes:
            listeners = mesh.waypoint_listeners(gw) if mesh.is_waypoint(gw) else validate_listeners(gw)
            ctxs[(gw.namespace, gw.name)] = _GatewayCtx(gw, listeners)

    _update_routes(store, state, ctxs)
    out.status.update(state.statuses)
    for (kind, ns, name), why in feedback.blocked_routes.items():
        key = ObjectKey(kind, ns, name)
        if key in out.status:
            extra = condition("Programmed", False, "Rejected", "; ".join(why), _generation(store, key))
            out.status[key] = {"parents": [{**p, "conditions": [*p["conditions"], extra]}
                                           for p in out.status[key]["parents"]]}
    for ctx in ctxs.values():
        gw_key = (ctx.gateway.namespace, ctx.gateway.name)
        for listener in ctx.listeners:
            listener.attached_routes = len(state.listener_routes.get((gw_key, listener.name), ()))

    policies = PolicyIndex(
        store, {k: c.gateway for k, c in ctxs.items()},
        {k: {l.name for l in c.listeners} for k, c in ctxs.items()}, policy_merge,
    )
    # Waypoints (translate/mesh.py): Service-parented routes, before the Gateways' status is written.
    meshed = mesh.translate_mesh(
        store, {k: (c.gateway, c.listeners) for k, c in ctxs.items() if mesh.is_waypoint(c.gateway)}, policies)
    for ctx in ctxs.values():
        _finish_gateway(store, state, ctx, classes[ctx.gateway.spec.gateway_class_name], address_for, feedback,
                        out, policies, status_addresses)
    meshed.finish(out.gateways, out.status)
    inference.pool_status(store, ((route, {gw for gw, *_ in c.attachments}) for route, c in state.routes.values()),
                          out.status)
    policies.write_status(out.status)
    state.settle(store.revision)
    return out


def _generation(store: Store, key: ObjectKey) -> int:
    obj = store.get_key(key)
    return obj.generation if obj is not None else 1


def _update_routes(store: Store, state: Aggregate, ctxs: dict[tuple[str, str], _GatewayCtx]) -> None:
    """Bring the aggregate up to date: every route on a full pass, else only the
    routes that changed or read something that changed."""
    signature = (tuple((k, c.gateway) for k, c in ctxs.items()), store.count("TrafficPolicy") > 0,
                 store.count("GatewayExtension") > 0)
    changes = store.changes_since(state.revision) if state.revision is not None else None
    incremental = (
        changes is not None
        and state.signature is not None
        and len(signature[0]) == len(state.signature[0])
        and all(a[0] == b[0] and a[1] is b[1] for a, b in zip(signature[0], state.signature[0], strict=True))
        and signature[1:] == state.signature[1:]
        and not signature[1] and not signature[2]  # policies reach routes in ways not tracked here
        and all(what != "key" or ident.kind in ROUTE_LEVEL_KINDS  # type: ignore[attr-defined]
                for what, ident in changes)
    )
    if incremental:
        assert changes is not None
        dirty = state.affected(changes)
    else:
        state.reset()
        dirty = {r.key for r in store.list(HTTPRoute)}
    state.signature = signature
    for key in sorted(dirty):
        state.remove(key)
        route = store.get_key(key)
        if isinstance(route, HTTPRoute):
            with store.tracking() as reads:
                contribution = _contribution(store, route, ctxs)
            state.add(key, route, contribution, frozenset(reads))


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


def _parent_key(route: HTTPRoute, ref: ParentReference) -> dict[str, Any]:
    key: dict[str, Any] = {"group": ref.group, "kind": ref.kind, "name": ref.name,
                           "namespace": ref.namespace or route.namespace}
    if ref.section_name is not None:
        key["sectionName"] = ref.section_name
    if ref.port is not None:
        key["port"] = ref.port
    return key


def _contribution(store: Store, route: HTTPRoute, ctxs: dict[tuple[str, str], _GatewayCtx]) -> Contribution:
    """What one route adds, under every parent Gateway of ours."""
    compiled: CompiledRoute | None = None
    parents: list[dict[str, Any]] = []
    attachments: list[tuple[tuple[str, str], str, int, tuple[str, ...]]] = []
    gen = route.generation
    for ref in route.spec.parent_refs:
        if ref.group != GROUP or ref.kind != "Gateway":
            continue
        ns = ref.namespace or route.namespace
        ctx = ctxs.get((ns, ref.name))
        if ctx is None:
            if store.get(Gateway, ns, ref.name) is None:
                parents.append(_parent_status(route, ref, [
                    condition("Accepted", False, "NoMatchingParent", f"Gateway {ns}/{ref.name} not found", gen),
                    condition("ResolvedRefs", True, "ResolvedRefs", "not evaluated without a parent", gen),
                ]))
            continue  # a Gateway of another controller: not ours to report
        if compiled is None:
            compiled = compile_route(store, route)
        conds, attached = _attachment(store, route, ref, ctx, compiled)
        attachments.extend(((ns, ref.name), name, ctx.by_name[name].spec.port, tuple(hosts))
                           for name, hosts in attached)
        parents.append(_parent_status(route, ref, conds))
    return Contribution(
        attachments=tuple(attachments),
        routes=tuple(compiled.routes) if compiled else (),
        clusters=tuple(compiled.clusters.values()) if compiled else (),
        status={"parents": parents} if parents else None,
    )


def _parent_status(route: HTTPRoute, ref: ParentReference, conds: list[dict[str, Any]]) -> dict[str, Any]:
    return {"parentRef": _parent_key(route, ref), "controllerName": CONTROLLER_NAME, "conditions": conds}


def _attachment(
    store: Store, route: HTTPRoute, ref: ParentReference, ctx: _GatewayCtx, compiled: CompiledRoute
) -> tuple[list[dict[str, Any]], list[tuple[str, list[str]]]]:
    """A route's conditions under one parent, and the (listener, hostnames) it attaches to."""
    gen = route.generation
    gw = ctx.gateway
    candidates = [
        l for l in ctx.listeners
        if (ref.section_name is None or l.name == ref.section_name)
        and (ref.port is None or l.spec.port == ref.port)
    ]
    conds: list[dict[str, Any]] = []
    attached: list[tuple[ListenerState, list[str]]] = []
    if not candidates:
        what = " and ".join(
            part for part in (
                f"sectionName {ref.section_name}" if ref.section_name else "",
                f"port {ref.port}" if ref.port else "",
            ) if part
        )
        conds.append(condition("Accepted", False, "NoMatchingParent",
                               f"Gateway {gw.namespace}/{gw.name} has no listener with {what}", gen))
    else:
        usable = [l for l in candidates if l.usable]
        allowed = [
            l for l in usable
            if "HTTPRoute" in l.allowed_kinds() and l.admits_namespace(store, gw, route.namespace)
        ]
        for listener in allowed:
            hosts = effective_hostnames(listener.spec.hostname, list(route.spec.hostnames))
            if hosts:
                attached.append((listener, hosts))
        if not usable:
            conds.append(condition("Accepted", False, "NoMatchingParent",
                                   "every matching listener is invalid: " + "; ".join(l.invalid_message for l in candidates), gen))
        elif not allowed:
            conds.append(condition("Accepted", False, "NotAllowedByListeners",
                                   f"listeners {', '.join(l.name for l in usable)} do not allow HTTPRoutes from namespace {route.namespace}", gen))
        elif not attached:
            conds.append(condition("Accepted", False, "NoMatchingListenerHostname",
                                   f"no hostname of the route ({', '.join(route.spec.hostnames)}) matches a listener hostname", gen))
        elif compiled.rule_count and len(compiled.replaced) == compiled.rule_count:
            conds.append(condition("Accepted", False, "UnsupportedValue",
                                   "every rule is invalid and answers 500: " + "; ".join(compiled.replaced), gen))
        else:
            conds.append(condition("Accepted", True, "Accepted", f"attached to {', '.join(l.name for l, _ in attached)}", gen))
    if compiled.unresolved:
        conds.append(condition("ResolvedRefs", False, compiled.unresolved_reason or "BackendNotFound",
                               "; ".join(compiled.unresolved), gen))
    else:
        conds.append(condition("ResolvedRefs", True, "ResolvedRefs", "all backend references resolved", gen))
    if compiled.replaced and len(compiled.replaced) < compiled.rule_count:
        conds.append(condition("PartiallyInvalid", True, "UnsupportedValue",
                               "replaced by a direct 500 response: " + "; ".join(compiled.replaced), gen))
    return conds, [(listener.name, hosts) for listener, hosts in attached]


def _parameters(store: Store, gw: Gateway, gc: GatewayClass) -> tuple[GatewayParameters | None, str | None]:
    infra = gw.spec.infrastructure
    if infra and infra.parameters_ref:
        ref = infra.parameters_ref
        if ref.group != LYCHGATE_GROUP or ref.kind != "GatewayParameters":
            return None, f"spec.infrastructure.parametersRef must be {LYCHGATE_GROUP}/GatewayParameters, not {ref.group}/{ref.kind}"
        params = store.get(GatewayParameters, gw.namespace, ref.name)
        if params is None:
            return None, f"spec.infrastructure.parametersRef: GatewayParameters {gw.namespace}/{ref.name} not found"
        return params, None
    cref = gc.spec.parameters_ref
    if cref and cref.group == LYCHGATE_GROUP and cref.kind == "GatewayParameters":
        return store.get(GatewayParameters, cref.namespace or "", cref.name), None
    return None, None


def _virtual_host(
    gw: Gateway, port: int, host: str, entries: list[tuple[HTTPRoute, ir.Route, str]], policies: PolicyIndex
) -> ir.VirtualHost:
    ordered = sorted(entries, key=lambda e: precedence_key(e[0], e[1]))
    routes = tuple(policies.apply(gw, name, route, r) for route, r, name in ordered)
    return ir.VirtualHost(name=f"{port}/{host}", domains=(host,), routes=routes)


def _finish_gateway(
    store: Store,
    agg: Aggregate,
    ctx: _GatewayCtx,
    gc: GatewayClass,
    address_for: AddressFor,
    feedback: Feedback,
    out: Translation,
    policies: PolicyIndex,
    status_addresses: StatusAddresses | None = None,
) -> None:
    gw = ctx.gateway
    gen = gw.generation
    ref = f"{gw.namespace}/{gw.name}"
    params, params_error = _parameters(store, gw, gc)
    address = address_for(gw)

    for listener in ctx.listeners:
        error = feedback.listener_errors.get((ref, listener.spec.port))
        if listener.usable and error:
            listener.programmed_error = error

    conds: list[dict[str, Any]] = []
    usable = [l for l in ctx.listeners if l.usable]
    if params_error:
        conds.append(condition("Accepted", False, "InvalidParameters", params_error, gen))
    elif not usable:
        conds.append(condition("Accepted", False, "ListenersNotValid", "no listener is valid", gen))
    elif len(usable) < len(ctx.listeners):
        bad = ", ".join(l.name for l in ctx.listeners if not l.usable)
        conds.append(condition("Accepted", True, "ListenersNotValid", f"invalid listeners are not served: {bad}", gen))
    else:
        conds.append(condition("Accepted", True, "Accepted", "Gateway is accepted", gen))

    serving = not params_error and bool(usable) and address is not None
    state = feedback.proxy_state.get(ref)
    if address is None:
        conds.append(condition("Programmed", False, "AddressNotAssigned", "no address could be assigned", gen))
    elif not serving:
        conds.append(condition("Programmed", False, "Invalid", "Gateway is not accepted, so no proxy is run", gen))
    elif ref in feedback.rejected:
        conds.append(condition("Programmed", False, "Invalid", feedback.rejected[ref], gen))
    elif state == "":
        conds.append(condition("Programmed", True, "Programmed", "proxy is running and has accepted its configuration", gen))
    else:
        conds.append(condition("Programmed", False, "Pending", state or "waiting for the proxy to start and accept its configuration", gen))

    status: dict[str, Any] = {
        "conditions": conds,
        "listeners": [l.status(gen) for l in ctx.listeners],
    }
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
    clusters = agg.clusters(gw_key)
    for port in sorted({l.spec.port for l in usable}):
        vhosts = agg.virtual_hosts(
            gw_key, port, lambda port, host, entries: _virtual_host(gw, port, host, entries, policies))
        listeners.append(ir.HTTPListener(name=f"http-{port}", address=address, port=port, virtual_hosts=tuple(vhosts),
                                         extensions=policies.extensions, policy_filters=policies.active))
    clusters.update(policies.clusters_for(ref))
    out.gateways[ref] = ir.GatewayIR(
        namespace=gw.namespace, name=gw.name, listeners=tuple(listeners),
        clusters=tuple(clusters[k] for k in sorted(clusters)),
    )
    log_level = params.spec.kube.envoy_container.bootstrap.log_level if params else "info"
    infra = gw.spec.infrastructure
    out.proxies[ref] = ProxyIntent(
        namespace=gw.namespace, name=gw.name, address=address, log_level=log_level,
        ports=tuple(l.port for l in listeners),
        labels=tuple(sorted(infra.labels.items())) if infra else (),
        annotations=tuple(sorted(infra.annotations.items())) if infra else (),
        parameters=params,
    )
