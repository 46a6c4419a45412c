"""Route parentRefs → the Gateway listeners a route attaches to, and the status
parent entries: shared by every route kind (HTTP, gRPC, TLS, TCP, UDP)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lychgate.api.base import Resource
from lychgate.api.gateway import GROUP, Gateway, ListenerSet, ParentReference
from lychgate.store import Store
from lychgate.translate.conditions import CONTROLLER_NAME, condition
from lychgate.translate.hostnames import effective_hostnames
from lychgate.translate.listeners import ListenerState

__all__ = ["CONTROLLER_NAME", "GatewayCtx", "attach", "find_parent", "missing_parent", "parent_status"]


@dataclass
class GatewayCtx:
    """One Gateway of ours during a pass, with its validated listeners (its own
    first, then those of the ListenerSets it allows)."""

    gateway: Gateway
    listeners: list[ListenerState]
    sets: list[tuple[ListenerSet, bool]] = field(default_factory=list)

    @property
    def own(self) -> list[ListenerState]:
        return [l for l in self.listeners if l.owner is None]


def find_parent(
    store: Store, route: Resource, ref: ParentReference, ctxs: dict[tuple[str, str], GatewayCtx]
) -> tuple[GatewayCtx | None, str] | None:
    """The Gateway of ours a parentRef (to a Gateway or a ListenerSet) reaches:
    (ctx, namespace); (None, namespace) when the parent does not exist; None when
    the parent is not ours to report on."""
    if ref.group != GROUP or ref.kind not in ("Gateway", "ListenerSet"):
        return None
    ns = ref.namespace or route.namespace
    if ref.kind == "Gateway":
        ctx = ctxs.get((ns, ref.name))
        if ctx is None:
            return (None, ns) if store.get(Gateway, ns, ref.name) is None else None
        return ctx, ns
    ls = store.get(ListenerSet, ns, ref.name)
    if ls is None:
        return None, ns
    parent = ls.spec.parent_ref
    ctx = ctxs.get((parent.namespace or ls.namespace, parent.name))
    return (ctx, ns) if ctx is not None else None


def parent_key(route: Resource, ref: ParentReference) -> dict[str, Any]:
    key: dict[str, Any] = {"group": ref.group, "kind": ref.kind, "name": ref.name,
                           "namespace": ref.namespace or route.namespace}
    if ref.section_name is not None:
        key["sectionName"] = ref.section_name
    if ref.port is not None:
        key["port"] = ref.port
    return key


def parent_status(route: Resource, ref: ParentReference, conds: list[dict[str, Any]]) -> dict[str, Any]:
    return {"parentRef": parent_key(route, ref), "controllerName": CONTROLLER_NAME, "conditions": conds}


def missing_parent(route: Resource, ref: ParentReference, namespace: str) -> dict[str, Any]:
    gen = route.generation
    return parent_status(route, ref, [
        condition("Accepted", False, "NoMatchingParent", f"{ref.kind} {namespace}/{ref.name} not found", gen),
        condition("ResolvedRefs", True, "ResolvedRefs", "not evaluated without a parent", gen),
    ])


Attached = list[tuple[ListenerState, list[str]]]


def attach(
    store: Store, route: Resource, ref: ParentReference, ctx: GatewayCtx, hostnames: list[str] | None
) -> tuple[dict[str, Any] | None, Attached]:
    """The listeners (and served hostnames) a route attaches to under one parentRef,
    or the Accepted=False condition saying why it attaches to none.

    `hostnames` None: the kind has no hostnames (TCPRoute, UDPRoute)."""
    gen = route.generation
    gw = ctx.gateway
    kind = route.KIND
    # A Gateway parent reaches the Gateway's own listeners, a ListenerSet parent its set's.
    owner = (ref.namespace or route.namespace, ref.name) if ref.kind == "ListenerSet" else None
    candidates = [
        l for l in ctx.listeners
        if l.owner == owner
        and (ref.section_name is None or l.name == ref.section_name)
        and (ref.port is None or l.spec.port == ref.port)
    ]
    if owner is not None and not any(ls.namespace == owner[0] and ls.name == owner[1] and allowed
                                     for ls, allowed in ctx.sets):
        return condition("Accepted", False, "NotAllowedByListeners",
                         f"ListenerSet {owner[0]}/{owner[1]} is not accepted by Gateway "
                         f"{gw.namespace}/{gw.name}", gen), []
    if not candidates:
        what = " and ".join(
            part for part in (
                f"sectionName {ref.section_name}" if ref.section_name else "",
                f"port {ref.port}" if ref.port else "",
            ) if part
        )
        parent = f"ListenerSet {owner[0]}/{owner[1]}" if owner else f"Gateway {gw.namespace}/{gw.name}"
        return condition("Accepted", False, "NoMatchingParent", f"{parent} has no listener with {what}", gen), []
    usable = [l for l in candidates if l.usable]
    if not usable:
        return condition("Accepted", False, "NoMatchingParent",
                         "every matching listener is invalid: " + "; ".join(l.invalid_message for l in candidates),
                         gen), []
    kinds_ok = [l for l in usable if kind in l.allowed_kinds()]
    allowed = [l for l in kinds_ok if l.admits_namespace(store, gw, route.namespace)]
    if not allowed:
        why = (f"do not allow {kind}s from namespace {route.namespace}" if kinds_ok
               else f"do not accept {kind}s (protocols {', '.join(sorted({l.spec.protocol for l in usable}))})")
        return condition("Accepted", False, "NotAllowedByListeners",
                         f"listeners {', '.join(l.name for l in usable)} {why}", gen), []
    attached: Attached = []
    for listener in allowed:
        if hostnames is None:
            attached.append((listener, []))
            continue
        hosts = effective_hostnames(listener.spec.hostname, hostnames)
        if hosts:
            attached.append((listener, hosts))
    if not attached:
        return condition("Accepted", False, "NoMatchingListenerHostname",
                         f"no hostname of the route ({', '.join(hostnames or [])}) matches a listener hostname",
                         gen), []
    return None, attached
