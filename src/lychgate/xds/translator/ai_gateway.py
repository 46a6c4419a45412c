"""AI Backends on Envoy: a cluster whose endpoints are the providers, and the routes to it.

The cluster: one endpoint per provider, its priority group as the endpoint's priority,
named by its host (routes rewrite Host to it, and TLS names it: auto SNI and SAN
check against the system's CAs), and marked with the provider's id in metadata. Its
upstream filter chain calls the AI extension (lychgate.ai) over ext_proc once per
attempt, after Envoy picked the provider: the extension reads the id (attribute
`xds.upstream_host_metadata`) and rewrites the request for that provider, and the
answer back to OpenAI's shape. The extension runs beside Envoy (a local process, or a
container of the proxy's pod) on 127.0.0.1:`ai_extension_port`.

The routes: Host rewritten to the provider's, retried on 5xx, 429, reset or no
connection onto the next priority group (previous_priorities), no route timeout
(generations stream for minutes; an HTTPRoute timeout still applies), and the route's
AI settings id (TrafficPolicy `ai`) in route metadata for the extension.
"""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, base_pb2, grpc_service_pb2, protocol_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2, processing_mode_pb2
from envoy.extensions.retry.priority.previous_priorities.v3 import previous_priorities_config_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as hpo
from google.protobuf import duration_pb2, struct_pb2

from lychgate import ir
from lychgate.xds.translator.cluster_policy import (
    HTTP_OPTIONS,
    SYSTEM_CA_BUNDLE,
    add_upstream_filter,
    http_options,
)
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import pack

METADATA = "lychgate.ai"  # lychgate.ai.extension reads the same namespace
EXTENSION_CLUSTER = "lychgate_ai_extension"
_TLS_MATCH = "tls"
# How long Envoy waits for each answer of the extension. Guards that call a webhook
# or a moderation service answer within this; past it the attempt fails (closed).
MESSAGE_TIMEOUT_S = 5


def extension_cluster(port: int) -> cluster_pb2.Cluster:
    """The AI extension, beside Envoy: gRPC (HTTP/2) on the loopback."""
    out = cluster_pb2.Cluster(name=EXTENSION_CLUSTER, type=cluster_pb2.Cluster.STATIC,
                              connect_timeout=duration_pb2.Duration(seconds=1))
    out.typed_extension_protocol_options[HTTP_OPTIONS].CopyFrom(pack(hpo.HttpProtocolOptions(
        explicit_http_config=hpo.HttpProtocolOptions.ExplicitHttpConfig(
            http2_protocol_options=protocol_pb2.Http2ProtocolOptions()))))
    out.load_assignment.CopyFrom(endpoint_pb2.ClusterLoadAssignment(
        cluster_name=EXTENSION_CLUSTER, endpoints=[endpoint_components_pb2.LocalityLbEndpoints(lb_endpoints=[
            endpoint_components_pb2.LbEndpoint(endpoint=endpoint_components_pb2.Endpoint(
                address=_address("127.0.0.1", port)))])]))
    return out


def patch_cluster(cluster: ir.Cluster, out: cluster_pb2.Cluster) -> None:
    """An AI Backend's cluster (already made a DNS cluster: backend_cluster.py): its providers
    by priority, TLS where they speak it, and the extension in the upstream filter chain."""
    by_priority: dict[int, list[ir.AIEndpoint]] = {}
    for e in cluster.ai_endpoints:
        by_priority.setdefault(e.priority, []).append(e)
    out.load_assignment.CopyFrom(endpoint_pb2.ClusterLoadAssignment(cluster_name=cluster.name, endpoints=[
        endpoint_components_pb2.LocalityLbEndpoints(priority=priority, lb_endpoints=[_endpoint(e) for e in group])
        for priority, group in sorted(by_priority.items())]))
    if any(e.tls for e in cluster.ai_endpoints):
        # TLS for the providers that speak it (all real ones); a plain one (a host/port
        # override to a local model server) is matched out by its metadata.
        context = tls_pb2.UpstreamTlsContext()
        context.common_tls_context.validation_context.trusted_ca.filename = SYSTEM_CA_BUNDLE
        out.transport_socket_matches.append(cluster_pb2.Cluster.TransportSocketMatch(
            name="provider-tls", match=struct_pb2.Struct(fields={_TLS_MATCH: struct_pb2.Value(bool_value=True)}),
            transport_socket=base_pb2.TransportSocket(name="envoy.transport_sockets.tls", typed_config=pack(context))))
    with http_options(out) as options:
        # SNI and the certificate's name follow the Host the route rewrote to the provider's.
        options.upstream_http_protocol_options.auto_sni = True
        options.upstream_http_protocol_options.auto_san_validation = True
        add_upstream_filter(options, "envoy.filters.http.ext_proc", _ext_proc())


