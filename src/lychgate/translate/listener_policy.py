"""ListenerPolicy and HTTPListenerPolicy: attachment, precedence and status.

The rules, applied to every Envoy listener (port) and HTTP connection manager
of a Gateway:

1. A policy targets Gateways of its namespace, by `targetRefs` or by labels
   (`targetSelectors`), optionally one listener by `sectionName`.
2. For a port, a ListenerPolicy's configuration is its `perPort[]` entry for
   that port if it has one (which replaces `default` entirely, as in kgateway),
   else its `default`. Settings written inline in the spec (`spec.httpSettings`,
   `spec.proxyProtocol`, `spec.perConnectionBufferLimitBytes`: kgateway's other
   shape) are its `default`, and cannot be mixed with `default`/`perPort`. An
   HTTPListenerPolicy's settings apply to every port.
3. Each field (accessLog, tracing, useRemoteAddress, proxyProtocol, ...) is
   taken from the most specific policy that sets it (a listener by sectionName
   before the whole Gateway), then from the oldest (creationTimestamp, then
   namespace/name); ListenerPolicies before the deprecated HTTPListenerPolicies
   of the same age. The others are reported as overridden on their status.
4. An invalid policy is not applied (nothing on the listener changes); other
   policies still are. A collector Service that cannot be reached leaves its
   field (accessLog or tracing) out and says why.

Plain HTTP listeners of a Gateway that share a port share one connection
manager: a policy for one of them (by sectionName) configures that port.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lychgate import ir, ir_listener
from lychgate.api.gateway import GROUP as GATEWAY_GROUP
from lychgate.api.gateway import Gateway
from lychgate.api.listener_policy import HTTPListenerPolicy, ListenerPolicy
from lychgate.store import Store
from lychgate.translate import tracing
from lychgate.translate.listener_settings import Compiled, compile_http, compile_port
from lychgate.translate.policies.common import Invalid, Unresolved
from lychgate.translate.policy_status import TargetResult, policy_status

AnyListenerPolicy = ListenerPolicy | HTTPListenerPolicy
KINDS: tuple[type[ListenerPolicy] | type[HTTPListenerPolicy], ...] = (ListenerPolicy, HTTPListenerPolicy)


@dataclass(frozen=True)
class Target:
    namespace: str
    name: str
    section: str | None = None

    def ancestor_ref(self) -> dict[str, Any]:
        ref: dict[str, Any] = {"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": self.namespace,
                               "name": self.name}
        if self.section:
            ref["sectionName"] = self.section
        return ref

    def __str__(self) -> str:
        where = f"Gateway {self.namespace}/{self.name}"
        return f"{where} listener {self.section}" if self.section else where


@dataclass(eq=False)
class PolicyState:
    policy: AnyListenerPolicy
    errors: list[str] = field(default_factory=list)
    http: dict[int | None, Compiled] = field(default_factory=dict)  # port (None: default) -> fields
    ports: dict[int | None, Compiled] = field(default_factory=dict)
    unresolved: dict[str, Unresolved] = field(default_factory=dict)
    clusters: dict[str, ir.Cluster] = field(default_factory=dict)
    attachments: list[Attachment] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.policy.namespace}/{self.policy.name}"

    @property
    def label(self) -> str:
        return f"{self.policy.kind} {self.key}"

    @property
    def order(self) -> tuple[datetime, int, str, str]:
        return (self.policy.created, isinstance(self.policy, HTTPListenerPolicy), self.policy.namespace,
                self.policy.name)

    def config(self, table: dict[int | None, Compiled], port: int) -> Compiled:
        return table.get(port, table.get(None, {}))


@dataclass(eq=False)
class Attachment:
    state: PolicyState
    target: Target
    problem: str | None = None
    served: set[int] = field(default_factory=set)  # the ports it was considered for
    applied: dict[str, set[int]] = field(default_factory=dict)  # field -> ports
    lost: dict[str, dict[str, set[int]]] = field(default_factory=dict)  # field -> why -> ports


class ListenerPolicyIndex:
    """Built once per translation pass; `apply` fills in each Gateway's IR."""

    def __init__(self, store: Store, gateways: Mapping[tuple[str, str], Gateway],
                 listeners: Mapping[tuple[str, str], Mapping[str, int]],
                 rejected: Mapping[tuple[str, int], str] | None = None) -> None:
        self.store = store
        self.gateways = gateways
        self.listeners = listeners  # a Gateway's own listeners: name -> port
        self.rejected = rejected or {}  # ("namespace/gateway", port) -> why the proxy refused that listener
        self.states: list[PolicyState] = []
        self.by_gateway: dict[tuple[str, str], list[Attachment]] = defaultdict(list)
        policies: list[AnyListenerPolicy] = [p for kind in KINDS for p in store.list(kind)]
        for policy in policies:
            state = PolicyState(policy)
            self._compile(state)
            self._attach(state)
            self.states.append(state)
        self.states.sort(key=lambda s: s.order)
        for atts in self.by_gateway.values():
            atts.sort(key=lambda a: a.state.order)

    # --- per policy ------------------------------------------------------------------

    def _compile(self, state: PolicyState) -> None:
        p = state.policy
        kind, ns = p.kind, p.namespace
        try:
            if isinstance(p, HTTPListenerPolicy):
                state.http[None] = compile_http(self.store, kind, ns, p.spec, "spec", state.clusters, state.unresolved)
            else:
                spec = p.spec
                inline = _inline_fields(p)
                if inline:
                    if spec.default is not None or spec.per_port:
                        other = "spec.default" if spec.default is not None else "spec.perPort"
                        raise Invalid(inline[0], f"{', '.join(inline)} cannot be set together with {other}: "
                                      "write the listener configuration inline or in default/perPort, not both")
                    # kgateway's inline shape is its `default`: every port the policy reaches.
                    self._compile_config(state, None, spec, "spec")
                if spec.default is not None:
                    if spec.default.client_certificate_validation is not None:
                        raise Invalid("spec.default.clientCertificateValidation",
                                      "not supported by lychgate yet; use the Gateway's spec.tls.frontend")
                    self._compile_config(state, None, spec.default, "spec.default")
                seen: set[int] = set()
                for i, entry in enumerate(spec.per_port):
                    if entry.port in seen:
                        raise Invalid(f"spec.perPort[{i}].port", f"port {entry.port} is listed twice")
                    seen.add(entry.port)
                    self._compile_config(state, entry.port, entry.listener, f"spec.perPort[{i}].listener")
        except Invalid as err:
            state.errors.append(str(err))
        if not p.spec.target_refs and not p.spec.target_selectors:
            state.errors.append("spec: targetRefs or targetSelectors must be set")

    def _compile_config(self, state: PolicyState, port: int | None, config: Any, path: str) -> None:
        p = state.policy
        state.ports[port] = compile_port(config, path)
        settings = config.http_settings
        state.http[port] = ({} if settings is None else
                            compile_http(self.store, p.kind, p.namespace, settings, f"{path}.httpSettings",
                                         state.clusters, state.unresolved))

    def _attach(self, state: PolicyState) -> None:
        p = state.policy
        ns = p.namespace
        seen: set[Target] = set()

        def add(target: Target) -> None:
            if target in seen:
                return
            seen.add(target)
            att = Attachment(state, target, self._problem(target))
            state.attachments.append(att)
            if att.problem is None and not state.errors:
                self.by_gateway[(target.namespace, target.name)].append(att)

        for i, ref in enumerate(p.spec.target_refs):
            if self._kind_ok(state, ref.group, ref.kind, f"spec.targetRefs[{i}]"):
                add(Target(ns, ref.name, ref.section_name))
        for i, sel in enumerate(p.spec.target_selectors):
            path = f"spec.targetSelectors[{i}]"
            if not self._kind_ok(state, sel.group, sel.kind, path):
                continue
            if not sel.match_labels:
                state.errors.append(f"{path}.matchLabels: at least one label is required")
                continue
            matched = sorted((g for g in self.store.list(Gateway, ns)
                              if all(g.metadata.labels.get(k) == v for k, v in sel.match_labels.items())),
                             key=lambda g: g.name)
            if not matched:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sel.match_labels.items()))
                state.notes.append(f"{path} matched no Gateway with labels {labels} in namespace {ns}")
            for gw in matched:
                add(Target(ns, gw.name, sel.section_name))

    def _kind_ok(self, state: PolicyState, group: str, kind: str, path: str) -> bool:
        if group != GATEWAY_GROUP or kind != "Gateway":
            state.errors.append(f"{path}: {group}/{kind} cannot be targeted; use {GATEWAY_GROUP} Gateway")
            return False
        return True

    def _problem(self, target: Target) -> str | None:
        gw = self.store.get(Gateway, target.namespace, target.name)
        if gw is None:
            return f"{target} not found"
        key = (target.namespace, target.name)
        if key not in self.gateways:
            return f"{target} is not served by lychgate (gatewayClassName {gw.spec.gateway_class_name})"
        if target.section and target.section not in self.listeners.get(key, {}):
            return f"Gateway {target.namespace}/{target.name} has no listener named {target.section}"
        return None

    # --- per Gateway ---------------------------------------------------------------------

    def apply(self, gateway: ir.GatewayIR) -> ir.GatewayIR:
        """The Gateway's IR with the settings its policies give each listener and port."""
        key = (gateway.namespace, gateway.name)
        atts = self.by_gateway.get(key)
        if not atts:
            return gateway
        own = self.listeners.get(key, {})
        clusters: dict[str, ir.Cluster] = {}
        listeners = []
        for http in gateway.listeners:
            names = ({http.name.split("-", 2)[2]} if http.name.startswith("https-")
                     else {n for n, port in own.items() if port == http.port})
            kwargs = self._resolve(atts, names, http.port, lambda s: s.http, clusters)
            tr = kwargs.get("tracing")
            if tr is not None and tr.service_name == tracing.SERVICE_NAME_OF_GATEWAY:
                kwargs["tracing"] = dataclasses.replace(tr, service_name=f"{gateway.name}.{gateway.namespace}")
            listeners.append(dataclasses.replace(http, settings=ir_listener.HTTPSettings(**kwargs))
                             if kwargs else http)
        ports = []
        for port in sorted({c.port for c in (*gateway.listeners, *gateway.streams)}):
            names = {n for n, p in own.items() if p == port}
            kwargs = self._resolve(atts, names, port, lambda s: s.ports, clusters)
            if kwargs:
                ports.append(ir_listener.PortSettings(port=port, **kwargs))
        merged = {c.name: c for c in gateway.clusters} | clusters
        return dataclasses.replace(gateway, listeners=tuple(listeners), ports=tuple(ports),
                                   clusters=tuple(merged[k] for k in sorted(merged)))

    def _resolve(self, atts: list[Attachment], names: set[str], port: int, table: Any,
                 clusters: dict[str, ir.Cluster]) -> dict[str, Any]:
        """Field by field, the winner among the policies on these listeners."""
        candidates = [a for a in atts if a.target.section in names] + [a for a in atts if a.target.section is None]
        kwargs: dict[str, Any] = {}
        winners: dict[str, Attachment] = {}
        for att in candidates:
            att.served.add(port)
            for name, values in att.state.config(table(att.state), port).items():
                winner = winners.get(name)
                if winner is None:
                    winners[name] = att
                    att.applied.setdefault(name, set()).add(port)
                    kwargs.update(values)
                    if name in ("accessLog", "tracing"):
                        clusters.update(att.state.clusters)
                else:
                    how = "the more specific" if winner.target.section and not att.target.section else "older"
                    why = f"overridden by {how} {winner.state.label} on {winner.target}"
                    att.lost.setdefault(name, {}).setdefault(why, set()).add(port)
        return kwargs

    # --- status ------------------------------------------------------------------------

    def write_status(self, status: dict[Any, dict[str, Any]]) -> None:
        for state in self.states:
            status[state.policy.key] = self._status(state)

    def _status(self, state: PolicyState) -> dict[str, Any]:
        results = [TargetResult(*self._applied(state, att), str(att.target), att.target.ancestor_ref())
                   for att in sorted(state.attachments, key=lambda a: (a.target.name, a.target.section or ""))]
        return policy_status(state.errors, state.notes, results, state.policy.generation)

    def _applied(self, state: PolicyState, att: Attachment) -> tuple[bool, str, str]:
        if state.errors:
            return False, "Invalid", "not applied: the policy is invalid"
        if att.problem is not None:
            return False, "TargetNotFound", att.problem
        if not att.served:
            return False, "NoListener", (f"{att.target} serves no listener yet (not programmed, or no port "
                                         "this policy configures)")
        gateway = f"{att.target.namespace}/{att.target.name}"
        refused = [self.rejected[(gateway, p)] for p in sorted(att.served) if (gateway, p) in self.rejected]
        if refused:
            return False, "Rejected", f"the proxy refused its listener: {refused[0]}"
        lost = bool(att.lost)
        parts = []
        if att.applied:
            parts.append("applied: " + ", ".join(f + _ports(att.applied[f]) if f in att.lost else f
                                                 for f in sorted(att.applied)))
        by_why: dict[str, list[str]] = defaultdict(list)
        for f, whys in sorted(att.lost.items()):
            for why, ports in sorted(whys.items()):
                by_why[why].append(f + _ports(ports) if f in att.applied else f)
        parts += [f"{', '.join(fs)} {why}" for why, fs in by_why.items()]
        parts += [f"{f} not applied: {err.message}" for f, err in sorted(state.unresolved.items())]
        message = "; ".join(parts) or "applied (it sets nothing for these listeners)"
        if not lost and not state.unresolved:
            return True, "Applied", message
        if att.applied:
            return True, "PartiallyApplied", message
        if state.unresolved and not lost:
            return False, next(iter(state.unresolved.values())).reason, message
        return False, "Overridden", message


def _inline_fields(policy: ListenerPolicy) -> list[str]:
    """The listener configuration written directly in the spec (kgateway's inline shape)."""
    spec = policy.spec
    fields = (("spec.proxyProtocol", spec.proxy_protocol), ("spec.perConnectionBufferLimitBytes",
              spec.per_connection_buffer_limit_bytes), ("spec.httpSettings", spec.http_settings))
    return [path for path, value in fields if value is not None]


def _ports(ports: set[int]) -> str:
    return f" (port {', '.join(str(p) for p in sorted(ports))})"
