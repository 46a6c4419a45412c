"""Clusters whose endpoints do not come over EDS (Backend objects): static
addresses, host names Envoy resolves, and the dynamic forward proxy, with the
HTTP filter the forward proxy needs in every listener whose routes use one."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.extensions.clusters.common.dns.v3 import dns_pb2
from envoy.extensions.clusters.dns.v3 import dns_cluster_pb2
from envoy.extensions.clusters.dynamic_forward_proxy.v3 import cluster_pb2 as dfp_cluster_pb2
from envoy.extensions.common.dynamic_forward_proxy.v3 import dns_cache_pb2
from envoy.extensions.filters.http.dynamic_forward_proxy.v3 import (
    dynamic_forward_proxy_pb2 as dfp_filter_pb2,
)
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from lychgate import ir
from lychgate.xds.translator import ai_gateway, gcp_authn, mcp_gateway, tunnel
from lychgate.xds.translator.cluster_policy import (
    DNS_CLUSTER,
    SYSTEM_CA_BUNDLE,
    http_options,
)
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.host_flags import any_host
from lychgate.xds.translator.policy_filters import pack

FILTER = "envoy.filters.http.dynamic_forward_proxy"
# Forward-proxy clusters are named backend_<namespace>_<name>_0/dfp (translate/backends.py),
# so a listener can tell from its routes alone that it needs the filter.
FORWARD_PROXY_SUFFIX = "/dfp"
# One DNS cache shared by the filter and every forward-proxy cluster (Envoy
# requires the same configuration wherever a cache name appears).
DNS_CACHE = dns_cache_pb2.DnsCacheConfig(name="lychgate_forward_proxy",
                                         dns_lookup_family=cluster_pb2.Cluster.V4_PREFERRED)


def as_dns_cluster(out: cluster_pb2.Cluster) -> None:
    """Hosts by name: Envoy's DNS cluster extension (as kgateway emits it), not the STRICT_DNS
    type, whose DNS settings on the Cluster are deprecated; BackendConfigPolicy `dns` fills it in."""
    out.ClearField("type")
    out.cluster_type.name = DNS_CLUSTER
    out.cluster_type.typed_config.CopyFrom(pack(dns_cluster_pb2.DnsCluster(
        dns_lookup_family=dns_pb2.DnsLookupFamily.V4_PREFERRED)))  # not the Cluster enum: other numbers


def patch(cluster: ir.Cluster, out: cluster_pb2.Cluster, assignment: endpoint_pb2.ClusterLoadAssignment) -> None:
    """Turn the EDS Cluster built for a Backend's `cluster` (discovery other than
    EDS) into what its discovery asks for; `assignment` is its ClusterLoadAssignment."""
    if cluster.aws_lambda is not None:
        # Envoy's aws_lambda filter acts only on clusters marked as Lambda gateways.
        out.metadata.filter_metadata["com.amazonaws.lambda"].update({"egress_gateway": True})
    if cluster.gcp_audience is not None:  # the token's audience, and no request without one
        gcp_authn.patch_cluster(cluster, out)
    out.ClearField("eds_cluster_config")
    if cluster.discovery == "ai":
        as_dns_cluster(out)
        ai_gateway.patch_cluster(cluster, out)
        return
    if cluster.tunnel is not None:  # through a CONNECT proxy: the way in is an internal listener
        out.type = cluster_pb2.Cluster.STATIC
        out.load_assignment.CopyFrom(tunnel.load_assignment(cluster, cluster.tunnel))
        return
    if cluster.discovery in ("static", "mcp"):
        out.type = cluster_pb2.Cluster.STATIC
        out.load_assignment.CopyFrom(assignment)
        if cluster.discovery == "mcp":  # the relay beside Envoy, told which Backend
            mcp_gateway.patch_cluster(cluster, out)
        return
    if cluster.discovery == "dns":
        as_dns_cluster(out)
        out.load_assignment.CopyFrom(assignment)
        return
    out.ClearField("type")
    out.lb_policy = cluster_pb2.Cluster.CLUSTER_PROVIDED
    out.cluster_type.name = "envoy.clusters.dynamic_forward_proxy"
    out.cluster_type.typed_config.CopyFrom(pack(dfp_cluster_pb2.ClusterConfig(dns_cache_config=DNS_CACHE)))
    if cluster.forward_proxy_tls:
        # TLS to whichever host the request names: SNI and the certificate's name follow it.
        context = tls_pb2.UpstreamTlsContext()
        context.common_tls_context.validation_context.trusted_ca.filename = SYSTEM_CA_BUNDLE
        out.transport_socket.CopyFrom(base_pb2.TransportSocket(name="envoy.transport_sockets.tls",
                                                               typed_config=pack(context)))
        with http_options(out) as options:
            options.upstream_http_protocol_options.auto_sni = True
            options.upstream_http_protocol_options.auto_san_validation = True


def _forwards_by_proxy(vh: ir.VirtualHost) -> bool:
    return any(isinstance(r.action, ir.Forward) and any(
        b.cluster is not None and b.cluster.startswith("backend_") and b.cluster.endswith(FORWARD_PROXY_SUFFIX)
        for b in r.action.backends) for r in vh.routes)


def _uses_forward_proxy(listener: ir.HTTPListener) -> bool:
    return any_host(listener, _forwards_by_proxy)


class ForwardProxy(Feature):
    """The dynamic forward proxy filter: it resolves the request's host for the
    forward-proxy clusters and lets every other route pass untouched."""

    name = "dynamic_forward_proxy"
    order = 90

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if _uses_forward_proxy(listener):
            hcm.http_filters.append(hcm_pb.HttpFilter(
                name=FILTER, typed_config=pack(dfp_filter_pb2.FilterConfig(dns_cache_config=DNS_CACHE))))


register(ForwardProxy())
