"""Talking to the Kubernetes API: resource handles, the client, errors, backoff.

Everything Kubernetes mode sends goes through lightkube's AsyncClient. Objects
travel as plain dicts (lightkube "generic" resources), which is what the models
in `lychgate.api` parse and what the manifests in `lychgate.deploy.manifests`
are. The resource classes made here are not put in lightkube's global registry,
so they never clash with typed classes another part of a process may use.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.core import resource as lkres
from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericGlobalStatus,
    GenericNamespacedResource,
    GenericNamespacedStatus,
    create_api_info,
)

from lychgate.api.base import Resource

FIELD_MANAGER = "lychgate"


def plural(kind: str) -> str:
    """The resource name of a kind, as the Gateway API and lychgate CRDs spell them."""
    lower = kind.lower()
    if lower.endswith(("ss", "sh", "ch", "x")):
        return lower + "es"
    if lower.endswith("s"):
        return lower  # GatewayParameters
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"  # TrafficPolicy
    return lower + "s"


@dataclass(frozen=True)
class ApiResource:
    """One REST resource (group, version, plural) with lightkube classes for it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @cached_property
    def cls(self) -> Any:
        """lightkube resource class whose instances are plain dicts."""
        info = create_api_info(self.group, self.version, self.kind, self.plural)
        base = GenericNamespacedResource if self.namespaced else GenericGlobalResource
        status_base = GenericNamespacedStatus if self.namespaced else GenericGlobalStatus
        status = type(f"{self.kind}Status", (status_base,), {"_api_info": lkres.ApiInfo(
            resource=info.resource, parent=info.resource, plural=self.plural,
            verbs=["get", "patch", "put"], action="status")})
        return type(self.kind, (base,), {"_api_info": info, "Status": status})

    @property
    def status_cls(self) -> Any:
        return self.cls.Status

    def namespace_arg(self, namespace: str) -> dict[str, Any]:
        """`namespace=` for lightkube calls: only namespaced resources take one."""
        return {"namespace": namespace} if self.namespaced else {}

    def describe(self, namespace: str, name: str) -> str:
        return f"{self.kind} {namespace}/{name}" if self.namespaced else f"{self.kind} {name}"


def for_model(model: type[Resource]) -> ApiResource:
    """The REST resource a lychgate model is served as (its first listed version)."""
    return ApiResource(model.GROUP, model.VERSIONS[0], model.KIND,
                       getattr(model, "PLURAL", None) or plural(model.KIND), model.NAMESPACED)


DEPLOYMENT = ApiResource("apps", "v1", "Deployment", "deployments")
SERVICE = ApiResource("", "v1", "Service", "services")
SERVICE_ACCOUNT = ApiResource("", "v1", "ServiceAccount", "serviceaccounts")
CONFIG_MAP = ApiResource("", "v1", "ConfigMap", "configmaps")
SECRET = ApiResource("", "v1", "Secret", "secrets")  # a proxy's AI extension config
LEASE = ApiResource("coordination.k8s.io", "v1", "Lease", "leases")
# Created for a proxy only when its GatewayParameters ask (deploy/overlays.py).
POD_DISRUPTION_BUDGET = ApiResource("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets")
HORIZONTAL_POD_AUTOSCALER = ApiResource("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers")
VERTICAL_POD_AUTOSCALER = ApiResource("autoscaling.k8s.io", "v1", "VerticalPodAutoscaler", "verticalpodautoscalers")


def plain(obj: Any) -> dict[str, Any]:
    """A lightkube generic object (a dict subclass) as a plain dict."""
    out: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return out


def error_code(err: BaseException) -> int | None:
    """The HTTP status of an API error, None for anything else (transport, ...).

    Paths the API server does not serve at all (a CRD that is not installed)
    answer a plain-text 404, which lightkube raises as a bare HTTPStatusError."""
    if isinstance(err, ApiError) and err.status is not None and err.status.code is not None:
        return int(err.status.code)
    status = getattr(getattr(err, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def describe_error(err: BaseException) -> str:
    if isinstance(err, ApiError) and err.status is not None:
        return f"{err.status.code} {err.status.reason}: {err.status.message}"
    code = error_code(err)
    if code is not None:
        try:
            path = err.request.url.path  # type: ignore[attr-defined]
        except Exception:
            path = "?"
        return f"{code} from the API server for {path}"
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def load_config(kubeconfig: Path | None) -> KubeConfig:
    """A kubeconfig file when given, else in-cluster, then $KUBECONFIG, then ~/.kube/config."""
    if kubeconfig is not None:
        return KubeConfig.from_file(kubeconfig)
    return KubeConfig.from_env()


async def make_client(
    kubeconfig: Path | None = None, config: KubeConfig | None = None, trust_env: bool = True
) -> AsyncClient:
    """The client every Kubernetes-mode component shares (one connection pool)."""
    if config is None:
        config = await asyncio.to_thread(load_config, kubeconfig)  # reads files
    return AsyncClient(config=config, field_manager=FIELD_MANAGER, trust_env=trust_env)


class Backoff:
    """Exponential backoff with full jitter: 0.2 s, 0.4 s, ... up to `cap`."""

    def __init__(self, base: float = 0.2, cap: float = 30.0) -> None:
        self.base = base
        self.cap = cap
        self.failures = 0

    def reset(self) -> None:
        self.failures = 0

    def next(self) -> float:
        delay = min(self.cap, self.base * 2 ** min(self.failures, 16))
        self.failures += 1
        return random.uniform(delay / 2, delay)
