"""ListenerPolicy and HTTPListenerPolicy: attachment, precedence and status.

The rules, applied to every Envoy listener (port) and HTTP connection manager
of a Gateway:

1. A policy targets Gateways of its namespace, by `targetRefs` or by labels
   (`targetSelectors`), optionally one listener by `sectionName`.
2. For a port, a ListenerPolicy's configuration is its `perPort[]` entry for
   that port if it has one (which replaces `default` entirely, as in kgateway),
   else its `default`. Settings written inline in the spec (`spec.httpSettings`,
   `spec.proxyProtocol`, `spec.perConnectionBufferLimitBytes`, ...: kgateway's other
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
5. `default.clientCertificateValidation` is the exception to 3 and 4, as in
   kgateway: every policy reaching a TLS listener adds its CAs, and it is
   decided while the listeners are validated, since a listener whose CAs cannot
   be loaded is not served (translate/listener_mtls.py).

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
from lychgate.translate import listener_mtls, tracing
from lychgate.translate.listener_settings import Compiled, compile_http, compile_port
from lychgate.translate.policy_status import TargetResult, policy_status
from lychgate.translate.values import Invalid, Unresolved

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
    client_validation: listener_mtls.ClientValidation | None = None

    @property
    def asks_client_validation(self) -> bool:
        """Written in the spec, valid or not: an invalid one still keeps its listeners closed."""
        p = self.policy
        return isinstance(p, ListenerPolicy) and p.spec.default is not None and \
            p.spec.default.client_certificate_validation is not None

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
    # clientCertificateValidation, by Gateway listener name: "" where it applies, else why not
    mtls: dict[str, str] = field(default_factory=dict)
    mtls_reason: str = ""  # the first refusal's reason (InvalidCACertificateRef, ...)
    mtls_checked: set[str] = field(default_factory=set)  # listeners that check clients as it asks
    no_tls: set[str] = field(default_factory=set)  # listeners it reached that do not terminate TLS


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
        # Invalid policies that ask for client certificate validation: their listeners stay closed.
        self.invalid_mtls: dict[tuple[str, str], list[Attachment]] = defaultdict(list)
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
                        state.client_validation = listener_mtls.compile_validation(
                            spec.default.client_certificate_validation, f"spec.default.{listener_mtls.FIELD}")
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
            elif att.problem is None and state.asks_client_validation:
                self.invalid_mtls[(target.namespace, target.name)].append(att)

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

    def client_validation(self, gateway: Gateway, listener: str,
                          terminates_tls: bool) -> listener_mtls.Outcome | None:
        """The client certificate check the policies ask of one of the Gateway's own
        listeners (None: they ask none), recorded for their status. Called while the
        Gateway's listeners are validated, before `apply`."""
        key = (gateway.namespace, gateway.name)
        invalid = [a for a in self.invalid_mtls.get(key, ()) if a.target.section in (None, listener)]
        atts = [a for a in self.by_gateway.get(key, ())
                if a.state.client_validation is not None and a.target.section in (None, listener)]
        if not atts and not invalid:
            return None
        if not terminates_tls:
            for att in atts:
                att.no_tls.add(listener)
            return None
        contributions = ([listener_mtls.Contribution(a.state.label, None) for a in invalid]
                         + [listener_mtls.Contribution(a.state.label, a.state.client_validation) for a in atts])
        outcome = listener_mtls.resolve(self.store, gateway.namespace, contributions)
        for att in invalid:
            att.mtls[listener] = "not served while the policy is invalid"
        for att in atts:
            if outcome.ca is not None:
                att.mtls_checked.add(listener)
            mine = [p for p in outcome.problems if p.policy == att.state.label]
            if outcome.ca is None:
                # Not served: each policy hears why, its own references first.
                shown = mine or list(outcome.problems)
                att.mtls[listener] = "the listener is not served: " + "; ".join(p.message for p in shown)
                att.mtls_reason = att.mtls_reason or shown[0].reason
            elif mine:
                att.mtls[listener] = ("served trusting only the CAs that could be loaded: "
                                      + "; ".join(p.message for p in mine))
                att.mtls_reason = att.mtls_reason or mine[0].reason
            else:
                att.mtls[listener] = ""
        return outcome

    def not_served(self, gateway: Gateway, why: Mapping[str, tuple[str, str]]) -> None:
        """The Gateway's own listeners the proxy does not serve for a reason of their own (a
        certificate Secret missing, a conflict), with the reason and message of their status.
        `client_validation` ran before that was known: a policy whose check would have
        applied there did not, and says why instead of claiming it."""
        for att in self.by_gateway.get((gateway.namespace, gateway.name), ()):
            for listener in sorted(att.mtls_checked & why.keys()):
                reason, message = why[listener]
                att.mtls_checked.discard(listener)
                att.mtls[listener] = (f"the listener is not served ({reason}: "
                                      f"{message.removeprefix(f'listener {listener}: ')})")
                att.mtls_reason = att.mtls_reason or "ListenerNotServed"

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
            closed = sorted(att.mtls)
            return False, "Invalid", "not applied: the policy is invalid" + (
                f"; {_listeners(closed)} not served while it asks for {listener_mtls.FIELD}" if closed else "")
        if att.problem is not None:
            return False, "TargetNotFound", att.problem
        mtls_ok = sorted(att.mtls_checked)
        mtls_bad = {l: why for l, why in sorted(att.mtls.items()) if why}
        if not att.served and not att.mtls:
            return False, "NoListener", (f"{att.target} serves no listener yet (not programmed, or no port "
                                         "this policy configures)")
        gateway = f"{att.target.namespace}/{att.target.name}"
        refused = [self.rejected[(gateway, p)] for p in sorted(att.served) if (gateway, p) in self.rejected]
        if refused:
            return False, "Rejected", f"the proxy refused its listener: {refused[0]}"
        # Client validation reaching only listeners without TLS did nothing: like a field lost.
        no_tls = sorted(att.no_tls) if not att.mtls else []
        lost = bool(att.lost) or bool(no_tls)
        parts = []
        applied = [f + _ports(att.applied[f]) if f in att.lost else f for f in sorted(att.applied)]
        if mtls_ok:
            applied.append(f"{listener_mtls.FIELD} ({_listeners(mtls_ok)})")
        if applied:
            parts.append("applied: " + ", ".join(applied))
        by_why: dict[str, list[str]] = defaultdict(list)
        for f, whys in sorted(att.lost.items()):
            for why, ports in sorted(whys.items()):
                by_why[why].append(f + _ports(ports) if f in att.applied else f)
        parts += [f"{', '.join(fs)} {why}" for why, fs in by_why.items()]
        parts += [f"{f} not applied: {err.message}" for f, err in sorted(state.unresolved.items())]
        parts += [f"{listener_mtls.FIELD} on listener {l}: {why}" for l, why in mtls_bad.items()]
        if no_tls:
            verb = "does" if len(no_tls) == 1 else "do"
            parts.append(f"{listener_mtls.FIELD} not applied: {_listeners(no_tls)} {verb} not terminate TLS "
                         "(only HTTPS listeners and TLS listeners with mode Terminate check client certificates)")
        message = "; ".join(parts) or "applied (it sets nothing for these listeners)"
        if mtls_bad and not att.applied and not mtls_ok:
            return False, att.mtls_reason, message
        if not lost and not state.unresolved and not mtls_bad:
            return True, "Applied", message
        if att.applied or mtls_ok:
            return True, "PartiallyApplied", message
        if no_tls and not att.lost and not state.unresolved:
            return False, "NoTLSListener", message
        if state.unresolved and not lost:
            return False, next(iter(state.unresolved.values())).reason, message
        return False, "Overridden", message


def _inline_fields(policy: ListenerPolicy) -> list[str]:
    """The listener configuration written directly in the spec (kgateway's inline shape)."""
    spec = policy.spec
    fields = (("spec.proxyProtocol", spec.proxy_protocol), ("spec.perConnectionBufferLimitBytes",
              spec.per_connection_buffer_limit_bytes), ("spec.tcpKeepalive", spec.tcp_keepalive),
              ("spec.transportSocketConnectTimeout", spec.transport_socket_connect_timeout),
              ("spec.httpSettings", spec.http_settings))
    return [path for path, value in fields if value is not None]


def _listeners(names: list[str]) -> str:
    return ("listener " if len(names) == 1 else "listeners ") + ", ".join(names)


def _ports(ports: set[int]) -> str:
    return f" (port {', '.join(str(p) for p in sorted(ports))})"
