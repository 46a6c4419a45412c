"""Certificates from Secrets and ConfigMaps, checked before Envoy sees them: a
listener's serving certificates (`tls.certificateRefs`) and CA bundles (client
certificate validation, BackendTLSPolicy).

A certificate Envoy cannot load would make it reject the whole listener, taking
every other Gateway listener on the port down with it; so a reference is only
used once its object exists, may be referenced, and holds parseable PEM.
Anything else is a condition that says which.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from lychgate import ir
from lychgate.api.core import ConfigMap, Secret
from lychgate.api.gateway import GROUP, SecretObjectReference
from lychgate.store import Store
from lychgate.translate.grants import grant_allows


class CARef(Protocol):
    """A reference to a CA bundle: LocalObjectReference or a namespaced one."""

    @property
    def group(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class CertificateResolution:
    certificates: tuple[ir.Certificate, ...]
    reason: str = "ResolvedRefs"  # or InvalidCertificateRef / RefNotPermitted
    message: str = ""


def resolve_certificates(store: Store, from_kind: str, from_namespace: str,
                         refs: list[SecretObjectReference]) -> CertificateResolution:
    """The certificates a Gateway's (or ListenerSet's) listener refers to."""
    certs: list[ir.Certificate] = []
    for i, ref in enumerate(refs):
        ns = ref.namespace or from_namespace
        where = f"tls.certificateRefs[{i}] ({ns}/{ref.name})"
        if ref.group not in ("", "core") or ref.kind != "Secret":
            return CertificateResolution((), "InvalidCertificateRef",
                                         f"{where}: {ref.group or 'core'}/{ref.kind} is not supported; use a core Secret")
        if not grant_allows(store, GROUP, from_kind, from_namespace, "", "Secret", ns, ref.name):
            return CertificateResolution((), "RefNotPermitted",
                                         f"{where}: the Secret is in another namespace and no ReferenceGrant in {ns} "
                                         f"allows {from_kind}s from {from_namespace} to refer to it")
        secret = store.get(Secret, ns, ref.name)
        if secret is None:
            return CertificateResolution((), "InvalidCertificateRef", f"{where}: Secret not found")
        cert, problem = _certificate(secret)
        if cert is None:
            return CertificateResolution((), "InvalidCertificateRef", f"{where}: {problem}")
        certs.append(cert)
    return CertificateResolution(tuple(certs))


def secret_field(secret: Secret, key: str) -> bytes | None:
    if key in secret.string_data:
        return secret.string_data[key].encode()
    if key in secret.data:
        try:
            return base64.b64decode(secret.data[key], validate=True)
        except (binascii.Error, ValueError):
            return None
    return None


def _certificate(secret: Secret) -> tuple[ir.Certificate | None, str]:
    chain, key = secret_field(secret, "tls.crt"), secret_field(secret, "tls.key")
    if not chain or not key:
        return None, "the Secret needs base64 PEM data under tls.crt and tls.key"
    problem = _pem_problem(chain, key)
    if problem:
        return None, problem
    return ir.Certificate(chain=chain.decode(), key=key.decode()), ""


# Parsing is the costly part and every pass asks again for the same bytes.
@functools.lru_cache(maxsize=1024)
def _pem_problem(chain: bytes, key: bytes | None = None) -> str:
    """What is wrong with a PEM certificate chain (and key), or ""."""
    # cryptography (8 MiB of the controller's memory) loads with the first certificate.
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        x509.load_pem_x509_certificates(chain)
    except ValueError:
        return "tls.crt is not a PEM certificate" if key is not None else "ca.crt is not a PEM certificate"
    if key is not None:
        try:
            serialization.load_pem_private_key(key, password=None)
        except (ValueError, TypeError):
            return "tls.key is not an unencrypted PEM private key"
    return ""


@dataclass(frozen=True)
class CABundle:
    pem: str | None  # None: unusable, see reason and message
    reason: str = "ResolvedRefs"  # or InvalidKind / RefNotPermitted / InvalidCACertificateRef
    message: str = ""


def resolve_ca_bundle(store: Store, from_kind: str, from_namespace: str, refs: Sequence[CARef],
                      field: str) -> CABundle:
    """The CA certificates `refs` (ConfigMaps or Secrets with `ca.crt`) name, as one
    PEM bundle; the first unusable reference says why there is none."""
    parts: list[str] = []
    for i, ref in enumerate(refs):
        one = resolve_ca_ref(store, from_kind, from_namespace, ref, f"{field}[{i}]")
        if one.pem is None:
            return one
        parts.append(one.pem)
    return CABundle("".join(parts))


def resolve_ca_ref(store: Store, from_kind: str, from_namespace: str, ref: CARef, where: str) -> CABundle:
    """The CA certificates of one reference (`where` names its field), or why not."""
    ns = getattr(ref, "namespace", None) or from_namespace
    where = f"{where} ({ref.kind} {ns}/{ref.name})"
    if ref.group not in ("", "core") or ref.kind not in ("ConfigMap", "Secret"):
        return CABundle(None, "InvalidKind", f"{where}: only ConfigMaps and Secrets can hold CA certificates")
    if not grant_allows(store, GROUP, from_kind, from_namespace, "", ref.kind, ns, ref.name):
        return CABundle(None, "RefNotPermitted",
                        f"{where}: no ReferenceGrant in {ns} allows {from_kind}s from {from_namespace}")
    pem, problem = _ca_bundle(store, ref.kind, ns, ref.name)
    if pem is None:
        return CABundle(None, "InvalidCACertificateRef", f"{where}: {problem}")
    return CABundle(pem)


def _ca_pem(store: Store, kind: str, namespace: str, name: str) -> str | None:
    """The PEM CA bundle under `ca.crt` of a ConfigMap or Secret, or None if unusable."""
    return _ca_bundle(store, kind, namespace, name)[0]


def _ca_bundle(store: Store, kind: str, namespace: str, name: str) -> tuple[str | None, str]:
    """The PEM CA bundle under `ca.crt` of a ConfigMap or Secret, or what is wrong."""
    if kind == "ConfigMap":
        cm = store.get(ConfigMap, namespace, name)
        found = cm is not None
        text = cm.data.get("ca.crt") if cm else None
    else:
        secret = store.get(Secret, namespace, name)
        found = secret is not None
        raw = secret_field(secret, "ca.crt") if secret else None
        text = raw.decode(errors="replace") if raw else None
    if not found:
        return None, f"{kind} not found"
    if not text:
        return None, f"the {kind} has no ca.crt key (it must hold the PEM CA certificates)"
    if _pem_problem(text.encode()):
        return None, "ca.crt is not a PEM certificate"
    return (text if text.endswith("\n") else text + "\n"), ""


def tls_secret(store: Store, namespace: str, name: str) -> tuple[ir.Certificate | None, str | None, str]:
    """A Secret's client certificate (`tls.crt` + `tls.key`) and CA (`ca.crt`), either
    optional, and what is wrong ("" when nothing is): BackendConfigPolicy `tls.secretRef`."""
    secret = store.get(Secret, namespace, name)
    if secret is None:
        return None, None, f"Secret {namespace}/{name} not found"
    cert: ir.Certificate | None = None
    if secret_field(secret, "tls.crt") or secret_field(secret, "tls.key"):
        cert, problem = _certificate(secret)
        if cert is None:
            return None, None, f"Secret {namespace}/{name}: {problem}"
    ca = _ca_pem(store, "Secret", namespace, name)
    if ca is None and secret_field(secret, "ca.crt"):
        return None, None, f"Secret {namespace}/{name}: ca.crt is not a PEM certificate"
    if cert is None and ca is None:
        return None, None, f"Secret {namespace}/{name} has neither tls.crt/tls.key nor ca.crt"
    return cert, ca, ""


def literal_header_value(text: str) -> str:
    """A Secret's value as an Envoy header value that means exactly that text.

    Envoy reads the values of headers it adds (route and virtual-host header ops, local
    replies, tunnel CONNECT headers) as format strings: `%REQ(:path)%` would be replaced
    and an unpaired '%' NACKs the configuration. A Secret's value is data, never a
    template, so each '%' is doubled: '%%' is Envoy's literal percent sign."""
    return text.replace("%", "%%")


def secret_value(secret: Secret, key: str) -> str | None:
    """A Secret's value under `key` as text (data is base64, stringData plain), or None."""
    raw = secret_field(secret, key)
    return raw.decode(errors="replace") if raw is not None else None
