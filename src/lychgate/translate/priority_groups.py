"""Backend `priorityGroups`: failover between groups of other Backends, as kgateway does it.

The Backend's cluster holds its groups' endpoints, each with its group's index as
priority: Envoy sends to the first group with healthy endpoints. Health comes
from a BackendConfigPolicy `healthCheck` or `outlierDetection` on the
priority-groups Backend; without one every endpoint counts as healthy and the
first group gets everything.

A plain static member (hosts, nothing about the connection of its own) adds its
hosts to the cluster, so the health check probes the real servers. Any other
member (a Lambda function, a forward proxy, a tunneled or TLS Backend, another
protocol) is bridged: one endpoint, an Envoy internal listener forwarding to the
member's own cluster, which keeps everything that makes it work. Envoy's active
health checks cannot connect to internal listeners, so a bridged endpoint is
judged by outlier detection only. Host names need a DNS cluster, which cannot
hold internal listeners: beside a bridged member, named hosts are bridged too.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

from lychgate import ir
from lychgate.api.backend import Backend
from lychgate.api.lychgate import GROUP
from lychgate.store import Store

if TYPE_CHECKING:
    from lychgate.translate.references import Resolution

# Settings of the connection to a bridged member's internal listener that would break it:
# they belong on the members, whose own connections leave the proxy.
_MEMBER_ONLY = (("tls", "tls"), ("proxy_protocol", "upstreamProxyProtocol"), ("tunnel", "tunnel"))


def member_problem(store: Store, backend: Backend, ref_name: str) -> str:
    """Why a group may not name Backend `ref_name`, or "" (found, and not priority groups itself)."""
    member = store.get(Backend, backend.namespace, ref_name)
    if member is None:
        return f"Backend {backend.namespace}/{ref_name} not found"
    if member.spec.priority_groups is not None:
        return f"Backend {backend.namespace}/{ref_name} has priorityGroups itself; priority groups do not nest"
    if member.spec.gcp is not None:
        # Its token is fetched for the routes to it (xds/translator/gcp_authn.py); a group's
        # members are reached through the group's cluster, where no route asks for one.
        return f"Backend {backend.namespace}/{ref_name} is a GCP Backend, which priority groups cannot hold"
    return ""


def _protocol(members: list[ir.Cluster]) -> Literal["http1", "h2c", "ws"]:
    """What the cluster speaks: HTTP/2 when a member needs it (gRPC's trailers), else
    HTTP/1.1 that may upgrade to WebSocket."""
    protocols = {m.protocol for m in members}
    return "h2c" if "h2c" in protocols else "ws" if "ws" in protocols else "http1"


def _plain(member: ir.Cluster, protocol: str) -> bool:
    """Can the member's hosts join the cluster: only addresses, nothing of their own
    about the connection, and the cluster's protocol?"""
    config = member.config
    return (member.discovery in ("static", "dns") and member.aws_lambda is None and member.tunnel is None
            and member.tls is None and member.protocol == protocol
            and (config is None or all(getattr(config, field) is None for field, _ in _MEMBER_ONLY)))


def _members(groups: list[list[ir.Cluster]], protocol: str) -> tuple[tuple[ir.PriorityMember, ...], ...]:
    plain = {m.name for g in groups for m in g if _plain(m, protocol)}
    if any(m.name not in plain for g in groups for m in g):  # a STATIC cluster: named hosts are bridged too
        plain = {m.name for g in groups for m in g if m.name in plain and m.discovery == "static"}
    return tuple(tuple(ir.PriorityMember(m, bridged=m.name not in plain) for m in g) for g in groups)


def resolve(store: Store, backend: Backend, cluster: ir.Cluster) -> Resolution:
    """The priority-groups `cluster` of `backend` with its members resolved, and the
    members' clusters (with what those need) to serve beside it."""
    from lychgate.translate.references import Resolution, resolve_service

    where = f"Backend {backend.namespace}/{backend.name}"
    for field, name in _MEMBER_ONLY:
        if cluster.config is not None and getattr(cluster.config, field) is not None:
            return Resolution(None, "InvalidKind", f"{where}: a BackendConfigPolicy sets {name} on a priorityGroups "
                                                   "Backend; set it on the Backends of its groups")
    assert backend.spec.priority_groups is not None
    groups: list[list[ir.Cluster]] = []
    needs: dict[str, tuple[ir.Cluster, ...]] = {}  # what serving each member takes: its cluster and theirs
    for i, group in enumerate(backend.spec.priority_groups):
        members: dict[str, ir.Cluster] = {}
        for j, ref in enumerate(group.backend_refs):
            # backends.problem has checked that each member exists and is not priority groups itself
            res = resolve_service(store, from_group=GROUP, from_kind="Backend", from_namespace=backend.namespace,
                                  group=GROUP, kind="Backend", namespace=backend.namespace, name=ref.name, port=None)
            if res.cluster is None:
                return Resolution(None, res.reason, f"{where}: priorityGroups[{i}].backendRefs[{j}]: {res.message}")
            members[res.cluster.name] = res.cluster  # a Backend named twice in a group is one member
            needs[res.cluster.name] = (res.cluster, *res.extra_clusters)
        groups.append(list(members.values()))
    protocol = _protocol([m for g in groups for m in g])
    prioritized = _members(groups, protocol)
    # Every member's own cluster is served, as kgateway serves every Backend: a bridged member's
    # traffic goes through it, and a member's BackendConfigPolicy applies (and reports) there.
    extra = {c.name: c for clusters in needs.values() for c in clusters}
    return Resolution(dataclasses.replace(cluster, priority_groups=prioritized, protocol=protocol),
                      extra_clusters=tuple(extra.values()))
