"""Errors that name a field of a user's object, and the parsers of its values: what every
translator of a spec shares (policy features, listener and backend settings, access logs).

Outside the policies package on purpose: importing a module of a package runs the package's
`__init__` first, and the policies package imports every feature there, some of which import
translators that use these helpers (a circle an entry point saw as an ImportError)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lychgate import ir
from lychgate.envoy_limits import EnvoyRejects
from lychgate.store import Store


class Invalid(ValueError):
    """A field whose value cannot be served: the policy is not Accepted."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def envoy_check(check: Callable[[str], None], value: str, path: str) -> None:
    """Run an envoy_limits check; what Envoy would refuse makes the field Invalid."""
    try:
        check(value)
    except EnvoyRejects as err:
        raise Invalid(path, str(err)) from None


class Unresolved(ValueError):
    """A reference that cannot be followed (yet): the policy is valid but not applied."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class CompileContext:
    """What compiling a policy feature may read, and what it adds besides route settings."""

    store: Store
    # Clusters the compiled features need (ext auth / ext proc services), by name.
    clusters: dict[str, ir.Cluster] = field(default_factory=dict)


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}


def duration_ms(value: object, path: str, minimum_ms: int = 0) -> int:
    """A duration as Kubernetes writes them ('10s', '500ms', '1m30s', '1.5s') in ms."""
    if not isinstance(value, str) or not value:
        raise Invalid(path, f"{value!r} is not a duration like 10s or 500ms")
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(value):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_MS[m.group(2)]
        pos = m.end()
    if pos != len(value):
        raise Invalid(path, f"{value!r} is not a duration like 10s or 500ms")
    ms = round(total)
    if ms < minimum_ms:
        raise Invalid(path, f"{value!r} is shorter than the minimum of {minimum_ms}ms")
    return ms


_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_QUANTITY_FACTOR = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
                    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity_bytes(value: object, path: str) -> int:
    """A Kubernetes quantity ('1Mi', '512Ki', '1000', 1048576) in bytes."""
    if isinstance(value, bool):
        raise Invalid(path, f"{value!r} is not a size like 1Mi or 512Ki")
    if isinstance(value, int):
        number = value
    else:
        m = _QUANTITY.match(str(value).strip())
        if m is None:
            raise Invalid(path, f"{value!r} is not a size like 1Mi, 512Ki or 1000")
        number = int(float(m.group(1)) * _QUANTITY_FACTOR[m.group(2)])
    if not 0 < number < 2**32:
        raise Invalid(path, f"{value!r} must be more than 0 and less than 4Gi")
    return number


_HEADER_NAME = re.compile(r"^:?[A-Za-z0-9!#$%&'*+\-.^_`|~]+$")


def header_name(name: object, path: str, pseudo: bool = False) -> str:
    if not isinstance(name, str) or not _HEADER_NAME.match(name) or (name.startswith(":") and not pseudo):
        raise Invalid(path, f"{name!r} is not a valid header name")
    return name.lower()


def descriptor_entry(entry: dict[str, Any], path: str) -> ir.DescriptorEntry:
    """An entry of a rate limit descriptor (rateLimit.global's, ai.tokenRateLimit's)."""
    kind = entry["type"]
    if kind == "Generic":
        return ("generic", entry["generic"]["key"], entry["generic"]["value"])
    if kind == "Header":
        return ("header", header_name(entry["header"], f"{path}.header"), "")
    return ("remote_address", "", "") if kind == "RemoteAddress" else ("path", "", "")
