"""IR clusters → Envoy Clusters (EDS over ADS) and their ClusterLoadAssignments."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, protocol_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as hpo
from google.protobuf import any_pb2, duration_pb2

from lychgate import ir
from lychgate.xds.translator.inference import override_host_policy
from lychgate.xds.translator.listener import ads_source

_HTTP_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


def envoy_cluster(cluster: ir.Cluster) -> cluster_pb2.Cluster:
    out = cluster_pb2.Cluster(
        name=cluster.name,
        type=cluster_pb2.Cluster.EDS,
        eds_cluster_config=cluster_pb2.Cluster.EdsClusterConfig(eds_config=ads_source()),
        connect_timeout=duration_pb2.Duration(
            seconds=cluster.connect_timeout_ms // 1000,
            nanos=(cluster.connect_timeout_ms % 1000) * 1_000_000,
        ),
    )
    if cluster.protocol == "h2c":
        options = any_pb2.Any()
        options.Pack(
            hpo.HttpProtocolOptions(
                explicit_http_config=hpo.HttpProtocolOptions.ExplicitHttpConfig(
                    http2_protocol_options=protocol_pb2.Http2ProtocolOptions()
                )
            )
        )
        out.typed_extension_protocol_options[_HTTP_OPTIONS].CopyFrom(options)
    if cluster.endpoint_override:  # an InferencePool: its endpoint picker chooses
        out.load_balancing_policy.CopyFrom(override_host_policy())
    return out


def load_assignment(cluster: ir.Cluster) -> endpoint_pb2.ClusterLoadAssignment:
    return endpoint_pb2.ClusterLoadAssignment(
        cluster_name=cluster.name,
        endpoints=[
            endpoint_components_pb2.LocalityLbEndpoints(
                lb_endpoints=[
                    endpoint_components_pb2.LbEndpoint(
                        load_balancing_weight={"value": e.weight} if e.weight != 1 else None,
                        endpoint=endpoint_components_pb2.Endpoint(
                            address=address_pb2.Address(
                                socket_address=address_pb2.SocketAddress(
                                    address=e.address, port_value=e.port
                                )
                            )
                        )
                    )
                    for e in cluster.endpoints
                ]
            )
        ]
        if cluster.endpoints
        else [],
    )
