"""Gateway listeners: which are valid, which conflict, what routes they admit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lychgate import ir
from lychgate.api import selectors
from lychgate.api.core import Namespace
from lychgate.api.gateway import (
    GROUP,
    FrontendValidation,
    Gateway,
    LabelSelector,
    Listener,
    ListenerSet,
)
from lychgate.store import Store
from lychgate.translate import listener_mtls, tls_options
from lychgate.translate.conditions import condition
from lychgate.translate.secrets import resolve_ca_bundle, resolve_certificates

# Route kinds each listener protocol can carry (Gateway API core + extended).
SUPPORTED_KINDS: dict[str, tuple[str, ...]] = {
    "HTTP": ("HTTPRoute", "GRPCRoute"),
    "HTTPS": ("HTTPRoute", "GRPCRoute"),
    "TLS": ("TLSRoute",),
    "TCP": ("TCPRoute",),
    "UDP": ("UDPRoute",),
}

# Listeners on one port must share a transport; UDP lives beside any of them.
TRANSPORT = {"HTTP": "http", "HTTPS": "tls", "TLS": "tls", "TCP": "tcp", "UDP": "udp"}

# The client certificate check ListenerPolicies ask of a Gateway's own listener:
# (listener name, does it terminate TLS) -> the check, or None (ListenerPolicyIndex.client_validation).
PolicyValidation = Callable[[str, bool], listener_mtls.Outcome | None]


def namespace_admitted(store: Store, from_: str, selector: LabelSelector | None, home: str, namespace: str) -> bool:
    """`namespaces: {from, selector}` as allowedRoutes and allowedListeners use it:
    may an object in `namespace` attach to one in `home`?"""
    if from_ == "All":
        return True
    if from_ == "Same":
        return namespace == home
    if from_ == "Selector":
        obj = store.get(Namespace, "", namespace)
        labels = dict(obj.metadata.labels) if obj else {}
        labels.setdefault("kubernetes.io/metadata.name", namespace)
        return selectors.matches(selector.model_dump(by_alias=True) if selector else None, labels)
    return False


@dataclass
class ListenerState:
    spec: Listener
    # The ListenerSet (namespace, name) that added it; None: the Gateway's own.
    owner: tuple[str, str] | None = None
    valid: bool = True
    conflicted: str | None = None  # reason when Conflicted=True
    invalid_reason: str = ""
    invalid_message: str = ""
    invalid_kinds: list[str] = field(default_factory=list)
    attached_routes: int = 0
    # Set from proxy feedback (for example a port that cannot be bound).
    programmed_error: str | None = None
    # Terminated TLS: the certificates served, or why they cannot be (reason, message).
    tls: ir.DownstreamTLS | None = None
    refs_error: tuple[str, str] | None = None
    # Served, but some references did not resolve (reason, message): a ListenerPolicy's CAs.
    partial_refs: tuple[str, str] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def id(self) -> str:
        """Unique among a Gateway's listeners, ListenerSets' included."""
        return self.name if self.owner is None else f"{self.owner[0]}/{self.owner[1]}/{self.name}"

    @property
    def usable(self) -> bool:
        """Routes may attach to it (its status counts them)."""
        return self.valid and self.conflicted is None

    @property
    def serving(self) -> bool:
        """The proxy serves it: usable, and its certificates resolved."""
        return self.usable and self.refs_error is None

    @property
    def not_served(self) -> tuple[str, str] | None:
        """Why the proxy does not serve it, as its status says (reason, message); None: it does."""
        if not self.usable:
            return self.invalid_reason or self.conflicted or "Invalid", self.invalid_message
        return self.refs_error

    def allowed_kinds(self) -> list[str]:
        supported = SUPPORTED_KINDS.get(self.spec.protocol, ())
        asked = self.spec.allowed_routes.kinds
        if not asked:
            return list(supported)
        return [k.kind for k in asked if k.group == GROUP and k.kind in supported]

    def admits_namespace(self, store: Store, gateway: Gateway, namespace: str) -> bool:
        # `Same` means the namespace of whatever declared the listener: a ListenerSet's own.
        home = self.owner[0] if self.owner else gateway.namespace
        ns = self.spec.allowed_routes.namespaces
        return namespace_admitted(store, ns.from_, ns.selector, home, namespace)

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
        if self.refs_error is not None:
            conds.append(condition("ResolvedRefs", False, self.refs_error[0], self.refs_error[1], generation))
        elif self.partial_refs is not None:
            conds.append(condition("ResolvedRefs", False, self.partial_refs[0], self.partial_refs[1], generation))
        elif self.invalid_kinds:
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
            conds.append(condition("Programmed", False, self.conflicted or "Invalid", self.invalid_message, generation))
        elif self.refs_error is not None:
            conds.append(condition("Programmed", False, "Invalid", self.refs_error[1], generation))
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


def validate_listeners(gateway: Gateway, store: Store,
                       sets: Sequence[tuple[ListenerSet, bool]] = (),
                       policy_validation: PolicyValidation | None = None) -> list[ListenerState]:
    """The Gateway's listeners, then those of the ListenerSets it allows (in
    precedence order), each validated; a listener conflicting with an earlier
    one is marked Conflicted and not served. `policy_validation`: what
    ListenerPolicies ask of the Gateway's own listeners' client certificates."""
    states = [ListenerState(spec=listener) for listener in gateway.spec.listeners]
    for ls, allowed in sets:
        if allowed:
            states += [ListenerState(spec=listener, owner=(ls.namespace, ls.name)) for listener in ls.spec.listeners]
    for state in states:
        proto = state.spec.protocol
        if proto not in SUPPORTED_KINDS:
            state.valid = False
            state.invalid_reason = "UnsupportedProtocol"
            state.invalid_message = (
                f"listener {state.name}: protocol {proto} is not supported; supported: "
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
            continue
        override = None
        if policy_validation is not None and state.owner is None:
            # kgateway applies a ListenerPolicy's client validation to the Gateway's own listeners only.
            tls = state.spec.tls
            terminates = state.spec.protocol in ("HTTPS", "TLS") and tls is not None and tls.mode != "Passthrough"
            override = policy_validation(state.name, terminates)
        check_tls(store, gateway, state, override)
    _settle_conflicts(states)
    return states


def _settle_conflicts(states: list[ListenerState]) -> None:
    """Listener precedence: the first listener of a port decides its transport
    (HTTP, TLS or TCP; UDP lives beside them), the first of a hostname keeps it."""
    transports: dict[int, tuple[str, ListenerState]] = {}
    hosts: dict[tuple[int, str, str | None], ListenerState] = {}
    for s in states:
        if s.spec.protocol not in TRANSPORT or not s.valid:
            continue
        port, transport = s.spec.port, TRANSPORT[s.spec.protocol]
        if transport != "udp":
            first = transports.setdefault(port, (transport, s))
            if first[0] != transport:
                s.conflicted = s.invalid_reason = "ProtocolConflict"
                s.invalid_message = (f"listener {s.name}: port {port} is already used with protocol "
                                     f"{first[1].spec.protocol} by listener {first[1].id}")
                continue
        # TCP and UDP cannot tell connections apart by name: one listener per port.
        host = s.spec.hostname if transport in ("http", "tls") else None
        winner = hosts.setdefault((port, transport, host), s)
        if winner is not s:
            s.conflicted = s.invalid_reason = "HostnameConflict"
            s.invalid_message = (f"listener {s.name}: listener {winner.id} already serves port {port} "
                                 f"and hostname {host or '(any)'}")


def check_tls(store: Store, gateway: Gateway, state: ListenerState,
              override: listener_mtls.Outcome | None = None) -> None:
    """HTTPS terminates TLS with certificates; TLS passes it through or terminates;
    a waypoint's HBONE listener speaks mTLS when it has certificates. `override`:
    the client certificate check ListenerPolicies ask instead of spec.tls.frontend's."""
    proto, tls = state.spec.protocol, state.spec.tls
    if proto == "HBONE" and tls is None:
        return  # plaintext HBONE (no mesh certificates configured)
    if proto not in ("HTTPS", "TLS", "HBONE"):
        if tls is not None:
            state.valid = False
            state.invalid_reason = "UnsupportedValue"
            state.invalid_message = f"listener {state.name}: tls is only allowed on HTTPS and TLS listeners"
        return
    if tls is None:
        state.valid = False
        state.invalid_reason = "UnsupportedValue"
        state.invalid_message = f"listener {state.name}: protocol {proto} needs tls"
        return
    try:
        options = tls_options.parse(tls.options, "listener", f"listener {state.name}: tls.options")
    except tls_options.OptionError as e:
        state.valid = False
        state.invalid_reason = "UnsupportedValue"
        state.invalid_message = str(e)
        return
    if tls.mode == "Passthrough" and options != tls_options.TLSOptions():
        state.valid = False
        state.invalid_reason = "UnsupportedValue"
        state.invalid_message = (f"listener {state.name}: tls.options set TLS parameters, but with tls.mode "
                                 "Passthrough the proxy does not terminate TLS")
        return
    if tls.mode == "Passthrough":
        if proto == "HTTPS":
            state.valid = False
            state.invalid_reason = "UnsupportedValue"
            state.invalid_message = (f"listener {state.name}: HTTPS listeners terminate TLS; "
                                     "use protocol TLS for tls.mode Passthrough")
        return
    if not tls.certificate_refs:
        state.valid = False
        state.invalid_reason = "UnsupportedValue"
        state.invalid_message = f"listener {state.name}: tls.mode Terminate needs tls.certificateRefs"
        return
    if state.owner is not None:
        resolved = resolve_certificates(store, "ListenerSet", state.owner[0], tls.certificate_refs)
    else:
        resolved = resolve_certificates(store, "Gateway", gateway.namespace, tls.certificate_refs)
    if resolved.reason != "ResolvedRefs":
        state.refs_error = (resolved.reason, f"listener {state.name}: {resolved.message}")
        return
    alpn = {"HTTPS": ("h2", "http/1.1"), "HBONE": ("h2",)}.get(proto, ())
    if options.alpn is not None:
        alpn = options.alpn
    validation = _frontend_validation(gateway, state.spec.port)
    base = ir.DownstreamTLS(resolved.certificates, alpn, params=options.params, client_sans=options.sans,
                            client_hashes=options.certificate_hashes)
    if override is not None:
        _apply_override(state, base, override)
        return
    if validation is None or not validation.ca_certificate_refs:
        if options.sans:
            # Names are checked on a certificate its CA vouched for: without one they mean nothing.
            state.valid = False
            state.invalid_reason = "UnsupportedValue"
            state.invalid_message = (f"listener {state.name}: tls.options verify-subject-alt-names needs client "
                                     "certificate validation (spec.tls.frontend caCertificateRefs) for this port")
            return
        state.tls = base
        return
    bundle = resolve_ca_bundle(store, "Gateway", gateway.namespace, validation.ca_certificate_refs,
                               "spec.tls.frontend validation.caCertificateRefs")
    if bundle.pem is None:
        # Without its CA the listener cannot check clients: it is not served at all.
        state.valid = False
        state.invalid_reason = "NoValidCACertificate"
        state.invalid_message = f"listener {state.name}: {bundle.message}"
        state.refs_error = ("InvalidCACertificateKind" if bundle.reason == "InvalidKind" else bundle.reason,
                            state.invalid_message)
        return
    state.tls = dataclasses.replace(base, client_ca=bundle.pem,
                                    client_optional=validation.mode == "AllowInsecureFallback")


def _apply_override(state: ListenerState, base: ir.DownstreamTLS, outcome: listener_mtls.Outcome) -> None:
    """A ListenerPolicy's client certificate check, in place of the port's frontend validation."""
    if outcome.ca is None:
        # Fail closed: a listener asked to check clients that cannot is not served at all.
        state.valid = False
        state.invalid_reason = "NoValidCACertificate"
        state.invalid_message = f"listener {state.name}: {outcome.message}"
        if outcome.reason != "Invalid":  # an invalid policy is not a reference that failed
            state.refs_error = (outcome.reason, state.invalid_message)
        return
    if outcome.problems:
        state.partial_refs = (outcome.reason, f"listener {state.name}: served trusting only the CAs that could be "
                              f"loaded: {outcome.message}")
    state.tls = dataclasses.replace(base, client_ca=outcome.ca, client_may_omit=not outcome.require)


def _frontend_validation(gateway: Gateway, port: int) -> FrontendValidation | None:
    """The client certificate validation of a port: its perPort entry, else the default."""
    frontend = gateway.spec.tls.frontend if gateway.spec.tls else None
    if frontend is None:
        return None
    for entry in frontend.per_port:
        if entry.port == port:
            return entry.tls.validation
    return frontend.default.validation if frontend.default else None
