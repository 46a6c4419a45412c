"""Waypoints of an ambient mesh: Gateways of class `lychgate-waypoint` → IR and status.

A waypoint Gateway has one listener of protocol `HBONE` (port 15008 by
convention). Mesh clients (ztunnel) reach a Service through it by opening an
HTTP/2 CONNECT tunnel whose authority is the Service's address and port; the
waypoint applies the Service's routes to the HTTP inside the tunnel and
forwards to the Service's endpoints.

What it captures: a Service labelled `istio.io/use-waypoint: <waypoint>`, or
any Service of a Namespace with that label (the Service's own label wins;
`none` opts out). The waypoint is looked up in the Service's namespace, or in
the one `istio.io/use-waypoint-namespace` names. Every other Service is not
captured: its CONNECT answers 404.

CONNECT authorities of a captured Service port (local mode has no cluster
DNS or VIPs, so the name form is the one to use there):
- `<name>.<namespace>.svc.cluster.local:<port>`
- `<spec.clusterIP>:<port>` when the Service has a cluster IP.

Routes: the HTTPRoutes whose parentRefs name the Service (group "", kind
Service; Gateway API mesh routing, "GAMMA"), with the TrafficPolicies that
target them. Producer routes only: a route in another namespace than its
Service (a consumer route) would apply to that namespace's clients alone,
which a waypoint without client identity cannot tell apart, so it is
refused in its status. A Service port without routes forwards to the
Service itself; with routes, a request no rule matches gets 404, as the
Gateway API requires.

While `waypoint.enabled` is false the class is not served: its GatewayClass
status says Accepted=False and its Gateways are left alone.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.core import Namespace, Service
from lychgate.api.gateway import Gateway, GatewayClass, HTTPRoute, ParentReference
from lychgate.store import Store
from lychgate.translate.conditions import condition
from lychgate.translate.listeners import ListenerState, check_tls
from lychgate.translate.policies import PolicyIndex
from lychgate.translate.references import resolve_service
from lychgate.translate.routes import CompiledRoute, compile_route, precedence_key

WAYPOINT_CLASS = "lychgate-waypoint"
HBONE = "HBONE"
USE_WAYPOINT = "istio.io/use-waypoint"
USE_WAYPOINT_NAMESPACE = "istio.io/use-waypoint-namespace"
CLUSTER_DOMAIN = "cluster.local"
CONTROLLER_NAME = "gateway.lychgate.dev/lychgate"
NOT_SERVED = ("the waypoint class is not served: set waypoint.enabled=true "
              "(lychgate run --waypoint) to run waypoints")

GatewayKey = tuple[str, str]


def class_problem(gc: GatewayClass, enabled: bool) -> str | None:
    """Why one of our GatewayClasses is not served, if it is not."""
    return NOT_SERVED if gc.name == WAYPOINT_CLASS and not enabled else None


def is_waypoint(gw: Gateway) -> bool:
    return gw.spec.gateway_class_name == WAYPOINT_CLASS


def waypoint_listeners(gw: Gateway, store: Store) -> list[ListenerState]:
    """A waypoint serves exactly one HBONE listener (mTLS when it has certificates:
    `tls.certificateRefs`, and the clients' CA in `spec.tls.frontend`); anything
    else is invalid."""
    states = [ListenerState(spec=listener) for listener in gw.spec.listeners]
    served: ListenerState | None = None
    for state in states:
        if state.spec.protocol != HBONE:
            state.valid = False
            state.invalid_reason = "UnsupportedProtocol"
            state.invalid_message = (f"listener {state.name}: a {WAYPOINT_CLASS} Gateway serves protocol "
                                     f"{HBONE} only, not {state.spec.protocol}")
        elif served is not None:
            state.valid = False
            state.invalid_reason = "UnsupportedValue"
            state.invalid_message = (f"listener {state.name}: a waypoint serves one {HBONE} listener; "
                                     f"{served.name} is the one served")
        else:
            served = state
            check_tls(store, gw, state)
    return states


def _binding(store: Store, service: Service) -> GatewayKey | None:
    """The waypoint (namespace, name) a Service opted into, if any."""
    labels = service.metadata.labels
    if USE_WAYPOINT not in labels:
        ns = store.get(Namespace, "", service.namespace)
        labels = ns.metadata.labels if ns is not None else {}
    name = labels.get(USE_WAYPOINT)
    if not name or name == "none":
        return None
    return (labels.get(USE_WAYPOINT_NAMESPACE) or service.namespace, name)


def authorities(service: Service, port: int) -> tuple[str, ...]:
    out = [f"{service.name}.{service.namespace}.svc.{CLUSTER_DOMAIN}:{port}"]
    cluster_ip = (service.spec.model_extra or {}).get("clusterIP")
    if isinstance(cluster_ip, str) and cluster_ip not in ("", "None"):
        out.append(f"{cluster_ip}:{port}")
    return tuple(out)


def _is_service_ref(ref: ParentReference) -> bool:
    return ref.group in ("", "core") and ref.kind == "Service"


@dataclass
class _Waypoint:
    gateway: Gateway
    listener: ListenerState
    # (service namespace, name, port) -> (route, one of its IR routes)
    routes: dict[tuple[str, str, int], list[tuple[HTTPRoute, ir.Route]]] = field(
        default_factory=lambda: defaultdict(list))
    services: list[Service] = field(default_factory=list)
    clusters: dict[str, ir.Cluster] = field(default_factory=dict)
    attached: set[ObjectKey] = field(default_factory=set)


@dataclass
class MeshTranslation:
    """What the waypoints add to a translation pass (see translate/gateway.py)."""

    services: dict[str, tuple[ir.WaypointService, ...]] = field(default_factory=dict)
    clusters: dict[str, dict[str, ir.Cluster]] = field(default_factory=dict)
    route_parents: dict[ObjectKey, list[dict[str, Any]]] = field(default_factory=dict)
    tls: dict[str, ir.DownstreamTLS | None] = field(default_factory=dict)

    def finish(self, gateways: dict[str, ir.GatewayIR], status: dict[ObjectKey, dict[str, Any]]) -> None:
        """Turn each waypoint Gateway's plain IR into a waypoint's, and add the
        Service parents to the routes' status."""
        for ref, services in self.services.items():
            gw = gateways.get(ref)
            if gw is None or not gw.listeners:
                continue  # not served (not accepted, no address)
            port = gw.listeners[0].port
            clusters = {c.name: c for c in gw.clusters} | self.clusters[ref]
            gateways[ref] = dataclasses.replace(
                gw, listeners=(), clusters=tuple(clusters[k] for k in sorted(clusters)),
                waypoint=ir.Waypoint(name=f"hbone-{port}", address=gw.listeners[0].address, port=port,
                                     services=services, tls=self.tls.get(ref)),
            )
        for key, parents in self.route_parents.items():
            existing = status.get(key, {}).get("parents", [])
            status[key] = {"parents": [*existing, *parents]}


def translate_mesh(
    store: Store, waypoints: dict[GatewayKey, tuple[Gateway, list[ListenerState]]], policies: PolicyIndex,
) -> MeshTranslation:
    out = MeshTranslation()
    state: dict[GatewayKey, _Waypoint] = {}
    for key, (gw, listeners) in waypoints.items():
        usable = [l for l in listeners if l.serving]
        if usable:
            state[key] = _Waypoint(gw, usable[0])
    if not state:
        return out
    for service in sorted(store.list(Service), key=lambda s: (s.namespace, s.name)):
        bound = _binding(store, service)
        if bound in state:
            state[bound].services.append(service)
    for route in sorted(store.list(HTTPRoute), key=lambda r: (r.namespace, r.name)):
        compiled: CompiledRoute | None = None
        for parent in route.spec.parent_refs:
            if not _is_service_ref(parent):
                continue
            parent_service = store.get(Service, parent.namespace or route.namespace, parent.name)
            bound = _binding(store, parent_service) if parent_service is not None else None
            if parent_service is None or bound not in state:
                continue  # not captured by a waypoint of ours: not ours to report
            compiled = compiled or compile_route(store, route)
            conds = _attach(route, parent, parent_service, state[bound], compiled)
            out.route_parents.setdefault(route.key, []).append(
                {"parentRef": _parent_ref(route, parent), "controllerName": CONTROLLER_NAME, "conditions": conds})
    for key, wp in state.items():
        ref = f"{key[0]}/{key[1]}"
        out.services[ref] = tuple(
            _service_port(store, wp, service, port.port, policies)
            for service in wp.services for port in service.spec.ports
        )
        out.clusters[ref] = {**wp.clusters, **policies.clusters_for(ref)}
        out.tls[ref] = wp.listener.tls
        wp.listener.attached_routes = len(wp.attached)
    return out


def _parent_ref(route: HTTPRoute, ref: ParentReference) -> dict[str, Any]:
    out: dict[str, Any] = {"group": ref.group, "kind": ref.kind, "namespace": ref.namespace or route.namespace,
                           "name": ref.name}
    if ref.section_name is not None:
        out["sectionName"] = ref.section_name
    if ref.port is not None:
        out["port"] = ref.port
    return out


def _attach(route: HTTPRoute, ref: ParentReference, service: Service, wp: _Waypoint,
            compiled: CompiledRoute) -> list[dict[str, Any]]:
    """Attach a route to its Service parent; the parent's conditions."""
    gen = route.generation
    where = f"Service {service.namespace}/{service.name}"
    waypoint = f"{wp.gateway.namespace}/{wp.gateway.name}"
    ports = [p.port for p in service.spec.ports
             if (ref.port is None or p.port == ref.port) and (ref.section_name is None or p.name == ref.section_name)]
    conds: list[dict[str, Any]] = []
    if service.namespace != route.namespace:
        conds.append(condition("Accepted", False, "UnsupportedValue",
                               f"{where} is in another namespace: consumer routes are not supported by the "
                               f"lychgate waypoint; put the route in namespace {service.namespace}", gen))
    elif not ports:
        conds.append(condition("Accepted", False, "NoMatchingParent",
                               f"{where} has no port matching the parentRef's port/sectionName", gen))
    elif compiled.rule_count and len(compiled.replaced) == compiled.rule_count:
        conds.append(condition("Accepted", False, "UnsupportedValue",
                               "every rule is invalid and answers 500: " + "; ".join(compiled.replaced), gen))
    else:
        for port in ports:
            wp.routes[(service.namespace, service.name, port)].extend((route, r) for r in compiled.routes)
        wp.clusters.update(compiled.clusters)
        wp.attached.add(route.key)
        conds.append(condition("Accepted", True, "Accepted",
                               f"applies to {where} port(s) {', '.join(map(str, ports))} through waypoint "
                               f"{waypoint}", gen))
    if compiled.unresolved:
        conds.append(condition("ResolvedRefs", False, compiled.unresolved_reason or "BackendNotFound",
                               "; ".join(compiled.unresolved), gen))
    else:
        conds.append(condition("ResolvedRefs", True, "ResolvedRefs", "all backend references resolved", gen))
    if compiled.replaced and len(compiled.replaced) < compiled.rule_count:
        conds.append(condition("PartiallyInvalid", True, "UnsupportedValue",
                               "replaced by a direct 500 response: " + "; ".join(compiled.replaced), gen))
    return conds


def _service_port(store: Store, wp: _Waypoint, service: Service, port: int,
                  policies: PolicyIndex) -> ir.WaypointService:
    """The internal listener of one captured Service port: its routes, or straight to the Service."""
    ns, name = service.namespace, service.name
    entries = sorted(wp.routes.get((ns, name, port), []), key=lambda e: precedence_key(e[0], e[1]))
    owner = ("mesh", (wp.gateway.namespace, wp.gateway.name))
    routes = tuple(policies.apply(owner, wp.gateway, wp.listener.name, route, r) for route, r in entries)
    if not routes:
        res = resolve_service(store, from_kind="Service", from_group="", from_namespace=ns, group="",
                              kind="Service", namespace=ns, name=name, port=port)
        assert res.cluster is not None  # the Service and its port exist
        wp.clusters[res.cluster.name] = res.cluster
        routes = (ir.Route(source=ir.RouteSource("Service", ns, name, 0, 0), match=ir.Match(),
                           action=ir.Forward((ir.WeightedCluster(res.cluster.name, 1),))),)
    vhost = ir.VirtualHost(name=f"{ns}/{name}:{port}", domains=("*",), routes=routes)
    extensions, policy_filters = policies.filters_for((vhost,))
    listener = ir.HTTPListener(name=f"waypoint/{ns}/{name}/{port}", address="", port=port, virtual_hosts=(vhost,),
                               extensions=extensions, policy_filters=policy_filters)
    return ir.WaypointService(authorities=authorities(service, port), listener=listener)
