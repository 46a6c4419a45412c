"""Redaction of secret material in debug output.

The admin server is reached with a port-forward and has no authentication
(spec §5.3), and its snapshots get pasted into bug reports, so every output
passes through `redact` first. Structure and key names stay visible — a reader
can still see *that* a Secret has `tls.key`, or that a listener has a private
key — only the values are replaced with "[redacted]".

What is redacted:
- Kubernetes Secrets: every value of `data` and `stringData`, and the
  `kubectl.kubernetes.io/last-applied-configuration` annotation (it holds the
  whole Secret as JSON).
- Envoy secret material, by field name, in both the proto field spelling and
  the camelCase of protobuf's JSON mapping: `private_key`, `password`,
  `session_ticket_keys`, `generic_secret`, `pkcs12`, `hmac_secret`,
  `client_secret`, `token_secret`. Inside these, every value is redacted
  except the non-secret pointers `filename` and `environment_variable` and the
  `@type` of an Any, which help debugging.
- Any string that is, or is the base64 of, a PEM private key, wherever it sits:
  a last line of defence for objects whose shape we do not know.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"

# Field names whose whole subtree is secret (Envoy protos, snake and camel case).
SECRET_FIELDS = frozenset(
    {
        "private_key",
        "privateKey",
        "password",
        "session_ticket_keys",
        "sessionTicketKeys",
        "generic_secret",
        "genericSecret",
        "pkcs12",
        "hmac_secret",
        "hmacSecret",
        "client_secret",
        "clientSecret",
        "token_secret",
        "tokenSecret",
        # apiKeyAuth keys and basicAuth users, in Envoy's config and in the IR
        "credentials",
        "users",
        "htpasswd",
    }
)

# Inside a secret subtree these say where the secret lives, not what it is.
_POINTER_FIELDS = frozenset({"filename", "environment_variable", "environmentVariable", "@type"})

_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_PEM_KEY_MARKER = "PRIVATE KEY-----"
_B64_PEM_PREFIX = "LS0tLS1CRUdJTi"  # base64 of "-----BEGIN"


def redact(value: Any) -> Any:
    """Return a copy of `value` (JSON-like data) with secret material replaced."""
    if isinstance(value, Mapping):
        if is_kubernetes_secret(value):
            return redact_kubernetes_secret(value)
        return {
            key: _redact_all(item) if key in SECRET_FIELDS else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, str) and looks_like_private_key(value):
        return REDACTED
    return value


def is_kubernetes_secret(obj: Mapping[str, Any]) -> bool:
    """A core/v1 Secret, with or without kind (list items from the API server lack it)."""
    kind = obj.get("kind")
    if kind is not None:
        return kind == "Secret" and str(obj.get("apiVersion", "v1")) == "v1"
    secret_type = obj.get("type")
    return (
        isinstance(obj.get("metadata"), Mapping)
        and ("data" in obj or "stringData" in obj)
        and isinstance(secret_type, str)
        and (secret_type == "Opaque" or "kubernetes.io/" in secret_type)
    )


def redact_kubernetes_secret(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Redact a Secret's values; callers that know an object is a Secret use this directly."""
    out: dict[str, Any] = {}
    for key, item in obj.items():
        if key in ("data", "stringData") and isinstance(item, Mapping):
            out[key] = {k: REDACTED for k in item}
        elif key in ("data", "stringData"):
            out[key] = REDACTED
        elif key == "metadata" and isinstance(item, Mapping):
            out[key] = _redact_secret_metadata(item)
        else:
            out[key] = redact(item)
    return out


def _redact_secret_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(redact(meta))
    annotations = out.get("annotations")
    if isinstance(annotations, Mapping) and _LAST_APPLIED in annotations:
        out["annotations"] = {**annotations, _LAST_APPLIED: REDACTED}
    return out


def _redact_all(value: Any) -> Any:
    """Inside a secret field: keep keys and pointers, replace every value."""
    if isinstance(value, Mapping):
        return {
            key: item if key in _POINTER_FIELDS else _redact_all(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact_all(item) for item in value]
    return REDACTED


def looks_like_private_key(text: str) -> bool:
    if _PEM_KEY_MARKER in text:
        return True
    stripped = text.lstrip()
    if not stripped.startswith(_B64_PEM_PREFIX):
        return False
    try:
        decoded = base64.b64decode(stripped, validate=False)
    except (binascii.Error, ValueError):
        return False
    return _PEM_KEY_MARKER.encode() in decoded
