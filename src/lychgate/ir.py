"""The intermediate representation between Gateway API semantics and Envoy.

Translation resolves everything Kubernetes-shaped (parentRefs, hostnames,
ReferenceGrants, Services) into these plain values; the xDS layer turns them
into Envoy protos without looking at a single Kubernetes object. All values are
frozen and hashable so unchanged parts can be cached by identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

PathType = Literal["Exact", "PathPrefix", "RegularExpression"]
MatchType = Literal["Exact", "RegularExpression"]


@dataclass(frozen=True)
class StringMatch:
    name: str
    type: MatchType
    value: str


@dataclass(frozen=True)
class Match:
    path_type: PathType = "PathPrefix"
    path: str = "/"
    headers: tuple[StringMatch, ...] = ()
    query_params: tuple[StringMatch, ...] = ()
    method: str | None = None


@dataclass(frozen=True)
class HeaderOps:
    set: tuple[tuple[str, str], ...] = ()
    add: tuple[tuple[str, str], ...] = ()
    remove: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.set or self.add or self.remove)


@dataclass(frozen=True)
class WeightedCluster:
    """One backend of a rule. cluster=None means the backend is invalid: its
    share of traffic gets HTTP 500, as the Gateway API requires."""

    cluster: str | None
    weight: int
    request_headers: HeaderOps = HeaderOps()
    response_headers: HeaderOps = HeaderOps()


@dataclass(frozen=True)
class Forward:
    backends: tuple[WeightedCluster, ...]
    timeout_ms: int | None = None  # None: Envoy's default; 0: no timeout
    per_try_timeout_ms: int | None = None


@dataclass(frozen=True)
class DirectResponse:
    status: int
    body: str = ""


@dataclass(frozen=True)
class Redirect:
    scheme: str | None = None
    hostname: str | None = None
    port: int | None = None
    full_path: str | None = None
    prefix_rewrite: str | None = None
    status: int = 302


Action = Forward | DirectResponse | Redirect


@dataclass(frozen=True)
class RouteSource:
    """Where a route came from: used for names, status and debugging."""

    kind: str
    namespace: str
    name: str
    rule: int
    match: int
    rule_name: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.kind.lower()}/{self.namespace}/{self.name}/rule/{self.rule}/match/{self.match}"


@dataclass(frozen=True)
class Route:
    source: RouteSource
    match: Match
    action: Action
    request_headers: HeaderOps = HeaderOps()
    response_headers: HeaderOps = HeaderOps()
    url_rewrite_host: str | None = None
    url_rewrite_path_full: str | None = None
    url_rewrite_path_prefix: str | None = None
    # Why the route answers 500 instead of forwarding (standard validation).
    replaced_because: str | None = None


@dataclass(frozen=True)
class VirtualHost:
    name: str
    domains: tuple[str, ...]
    routes: tuple[Route, ...]


@dataclass(frozen=True)
class HTTPListener:
    """One Envoy listener: every Gateway listener sharing address and port."""

    name: str
    address: str
    port: int
    virtual_hosts: tuple[VirtualHost, ...]


@dataclass(frozen=True)
class Endpoint:
    address: str
    port: int
    ready: bool = True


@dataclass(frozen=True)
class Cluster:
    name: str
    endpoints: tuple[Endpoint, ...]
    protocol: Literal["http1", "h2c"] = "http1"
    connect_timeout_ms: int = 5000


@dataclass(frozen=True)
class GatewayIR:
    """Everything one Gateway's proxy must serve."""

    namespace: str
    name: str
    listeners: tuple[HTTPListener, ...] = ()
    clusters: tuple[Cluster, ...] = field(default=())

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"
