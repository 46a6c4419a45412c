"""A waypoint's IR → the HBONE listener, one internal listener per captured Service port.

HBONE is HTTP/2 CONNECT. The listener on the waypoint port accepts CONNECT
(HTTP/2 `allow_connect`, CONNECT upgrades) and matches the CONNECT authority
against one virtual host per captured Service port; its only route
terminates the tunnel (`connect_config`) and hands the tunnelled bytes to
that Service port's Envoy internal listener. The internal listener is an
ordinary HTTP connection manager over the Service's routes, so every route
and policy feature applies to mesh traffic as it does at a Gateway. An
authority no Service answers to gets 404: nothing to tunnel to.

Internal listeners need the bootstrap extension
`envoy.bootstrap.internal_listener` (deploy/bootstrap.py installs it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, protocol_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate import ir
from lychgate.xds import types
from lychgate.xds.translator import chain_routes
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.listener import ads_source, http_connection_manager, tls_socket
from lychgate.xds.translator.policy_filters import pack
from lychgate.xds.translator.route import route_configuration

_HCM = "envoy.filters.network.http_connection_manager"


def hbone_listener(wp: ir.Waypoint) -> listener_pb2.Listener:
    hcm = hcm_pb.HttpConnectionManager(
        stat_prefix=wp.name,
        codec_type=hcm_pb.HttpConnectionManager.HTTP2,
        http2_protocol_options=protocol_pb2.Http2ProtocolOptions(allow_connect=True),
        upgrade_configs=[hcm_pb.HttpConnectionManager.UpgradeConfig(upgrade_type="CONNECT")],
        rds=hcm_pb.Rds(config_source=ads_source(), route_config_name=wp.name),
        http_filters=[hcm_pb.HttpFilter(name="envoy.filters.http.router", typed_config=pack(router_pb2.Router()))],
    )
    return listener_pb2.Listener(
        name=wp.name,
        enable_reuse_port={"value": False},  # as Gateway listeners (listener.py): a taken port is an error
        address=address_pb2.Address(socket_address=address_pb2.SocketAddress(address=wp.address, port_value=wp.port)),
        filter_chains=[listener_components_pb2.FilterChain(
            filters=[listener_components_pb2.Filter(name=_HCM, typed_config=pack(hcm))],
            transport_socket=tls_socket(wp.tls) if wp.tls is not None else None)],
    )


def connect_routes(wp: ir.Waypoint) -> route_pb2.RouteConfiguration:
    """One virtual host per captured Service port, matched on the CONNECT authority."""
    out = route_pb2.RouteConfiguration(name=wp.name)
    seen: set[str] = set()
    for svc in wp.services:
        domains = [a for a in svc.authorities if a not in seen]  # Envoy refuses a domain twice
        seen.update(domains)
        if not domains:
            continue
        out.virtual_hosts.append(route_pb.VirtualHost(
            name=svc.listener.name, domains=domains,
            routes=[route_pb.Route(
                name=svc.listener.name,
                match=route_pb.RouteMatch(connect_matcher=route_pb.RouteMatch.ConnectMatcher()),
                route=route_pb.RouteAction(
                    cluster=svc.listener.name,
                    upgrade_configs=[route_pb.RouteAction.UpgradeConfig(
                        upgrade_type="CONNECT",
                        connect_config=route_pb.RouteAction.UpgradeConfig.ConnectConfig())],
                ),
            )],
        ))
    return out


def internal_listener(listener: ir.HTTPListener) -> listener_pb2.Listener:
    return listener_pb2.Listener(
        name=listener.name,
        internal_listener=listener_pb2.Listener.InternalListenerConfig(),
        filter_chains=[listener_components_pb2.FilterChain(
            filters=[listener_components_pb2.Filter(name=_HCM, typed_config=pack(http_connection_manager(listener)))])],
    )


def tunnel_cluster(name: str) -> cluster_pb2.Cluster:
    """The way from the HBONE listener into a Service port's internal listener."""
    return cluster_pb2.Cluster(
        name=name,
        type=cluster_pb2.Cluster.STATIC,
        load_assignment=endpoint_pb2.ClusterLoadAssignment(
            cluster_name=name,
            endpoints=[endpoint_components_pb2.LocalityLbEndpoints(lb_endpoints=[
                endpoint_components_pb2.LbEndpoint(endpoint=endpoint_components_pb2.Endpoint(
                    address=address_pb2.Address(
                        envoy_internal_address=address_pb2.EnvoyInternalAddress(server_listener_name=name))))])],
        ),
    )


class Waypoint(Feature):
    name = "waypoint"

    def resources(self, gateway: ir.GatewayIR) -> Iterable[tuple[str, str, Any]]:
        wp = gateway.waypoint
        if wp is None:
            return
        yield types.LISTENER, wp.name, hbone_listener(wp)
        yield types.ROUTE, wp.name, connect_routes(wp)
        for svc in wp.services:
            name = svc.listener.name
            yield types.LISTENER, name, internal_listener(svc.listener)
            yield types.ROUTE, chain_routes.routes_name(svc.listener), route_configuration(svc.listener)
            stand_in = chain_routes.other_routes_name(svc.listener)
            yield types.ROUTE, stand_in, chain_routes.stand_in(stand_in)
            yield types.CLUSTER, name, tunnel_cluster(name)


register(Waypoint())
