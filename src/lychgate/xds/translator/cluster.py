"""IR clusters → Envoy Clusters (EDS over ADS) and their ClusterLoadAssignments."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, base_pb2, protocol_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2 as tls_common_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as hpo
from envoy.type.matcher.v3 import string_pb2
from google.protobuf import any_pb2, duration_pb2

from lychgate import ir
from lychgate.xds.translator import backend_cluster, cluster_policy, priority_groups, tls_params
from lychgate.xds.translator.cluster_policy import HTTP_OPTIONS, SYSTEM_CA_BUNDLE
from lychgate.xds.translator.inference import override_host_policy
from lychgate.xds.translator.listener import ads_source


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
        out.typed_extension_protocol_options[HTTP_OPTIONS].CopyFrom(options)
    if cluster.tls is not None:
        out.transport_socket.CopyFrom(upstream_tls(cluster.tls))
    if cluster.endpoint_override:  # an InferencePool: its endpoint picker chooses
        out.load_balancing_policy.CopyFrom(override_host_policy())
    if cluster.discovery == "priority_groups":
        priority_groups.patch(cluster, out)
    elif cluster.discovery != "eds":  # Backend objects
        backend_cluster.patch(cluster, out, load_assignment(cluster))
    cluster_policy.apply(cluster, out)  # BackendConfigPolicy
    return out


_SAN_TYPES = {"Hostname": tls_common_pb2.SubjectAltNameMatcher.DNS,
              "URI": tls_common_pb2.SubjectAltNameMatcher.URI}


def upstream_tls(tls: ir.UpstreamTLS) -> base_pb2.TransportSocket:
    """TLS to the backend: SNI, and a certificate verified against the CA and names
    (unless `verify` is off)."""
    validation = None if not tls.verify else tls_common_pb2.CertificateValidationContext(
        trusted_ca=base_pb2.DataSource(inline_string=tls.ca) if tls.ca is not None
        else base_pb2.DataSource(filename=SYSTEM_CA_BUNDLE),
        match_typed_subject_alt_names=[
            tls_common_pb2.SubjectAltNameMatcher(san_type=_SAN_TYPES[kind], matcher=string_pb2.StringMatcher(exact=value))
            for kind, value in tls.sans
        ],
    )
    context = tls_pb2.UpstreamTlsContext(
        sni=tls.sni, common_tls_context=tls_pb2.CommonTlsContext(validation_context=validation,
                                                                 alpn_protocols=list(tls.alpn)))
    tls_params.apply(tls.params, context.common_tls_context.tls_params)
    if validation is not None:
        tls_params.verify(context.common_tls_context.validation_context, tls.hashes)
    if tls.client_certificate is not None:
        context.common_tls_context.tls_certificates.append(tls_common_pb2.TlsCertificate(
            certificate_chain=base_pb2.DataSource(inline_string=tls.client_certificate.chain),
            private_key=base_pb2.DataSource(inline_string=tls.client_certificate.key)))
    packed = any_pb2.Any()
    packed.Pack(context)
    return base_pb2.TransportSocket(name="envoy.transport_sockets.tls", typed_config=packed)


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
