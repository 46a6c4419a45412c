"""Backend `priorityGroups` → one cluster whose localities are the groups, by priority.

A plain member's hosts are endpoints of the cluster (its health check probes them
directly). A bridged member (translate/priority_groups.py) is one endpoint, an
Envoy internal listener as in tunnel.py, whose HTTP connection manager has one
catch-all route to the member's own cluster, with the HTTP filter that member
needs (aws_lambda for a function, the forward proxy's filter). Envoy's active
health checks cannot connect to internal listeners, so those endpoints are left
out of them (outlier detection still judges them). The bridge is transparent: no
route timeout (the outer route's applies), no headers of its own.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.dynamic_forward_proxy.v3 import (
    dynamic_forward_proxy_pb2 as dfp_filter_pb2,
)
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from google.protobuf import duration_pb2

from lychgate import ir
from lychgate.xds import types
from lychgate.xds.translator import aws_lambda
from lychgate.xds.translator.backend_cluster import DNS_CACHE, as_dns_cluster
from lychgate.xds.translator.backend_cluster import FILTER as FORWARD_PROXY_FILTER
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import pack

_HCM = "envoy.filters.network.http_connection_manager"


def listener_name(cluster: ir.Cluster, member: ir.Cluster) -> str:
    return f"{cluster.name}->{member.name}"


def patch(cluster: ir.Cluster, out: cluster_pb2.Cluster) -> None:
    """The EDS Cluster built for a priority-groups Backend becomes a STATIC one (a DNS one
    when a member's hosts are names: then no member is bridged)."""
    out.ClearField("eds_cluster_config")
    named = any(not m.bridged and m.cluster.discovery == "dns" for g in cluster.priority_groups for m in g)
    if named:
        as_dns_cluster(out)
    else:
        out.type = cluster_pb2.Cluster.STATIC
    out.load_assignment.CopyFrom(load_assignment(cluster))


def _endpoints(cluster: ir.Cluster, member: ir.PriorityMember) -> list[endpoint_components_pb2.LbEndpoint]:
    if member.bridged:
        return [endpoint_components_pb2.LbEndpoint(endpoint=endpoint_components_pb2.Endpoint(
            address=address_pb2.Address(envoy_internal_address=address_pb2.EnvoyInternalAddress(
                server_listener_name=listener_name(cluster, member.cluster))),
            health_check_config=endpoint_components_pb2.Endpoint.HealthCheckConfig(
                disable_active_health_check=True)))]
    return [endpoint_components_pb2.LbEndpoint(
        load_balancing_weight={"value": e.weight} if e.weight != 1 else None,
        endpoint=endpoint_components_pb2.Endpoint(address=address_pb2.Address(
            socket_address=address_pb2.SocketAddress(address=e.address, port_value=e.port))))
        for e in member.cluster.endpoints]


def load_assignment(cluster: ir.Cluster) -> endpoint_pb2.ClusterLoadAssignment:
    return endpoint_pb2.ClusterLoadAssignment(cluster_name=cluster.name, endpoints=[
        endpoint_components_pb2.LocalityLbEndpoints(
            priority=priority, lb_endpoints=[e for member in group for e in _endpoints(cluster, member)])
        for priority, group in enumerate(cluster.priority_groups)])


def _member_filters(member: ir.Cluster) -> list[hcm_pb.HttpFilter]:
    if member.aws_lambda is not None:
        return [hcm_pb.HttpFilter(name=aws_lambda.FILTER, typed_config=pack(aws_lambda.config(member.aws_lambda)))]
    if member.discovery == "forward_proxy":
        return [hcm_pb.HttpFilter(name=FORWARD_PROXY_FILTER,
                                  typed_config=pack(dfp_filter_pb2.FilterConfig(dns_cache_config=DNS_CACHE)))]
    return []


def bridge_listener(cluster: ir.Cluster, member: ir.Cluster) -> listener_pb2.Listener:
    name = listener_name(cluster, member)
    hcm = hcm_pb.HttpConnectionManager(
        stat_prefix=name,
        codec_type=hcm_pb.HttpConnectionManager.AUTO,  # HTTP/2 when the outer cluster speaks it
        server_header_transformation=hcm_pb.HttpConnectionManager.PASS_THROUGH,
        upgrade_configs=[hcm_pb.HttpConnectionManager.UpgradeConfig(upgrade_type="websocket")]
        if member.protocol == "ws" else [],
        route_config=route_pb2.RouteConfiguration(name=name, virtual_hosts=[route_pb.VirtualHost(
            name=name, domains=["*"], routes=[route_pb.Route(
                match=route_pb.RouteMatch(prefix="/"),
                route=route_pb.RouteAction(cluster=member.name, timeout=duration_pb2.Duration()))])]),
        http_filters=[*_member_filters(member), hcm_pb.HttpFilter(
            name="envoy.filters.http.router", typed_config=pack(router_pb2.Router(suppress_envoy_headers=True)))],
    )
    return listener_pb2.Listener(
        name=name, internal_listener=listener_pb2.Listener.InternalListenerConfig(),
        filter_chains=[listener_components_pb2.FilterChain(
            filters=[listener_components_pb2.Filter(name=_HCM, typed_config=pack(hcm))])])


_GROUPS = operator.attrgetter("priority_groups")  # (which clusters have any, found at C speed)


class PriorityGroups(Feature):
    name = "priority_groups"

    def resources(self, gateway: ir.GatewayIR) -> Iterable[tuple[str, str, Any]]:
        for cluster in itertools.compress(gateway.clusters, map(_GROUPS, gateway.clusters)):  # (few of thousands)
            bridged = {m.cluster.name: m.cluster for group in cluster.priority_groups for m in group if m.bridged}
            for member in bridged.values():
                yield types.LISTENER, listener_name(cluster, member), bridge_listener(cluster, member)


register(PriorityGroups())
