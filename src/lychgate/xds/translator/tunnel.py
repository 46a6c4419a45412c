"""BackendConfigPolicy `tunnel`: a Backend reached through an HTTP CONNECT proxy.

As kgateway does it: the Backend's cluster keeps its own settings (TLS to the
destination included) but its one endpoint becomes an Envoy internal listener,
whose tcp_proxy opens `CONNECT host:port` on the proxy's cluster (with the
policy's headers, e.g. Proxy-Authorization) and then carries the bytes. A proxy
that refuses the CONNECT or cannot be reached fails the upstream connection:
the request answers 503.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable
from typing import Any

from envoy.config.core.v3 import address_pb2, base_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2

from lychgate import ir
from lychgate.xds import types
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import pack


def listener_name(cluster: ir.Cluster) -> str:
    return f"tunnel/{cluster.name}"


def load_assignment(cluster: ir.Cluster, tunnel: ir.Tunnel) -> endpoint_pb2.ClusterLoadAssignment:
    """The destination's one endpoint: the internal listener; `hostname` keeps the
    destination's name for auto host rewrite."""
    return endpoint_pb2.ClusterLoadAssignment(cluster_name=cluster.name, endpoints=[
        endpoint_components_pb2.LocalityLbEndpoints(lb_endpoints=[endpoint_components_pb2.LbEndpoint(
            endpoint=endpoint_components_pb2.Endpoint(hostname=tunnel.host, address=address_pb2.Address(
                envoy_internal_address=address_pb2.EnvoyInternalAddress(
                    server_listener_name=listener_name(cluster)))))])])


def connect_listener(cluster: ir.Cluster, tunnel: ir.Tunnel) -> listener_pb2.Listener:
    name = listener_name(cluster)
    config = tcp_proxy_pb2.TcpProxy(
        stat_prefix=name, cluster=tunnel.proxy.name,
        # `%` starts a command in these fields: literal values are escaped.
        tunneling_config=tcp_proxy_pb2.TcpProxy.TunnelingConfig(
            hostname=tunnel.authority.replace("%", "%%"),
            headers_to_add=[base_pb2.HeaderValueOption(
                header=base_pb2.HeaderValue(key=key, value=value.replace("%", "%%")),
                append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD)
                for key, value in tunnel.headers]))
    return listener_pb2.Listener(
        name=name, internal_listener=listener_pb2.Listener.InternalListenerConfig(),
        filter_chains=[listener_components_pb2.FilterChain(filters=[listener_components_pb2.Filter(
            name="envoy.filters.network.tcp_proxy", typed_config=pack(config))])])


_TUNNEL = operator.attrgetter("tunnel")  # (which clusters have one, found at C speed)


class Tunnels(Feature):
    name = "tunnel"

    def resources(self, gateway: ir.GatewayIR) -> Iterable[tuple[str, str, Any]]:
        for cluster in itertools.compress(gateway.clusters, map(_TUNNEL, gateway.clusters)):  # (few of thousands)
            if (tunnel := cluster.tunnel) is not None:
                yield types.LISTENER, listener_name(cluster), connect_listener(cluster, tunnel)


register(Tunnels())