def _ext_proc() -> ext_proc_pb2.ExternalProcessor:
    mode = processing_mode_pb2.ProcessingMode
    return ext_proc_pb2.ExternalProcessor(
        grpc_service=grpc_service_pb2.GrpcService(
            envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=EXTENSION_CLUSTER)),
        failure_mode_allow=False,  # no extension, no provider call: the credentials are its
        message_timeout=duration_pb2.Duration(seconds=MESSAGE_TIMEOUT_S),
        # the provider Envoy picked, the route's settings, the Gateway (for token metrics;
        # not `xds.node`: this Envoy crashes reading it in an upstream filter), the client's
        # address (token rate limits' RemoteAddress: the downstream's, XFF trust applied)
        request_attributes=["xds.upstream_host_metadata", "xds.route_metadata", "xds.listener_metadata",
                            "source.address"],
        # A whole (not streamed) answer is asked for BUFFERED: its status can still change.
        allow_mode_override=True,
        # The answer's tokens, which the extension sets once the provider counted them: for
        # access logs (%DYNAMIC_METADATA(lychgate.ai:total_tokens)%). Envoy drops metadata of
        # a namespace not listed here.
        metadata_options=ext_proc_pb2.MetadataOptions(
            receiving_namespaces=ext_proc_pb2.MetadataOptions.MetadataNamespaces(untyped=[METADATA])),
        processing_mode=processing_mode_pb2.ProcessingMode(
            request_header_mode=mode.SEND, request_body_mode=mode.BUFFERED,
            response_header_mode=mode.SEND, response_body_mode=mode.STREAMED,
            request_trailer_mode=mode.SKIP, response_trailer_mode=mode.SKIP))


def _endpoint(e: ir.AIEndpoint) -> endpoint_components_pb2.LbEndpoint:
    metadata = base_pb2.Metadata()
    metadata.filter_metadata[METADATA].update({"id": e.id})
    if e.tls:
        metadata.filter_metadata["envoy.transport_socket_match"].update({_TLS_MATCH: True})
    # The Host routes rewrite to (auto_host_rewrite): with the port when it is not the
    # scheme's, as HTTP writes it (and as Bedrock's SigV4 signature covers it).
    hostname = e.host if e.port == (443 if e.tls else 80) else f"{e.host}:{e.port}"
    return endpoint_components_pb2.LbEndpoint(
        endpoint=endpoint_components_pb2.Endpoint(address=_address(e.host, e.port), hostname=hostname),
        metadata=metadata)


def _address(host: str, port: int) -> address_pb2.Address:
    return address_pb2.Address(socket_address=address_pb2.SocketAddress(address=host, port_value=port))


class AIGateway(Feature):
    name = "ai_gateway"

    def patch_listener(self, gateway: ir.GatewayIR, port: int, listener: listener_pb2.Listener) -> None:
        if gateway.ai_extension_port:  # the extension counts tokens by Gateway
            listener.metadata.filter_metadata[METADATA].update({"gateway": gateway.ref})

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        action = route.action
        if not isinstance(action, ir.Forward) or action.ai is None or not out.HasField("route"):
            return
        forward = out.route
        forward.auto_host_rewrite.value = True
        if action.timeout_ms is None:
            forward.timeout.CopyFrom(duration_pb2.Duration())  # 0: a generation may stream for minutes
        if not forward.HasField("retry_policy") and action.ai.groups > 1:
            retry = forward.retry_policy
            retry.retry_on = "5xx,retriable-status-codes,reset,connect-failure"
            retry.retriable_status_codes.append(429)
            retry.num_retries.value = action.ai.groups - 1
            retry.retry_priority.name = "envoy.retry_priorities.previous_priorities"
            retry.retry_priority.typed_config.CopyFrom(pack(
                previous_priorities_config_pb2.PreviousPrioritiesConfig(update_frequency=1)))
        meta: dict[str, str] = {"httproute": f"{route.source.namespace}/{route.source.name}"}
        if route.policy is not None and route.policy.ai is not None:
            meta["route"] = route.policy.ai
        out.metadata.filter_metadata[METADATA].update(meta)


register(AIGateway())
