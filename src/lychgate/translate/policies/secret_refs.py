"""Secrets a TrafficPolicy reads (basicAuth htpasswd, apiKeyAuth keys).

A Secret in another namespace needs a ReferenceGrant there allowing
TrafficPolicy from the policy's namespace. A Secret that is missing, not
granted or lacks the key is a reference that cannot be resolved: Unresolved,
so a security field using it fails closed.
"""

from __future__ import annotations

from lychgate.api.core import Secret
from lychgate.api.lychgate import GROUP
from lychgate.store import Store
from lychgate.translate.grants import grant_allows
from lychgate.translate.secrets import secret_field
from lychgate.translate.values import Unresolved


def secret(store: Store, policy_namespace: str, namespace: str, name: str, path: str) -> Secret:
    if not grant_allows(store, GROUP, "TrafficPolicy", policy_namespace, "", "Secret", namespace, name):
        raise Unresolved("RefNotPermitted",
                         f"{path}: ReferenceGrant missing for Secret {namespace}/{name}: a ReferenceGrant in "
                         f"namespace {namespace} must allow {GROUP}/TrafficPolicy from namespace {policy_namespace}")
    found = store.get(Secret, namespace, name)
    if found is None:
        raise Unresolved("SecretNotFound", f"{path}: Secret {namespace}/{name} not found")
    return found


def entries(s: Secret) -> dict[str, str]:
    """Every key of the Secret with its text value (data is base64, stringData plain)."""
    out = {}
    for key in sorted({*s.data, *s.string_data}):
        raw = secret_field(s, key)
        if raw is not None:
            out[key] = raw.decode(errors="replace")
    return out
