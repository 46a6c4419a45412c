"""Per-listener client certificate validation: a ListenerPolicy's
`default.clientCertificateValidation` on the TLS listeners it reaches.

As in kgateway (its listener translator's getCertValidationFromAttached):

- It overrides the Gateway's `spec.tls.frontend` validation for that listener:
  the port's CAs are not trusted there, only the policies' own.
- Every ListenerPolicy reaching the listener (by sectionName, or the whole
  Gateway) adds its CAs to one trusted pool; a client must present a
  certificate if any of them says `Require`.
- `Require`: no valid certificate, no handshake. `Optional`: a client may
  present none, but one it presents must verify.
- References resolve from the Gateway: a ConfigMap or Secret in another
  namespace needs a ReferenceGrant there that lets the Gateway in (not the policy).
- Only listeners that terminate TLS (HTTPS, TLS with mode Terminate) and that
  the Gateway declares itself are affected; the others are left as they are.

Where lychgate decides differently, it fails closed: a listener asked to check
clients whose CAs all fail to load is not served, whatever the mode (kgateway
does so for `Require`; for `Optional` it keeps serving with the Gateway's
validation, or none). Some of the CAs loading is enough: the listener trusts
those and its status names the others. A listener an invalid policy asks to
check clients is not served either: it would otherwise let in every client the
policy meant to keep out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lychgate.api.client_validation import ClientCertificateValidationConfig
from lychgate.api.gateway import ObjectRef
from lychgate.store import Store
from lychgate.translate.secrets import resolve_ca_ref
from lychgate.translate.values import Invalid

FIELD = "clientCertificateValidation"


@dataclass(frozen=True)
class ClientValidation:
    """One policy's validation, checked: its CA references and whether a certificate is required."""

    require: bool
    refs: tuple[ObjectRef, ...]
    path: str  # where it is written: spec.default.clientCertificateValidation


def compile_validation(config: ClientCertificateValidationConfig, path: str) -> ClientValidation:
    """What can be known without reading the references: their kinds (kgateway's API allows only these)."""
    for i, ref in enumerate(config.ca_certificate_refs):
        if ref.group not in ("", "core") or ref.kind not in ("ConfigMap", "Secret"):
            raise Invalid(f"{path}.caCertificateRefs[{i}]",
                          f"{ref.group or 'core'}/{ref.kind} cannot hold CA certificates; "
                          "use a ConfigMap or Secret (group \"\") with the PEM under ca.crt")
    return ClientValidation(config.mode == "Require", tuple(config.ca_certificate_refs), path)


@dataclass(frozen=True)
class Contribution:
    """One policy asking a listener to check clients; `validation` None: the policy is invalid."""

    policy: str  # "ListenerPolicy default/tenant-a"
    validation: ClientValidation | None


@dataclass(frozen=True)
class Problem:
    policy: str
    reason: str  # InvalidCACertificateRef / RefNotPermitted / Invalid
    message: str  # names the policy's field


@dataclass(frozen=True)
class Outcome:
    """What a listener's client certificate check becomes."""

    ca: str | None  # the trusted PEM bundle; None: the listener cannot be served
    require: bool
    problems: tuple[Problem, ...] = ()

    @property
    def reason(self) -> str:
        return self.problems[0].reason if self.problems else "ResolvedRefs"

    @property
    def message(self) -> str:
        return "; ".join(p.message for p in self.problems)


def resolve(store: Store, gateway_namespace: str, contributions: Sequence[Contribution]) -> Outcome:
    """The policies' CAs as one bundle (each reference once), read as the Gateway would read them."""
    invalid = [c for c in contributions if c.validation is None]
    if invalid:
        return Outcome(None, True, tuple(
            Problem(c.policy, "Invalid", f"{c.policy} asks to check client certificates here but is invalid "
                    "(see its status); the listener is not served until it is fixed or removed")
            for c in invalid))
    parts: list[str] = []
    problems: list[Problem] = []
    seen: set[tuple[str, str, str]] = set()
    for c in contributions:
        assert c.validation is not None
        for i, ref in enumerate(c.validation.refs):
            key = (ref.kind, ref.namespace or gateway_namespace, ref.name)
            if key in seen:
                continue
            seen.add(key)
            one = resolve_ca_ref(store, "Gateway", gateway_namespace, ref,
                                 f"{c.policy} {c.validation.path}.caCertificateRefs[{i}]")
            if one.pem is None:
                problems.append(Problem(c.policy, one.reason, one.message))
            else:
                parts.append(one.pem)
    require = any(c.validation is not None and c.validation.require for c in contributions)
    return Outcome("".join(parts) or None, require, tuple(problems))
