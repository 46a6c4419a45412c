"""Gateway listeners: which are valid, which conflict, what routes they admit."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from lychgate.api import selectors
from lychgate.api.core import Namespace
from lychgate.api.gateway import GROUP, Gateway, Listener
from lychgate.store import Store
from lychgate.translate.conditions import condition

# Route kinds each listener protocol can carry (Gateway API core + extended).
SUPPORTED_KINDS: dict[str, tuple[str, ...]] = {
    "HTTP": ("HTTPRoute",),
}


@dataclass
class ListenerState:
    spec: Listener
    valid: bool = True
    conflicted: str | None = None  # reason when Conflicted=True
    invalid_reason: str = ""
    invalid_message: str = ""
    invalid_kinds: list[str] = field(default_factory=list)
    attached_routes: int = 0
    # Set from proxy feedback (for example a port that cannot be bound).
    programmed_error: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def usable(self) -> bool:
        return self.valid and self.conflicted is None

    def allowed_kinds(self) -> list[str]:
        supported = SUPPORTED_KINDS.get(self.spec.protocol, ())
        asked = self.spec.allowed_routes.kinds
        if not asked:
            return list(supported)
        return [k.kind for k in asked if k.group == GROUP and k.kind in supported]

    def admits_namespace(self, store: Store, gateway: Gateway, namespace: str) -> bool:
        ns = self.spec.allowed_routes.namespaces
        if ns.from_ == "All":
            return True
        if ns.from_ == "Same":
            return namespace == gateway.namespace
        if ns.from_ == "Selector":
            obj = store.get(Namespace, "", namespace)
            labels = dict(obj.metadata.labels) if obj else {}
            labels.setdefault("kubernetes.io/metadata.name", namespace)
            selector = ns.selector.model_dump(by_alias=True) if ns.selector else None
            return selectors.matches(selector, labels)
        return False

    def status(self, generation: int) -> dict[str, Any]:
        kinds = [{"group": GROUP, "kind": k} for k in self.allowed_kinds()]
        conds = []
        if self.usable:
            conds.append(condition("Accepted", True, "Accepted", "listener is valid", generation))
        else:
            reason = self.invalid_reason or "Invalid"
            conds.append(condition("Accepted", False, reason, self.invalid_message, generation))
        conds.append(
            condition(
                "Conflicted",
                self.conflicted is not None,
                self.conflicted or "NoConflicts",
                self.invalid_message if self.conflicted else "no conflicts",
                generation,
            )
        )
        if self.invalid_kinds:
            conds.append(
                condition(
                    "ResolvedRefs", False, "InvalidRouteKinds",
                    f"route kinds not supported on {self.spec.protocol}: {', '.join(self.invalid_kinds)}",
                    generation,
                )
            )
        else:
            conds.append(condition("ResolvedRefs", True, "ResolvedRefs", "all references resolved", generation))
        if not self.usable:
            conds.append(condition("Programmed", False, "Invalid", self.invalid_message, generation))
        elif self.programmed_error:
            conds.append(condition("Programmed", False, "Invalid", self.programmed_error, generation))
        else:
            conds.append(condition("Programmed", True, "Programmed", "listener is configured in the proxy", generation))
        return {
            "name": self.spec.name,
            "supportedKinds": kinds,
            "attachedRoutes": self.attached_routes,
            "conditions": conds,
        }


def validate_listeners(gateway: Gateway) -> list[ListenerState]:
    states = [ListenerState(spec=listener) for listener in gateway.spec.listeners]
    for state in states:
        proto = state.spec.protocol
        if proto not in SUPPORTED_KINDS:
            state.valid = False
            state.invalid_reason = "UnsupportedProtocol"
            state.invalid_message = (
                f"listener {state.name}: protocol {proto} is not supported yet; supported: "
                + ", ".join(SUPPORTED_KINDS)
            )
            continue
        asked = state.spec.allowed_routes.kinds
        state.invalid_kinds = [
            f"{k.group}/{k.kind}" for k in asked
            if not (k.group == GROUP and k.kind in SUPPORTED_KINDS[proto])
        ]
        if asked and not state.allowed_kinds():
            state.valid = False
            state.invalid_reason = "InvalidRouteKinds"
            state.invalid_message = f"listener {state.name}: none of the allowed route kinds is supported"

    by_port: dict[int, list[ListenerState]] = defaultdict(list)
    for state in states:
        by_port[state.spec.port].append(state)
    for same_port in by_port.values():
        protocols = {s.spec.protocol for s in same_port}
        if len(protocols) > 1:
            for s in same_port:
                s.conflicted = "ProtocolConflict"
                s.invalid_reason = "ProtocolConflict"
                s.invalid_message = (
                    f"listener {s.name}: port {s.spec.port} is used with protocols "
                    + ", ".join(sorted(protocols))
                )
            continue
        by_host: dict[str | None, list[ListenerState]] = defaultdict(list)
        for s in same_port:
            by_host[s.spec.hostname].append(s)
        for host, group in by_host.items():
            if len(group) > 1:
                for s in group:
                    s.conflicted = "HostnameConflict"
                    s.invalid_reason = "HostnameConflict"
                    s.invalid_message = (
                        f"listener {s.name}: listeners {', '.join(x.name for x in group)} share "
                        f"port {s.spec.port} and hostname {host or '(any)'}"
                    )
    return states
