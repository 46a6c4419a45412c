"""IR HTTP listeners → Envoy Listeners with an HTTP connection manager."""

from __future__ import annotations

from envoy.config.core.v3 import address_pb2, config_source_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from google.protobuf import any_pb2

from lychgate import ir
from lychgate.xds.translator.features import FEATURES


def ads_source() -> config_source_pb2.ConfigSource:
    return config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(),
        resource_api_version=config_source_pb2.V3,
    )


def _pack(message: object) -> any_pb2.Any:
    out = any_pb2.Any()
    out.Pack(message)
    return out


def http_connection_manager(listener: ir.HTTPListener) -> hcm_pb.HttpConnectionManager:
    hcm = hcm_pb.HttpConnectionManager(
        stat_prefix=listener.name,
        rds=hcm_pb.Rds(config_source=ads_source(), route_config_name=listener.name),
        # Host headers carry the port ("example.com:8080"); Gateway API hostnames don't.
        strip_any_host_port=True,
        normalize_path={"value": True},
        merge_slashes=True,
        use_remote_address={"value": True},
    )
    for feature in FEATURES:
        feature.patch_hcm(listener, hcm)
    # The router is always last: filters a feature added run before it.
    hcm.http_filters.append(
        hcm_pb.HttpFilter(name="envoy.filters.http.router", typed_config=_pack(router_pb2.Router()))
    )
    return hcm


def envoy_listener(listener: ir.HTTPListener) -> listener_pb2.Listener:
    return listener_pb2.Listener(
        name=listener.name,
        # Envoy's default SO_REUSEPORT would let a second process bind the same
        # address and port and silently take half the connections; without it
        # a taken port is refused and reported on the listener's status.
        enable_reuse_port={"value": False},
        address=address_pb2.Address(
            socket_address=address_pb2.SocketAddress(address=listener.address, port_value=listener.port)
        ),
        filter_chains=[
            listener_components_pb2.FilterChain(
                filters=[
                    listener_components_pb2.Filter(
                        name="envoy.filters.network.http_connection_manager",
                        typed_config=_pack(http_connection_manager(listener)),
                    )
                ]
            )
        ],
    )
