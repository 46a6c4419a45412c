"""BackendTLSPolicy: TLS from the gateway to a Service, and the policy's status.

A policy targets Services (optionally one port by `sectionName`). The gateway
then opens TLS to that Service's endpoints, asking for `validation.hostname` by
SNI and verifying the certificate against the referenced CA (a ConfigMap or
Secret with `ca.crt`) or the system trust store, matching the hostname or the
listed subjectAltNames. When two policies target the same port the oldest
wins; the other is not Accepted (Conflicted). `options` set TLS versions,
cipher suites, curves, signature algorithms, ALPN and certificate fingerprints
(translate/tls_options.py). A policy whose CA or options cannot be used never
falls back to plaintext: the Service's traffic fails instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.core import Service
from lychgate.api.gateway import BackendTLSPolicy, PolicyTargetRef
from lychgate.store import Store
from lychgate.translate import tls_options
from lychgate.translate.conditions import CONTROLLER_NAME, condition
from lychgate.translate.secrets import resolve_ca_bundle


@dataclass(frozen=True)
class Verdict:
    """What one policy makes of its targets: the TLS to use, or why none can be."""

    tls: ir.UpstreamTLS | None
    reason: str = "ResolvedRefs"  # or InvalidKind / InvalidCACertificateRef / Invalid / InvalidOptions
    message: str = ""


def _targets(ref: PolicyTargetRef, service: Service, port_name: str | None) -> bool:
    return (ref.group in ("", "core") and ref.kind == "Service" and ref.name == service.name
            and (ref.section_name is None or ref.section_name == port_name))


def _ordered(store: Store, namespace: str) -> list[BackendTLSPolicy]:
    return sorted(store.list(BackendTLSPolicy, namespace), key=lambda p: (p.created, p.name))


def policy_for(store: Store, service: Service, port_name: str | None) -> tuple[BackendTLSPolicy, Verdict] | None:
    """The policy that decides TLS to one Service port: one naming that port beats
    one for the whole Service; among equals the oldest wins."""
    if not store.count("BackendTLSPolicy"):
        # Every backendRef asks: without policies, answer without listing them. (The
        # first policy to appear re-adds every route that learned there were none:
        # aggregate.WIDE_READS.)
        return None
    for section in ((port_name, None) if port_name else (None,)):
        for policy in _ordered(store, service.namespace):
            if any(_targets(ref, service, port_name) and ref.section_name == section for ref in policy.spec.target_refs):
                return policy, verdict(store, policy)
    return None


def verdict(store: Store, policy: BackendTLSPolicy) -> Verdict:
    v = policy.spec.validation
    try:
        options = tls_options.parse(policy.spec.options, "backend", "options")
    except tls_options.OptionError as e:
        return Verdict(None, "InvalidOptions", str(e))
    sans = tuple((san.type, san.hostname or san.uri or "") for san in v.subject_alt_names) or (("Hostname", v.hostname),)
    tls = ir.UpstreamTLS(sni=v.hostname, ca=None, sans=sans, alpn=options.alpn or (), params=options.params,
                         hashes=options.certificate_hashes)
    if v.well_known_ca_certificates == "System":
        # The proxy's system trust store (SYSTEM_CA_BUNDLE in xds/translator/cluster_policy.py).
        return Verdict(tls)
    if v.well_known_ca_certificates:
        return Verdict(None, "Invalid", f"validation.wellKnownCACertificates: {v.well_known_ca_certificates!r} "
                                        "is not a set lychgate knows; use System")
    bundle = resolve_ca_bundle(store, "BackendTLSPolicy", policy.namespace, v.ca_certificate_refs,
                               "validation.caCertificateRefs")
    if bundle.pem is None:
        return Verdict(None, bundle.reason, bundle.message)
    return Verdict(dataclasses.replace(tls, ca=bundle.pem))


def write_status(store: Store, users: dict[tuple[str, str], set[tuple[str, str]]],
                 out: dict[ObjectKey, dict[str, Any]]) -> None:
    """Each policy's ancestors: the Gateways of ours whose routes reach a Service it targets.

    `users` maps (namespace, Service name) to the Gateways (namespace, name) using it."""
    for policy in store.list(BackendTLSPolicy):
        gen = policy.generation
        gateways: set[tuple[str, str]] = set()
        conflicts: list[str] = []
        for ref in policy.spec.target_refs:
            gateways |= users.get((policy.namespace, ref.name), set())
            # Policies conflict only over the same target: a Service-wide policy and
            # one for a single port both apply (the port's wins on that port).
            older = _first_for_target(store, policy.namespace, ref)
            if older is not None and older.key != policy.key:
                conflicts.append(f"Service {ref.name}{' port ' + ref.section_name if ref.section_name else ''} "
                                 f"is already targeted by older policy {older.name}")
        if not gateways:
            continue
        v = verdict(store, policy)
        if conflicts:
            accepted = condition("Accepted", False, "Conflicted", "; ".join(conflicts), gen)
        elif v.tls is None:
            accepted = condition("Accepted", False, "Invalid" if v.reason in ("Invalid", "InvalidOptions")
                                 else "NoValidCACertificate", v.message, gen)
        else:
            accepted = condition("Accepted", True, "Accepted", "TLS to the targeted Services is configured", gen)
        # Bad options are no reference problem: the CA is not even looked at.
        resolved = (condition("ResolvedRefs", True, "ResolvedRefs", "all CA certificate references resolved", gen)
                    if v.tls is not None or v.reason == "InvalidOptions"
                    else condition("ResolvedRefs", False, v.reason, v.message, gen))
        out[policy.key] = {"ancestors": [
            {"ancestorRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": ns, "name": name},
             "controllerName": CONTROLLER_NAME, "conditions": [accepted, resolved]}
            for ns, name in sorted(gateways)]}


def _first_for_target(store: Store, namespace: str, target: PolicyTargetRef) -> BackendTLSPolicy | None:
    for policy in _ordered(store, namespace):
        if any(ref.kind == target.kind and ref.name == target.name and ref.section_name == target.section_name
               for ref in policy.spec.target_refs):
            return policy
    return None


def service_users(clusters: Iterable[tuple[tuple[str, str], Iterable[str]]]) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(namespace, Service) -> Gateways, from each Gateway's cluster names (kube_NS_SVC_PORT)."""
    out: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for gw, names in clusters:
        for name in names:
            parts = name.partition("/")[0].split("_")
            if len(parts) == 4 and parts[0] == "kube":
                out.setdefault((parts[1], parts[2]), set()).add(gw)
    return out
