"""Object validation the API server does for every type (a 422 `Invalid`).

Only the generic rules (names, labels, annotations, ownerReferences) and the few
type rules a controller trips over (TLS Secrets need tls.crt/tls.key). CRD OpenAPI
and CEL validation is not modelled: tests that need a specific rejection register
a validator (`KubeFake.add_validator`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request, invalid
from .resources import ResourceType

# (object) -> [(field path, message)]; an empty list means valid.
Validator = Callable[[dict[str, Any]], list[tuple[str, str]]]

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _name_errors(name: str, fmt: str, field: str) -> list[tuple[str, str]]:
    if fmt == "label":
        if len(name) > 63 or not _LABEL.match(name):
            return [(field, f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower case '
                            "alphanumeric characters or '-', and must start and end with an alphanumeric character")]
    elif len(name) > 253 or not _SUBDOMAIN.match(name):
        return [(field, f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case '
                        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")]
    return []


def _qualified_key_errors(key: str, field: str) -> list[tuple[str, str]]:
    prefix, _, name = key.rpartition("/")
    errs = []
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        errs.append((field, f'Invalid value: "{key}": prefix part must be a lowercase RFC 1123 subdomain'))
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        errs.append((field, f'Invalid value: "{key}": name part must consist of alphanumeric characters, '
                            "'-', '_' or '.', and must start and end with an alphanumeric character"))
    return errs


def _metadata_errors(rt: ResourceType, meta: dict[str, Any]) -> list[tuple[str, str]]:
    errs = _name_errors(meta.get("name", ""), rt.name_format, "metadata.name")
    for k, v in (meta.get("labels") or {}).items():
        errs += _qualified_key_errors(k, "metadata.labels")
        if not isinstance(v, str) or len(v) > 63 or not _LABEL_VALUE.match(v):
            errs.append(("metadata.labels", f'Invalid value: "{v}": a valid label must be an empty string or '
                                            "consist of alphanumeric characters, '-', '_' or '.'"))
    annotations = meta.get("annotations") or {}
    for k, v in annotations.items():
        errs += _qualified_key_errors(k, "metadata.annotations")
        if not isinstance(v, str):
            errs.append(("metadata.annotations", f"Invalid value: {v!r}: must be a string"))
    if sum(len(k) + len(str(v)) for k, v in annotations.items()) > 256 * 1024:
        errs.append(("metadata.annotations", "Too long: must have at most 262144 bytes"))
    controllers = 0
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        for f in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(f):
                errs.append((f"metadata.ownerReferences[{i}].{f}", "Required value"))
        controllers += bool(ref.get("controller"))
    if controllers > 1:
        errs.append(("metadata.ownerReferences", "Invalid value: only one reference can have Controller set to true"))
    return errs


def _type_errors(rt: ResourceType, obj: dict[str, Any]) -> list[tuple[str, str]]:
    errs: list[tuple[str, str]] = []
    if rt.builtin and rt.kind in ("ConfigMap", "Secret"):
        for section in ("data", "binaryData"):
            for k in obj.get(section) or {}:
                if not _CONFIG_KEY.match(k):
                    errs.append((f"{section}[{k}]", f'Invalid value: "{k}": a valid config key must consist of '
                                                    "alphanumeric characters, '-', '_' or '.'"))
    if rt.builtin and rt.kind == "Secret":
        data = obj.get("data") or {}
        for k, v in data.items():
            try:
                base64.b64decode(v, validate=True)
            except (binascii.Error, TypeError) as e:
                # Decoding happens before validation upstream: a 400, not a 422.
                raise bad_request(f"illegal base64 data in Secret data[{k}]") from e
        if obj.get("type") == "kubernetes.io/tls":
            for k in ("tls.crt", "tls.key"):
                if k not in data:
                    errs.append((f"data[{k}]", "Required value"))
    return errs


def validate(rt: ResourceType, obj: dict[str, Any], extra: list[Validator]) -> None:
    meta = obj.get("metadata") or {}
    errs = _metadata_errors(rt, meta) + _type_errors(rt, obj)
    for v in extra:
        errs += v(obj)
    if errs:
        raise invalid(rt.group, rt.kind, meta.get("name", ""), errs)
