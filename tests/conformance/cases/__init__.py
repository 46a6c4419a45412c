"""One case per upstream conformance test (gateway-api v1.6.1), by family.

A case names its upstream ShortName, the manifests it applies, the Gateway API
features it needs (the Go test's Features), and a function making the same
requests and status checks as the Go test. The registry keeps upstream's order
within each family module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.conformance.suite import Suite

Run = Callable[[Suite], None]


@dataclass(frozen=True)
class Case:
    short_name: str
    description: str
    features: tuple[str, ...]
    manifests: tuple[str, ...]
    run: Run | None
    # Secrets/ConfigMaps the Go test creates at run time, made by the runner.
    setup: Callable[[Suite], list[dict[str, Any]]] | None = None
    mesh: bool = False
    provisional: bool = False
    slow: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def file(self) -> str:
        return f"case-{self.short_name}"


REGISTRY: dict[str, Case] = {}


def case(short_name: str, features: list[str], manifests: list[str] | None = None, description: str = "",
         setup: Callable[[Suite], list[dict[str, Any]]] | None = None, provisional: bool = False,
         slow: bool = False) -> Callable[[Run], Run]:
    def register(fn: Run) -> Run:
        if short_name in REGISTRY:
            raise ValueError(f"duplicate conformance case {short_name}")
        REGISTRY[short_name] = Case(short_name, description or (fn.__doc__ or "").strip(), tuple(features),
                                    tuple(manifests or ()), fn, setup, provisional=provisional, slow=slow)
        return fn
    return register


def mesh_case(short_name: str, features: list[str], manifests: list[str], description: str = "") -> None:
    """A test of the mesh profile, which lychgate does not claim: listed, never run."""
    REGISTRY[short_name] = Case(short_name, description, tuple(features), tuple(manifests), None, mesh=True)


def pending_case(short_name: str, features: list[str], manifests: list[str], description: str = "") -> None:
    """An upstream test whose expectations are not written as a lychgate case yet: listed
    (so the report has one row per upstream test), reported as skipped, never run."""
    REGISTRY[short_name] = Case(short_name, description, tuple(features), tuple(manifests), None)


def all_cases() -> list[Case]:
    # Importing the family modules registers their cases.
    from tests.conformance.cases import (  # noqa: F401
        backendtlspolicy,
        gateway,
        grpcroute,
        httproute,
        httproute_pending,
        listenerset,
        mesh,
        tcproute,
        tlsroute,
        udproute,
    )

    return list(REGISTRY.values())
