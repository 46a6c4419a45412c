"""InferencePool backends → an ext_proc filter per endpoint picker, and clusters that obey it.

The Gateway API Inference Extension's endpoint picker protocol (its proposal
004), as the proxy's side of it:

- Request: the proxy streams each request (headers, body, trailers: Envoy's
  FULL_DUPLEX_STREAMED mode, which the reference picker needs; BUFFERED would
  deadlock it, as it answers the headers only once it has read the body) to the
  pool's endpoint picker (EPP) over ext_proc. The EPP names the endpoint(s),
  "ip:port" or a comma-separated fallback list, in the request header
  `x-gateway-destination-endpoint` and/or the same key of the `envoy.lb`
  dynamic metadata. Envoy drops an ext_proc server's dynamic metadata unless
  `metadata_options.receiving_namespaces` lets the namespace in: it does here.
- The pool's cluster uses Envoy's override_host load balancing policy: the
  first endpoint of the list serves, a retry of the rule goes down the list;
  without a pick (the picker failed open) round robin over the pool's ready
  endpoints.
- Response: the proxy reports the endpoint that served the request to the EPP
  in the `envoy.lb` metadata, key `x-gateway-destination-endpoint-served`, of
  the response messages (ext_proc `metadata_context`). The route writes the
  upstream host into a response header (`%UPSTREAM_HOST%`, the host of the
  attempt that answered), a header_to_metadata filter placed after the pickers
  (so before them on the response path) moves it into that metadata and removes
  the header, and the picker filter forwards the `envoy.lb` namespace.

Every picker a listener's routes use gets one ext_proc filter, off by default
and enabled on the routes of its pool (as policy filters are, policy_filters.py).
A rule splitting traffic over several pools enables all their filters and, on
each weighted backend, switches off the pickers of the other pools: only the
chosen pool's picker is asked. The route cache is kept (RETAIN) so a picker's
header mutation never makes Envoy re-pick the weighted backend.
"""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2, extension_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2 as proc_pb
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2 as mode_pb
from envoy.extensions.filters.http.header_to_metadata.v3 import header_to_metadata_pb2 as h2m_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.extensions.load_balancing_policies.override_host.v3 import override_host_pb2
from envoy.extensions.load_balancing_policies.round_robin.v3 import round_robin_pb2
from envoy.type.metadata.v3 import metadata_pb2
from envoy.type.v3 import http_status_pb2

from lychgate import ir
from lychgate.xds.translator.ext_authz import grpc_service
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import (
    add_disabled_filter,
    enable_on_route,
    pack,
    stat_name,
)

PREFIX = "envoy.filters.http.ext_proc/inferencepool/"
SERVED_FILTER = "envoy.filters.http.header_to_metadata/inferencepool-served"
DESTINATION_HEADER = "x-gateway-destination-endpoint"
SERVED_KEY = "x-gateway-destination-endpoint-served"
DESTINATION_METADATA = "envoy.lb"
_MODE = mode_pb.ProcessingMode


def filter_name(picker: ir.EndpointPicker) -> str:
    return PREFIX + picker.pool


def picker_filter(picker: ir.EndpointPicker) -> proc_pb.ExternalProcessor:
    lb_namespace = proc_pb.MetadataOptions.MetadataNamespaces(untyped=[DESTINATION_METADATA])
    return proc_pb.ExternalProcessor(
        grpc_service=grpc_service(picker.cluster, None, None),
        failure_mode_allow=picker.fail_open,
        # FailClose: "the picker is unavailable" is a 503, not ext_proc's default 500.
        status_on_error=http_status_pb2.HttpStatus(code=503),
        processing_mode=_MODE(
            request_header_mode=_MODE.SEND,
            request_body_mode=_MODE.FULL_DUPLEX_STREAMED,
            request_trailer_mode=_MODE.SEND,
            response_header_mode=_MODE.SEND,
            response_body_mode=_MODE.FULL_DUPLEX_STREAMED,
            response_trailer_mode=_MODE.SEND,
        ),
        metadata_options=proc_pb.MetadataOptions(
            receiving_namespaces=lb_namespace,  # the pick, as dynamic metadata
            forwarding_namespaces=lb_namespace,  # the served endpoint, on the response
        ),
        route_cache_action=proc_pb.ExternalProcessor.RETAIN,
        stat_prefix="inferencepool_" + stat_name(picker.pool),
    )


def served_filter() -> h2m_pb.Config:
    """The served-endpoint response header (written by the route) → `envoy.lb` metadata."""
    rule = h2m_pb.Config.Rule(
        header=SERVED_KEY, remove=True,
        on_header_present=h2m_pb.Config.KeyValuePair(metadata_namespace=DESTINATION_METADATA, key=SERVED_KEY,
                                                      type=h2m_pb.Config.STRING))
    return h2m_pb.Config(response_rules=[rule])


def override_host_policy() -> cluster_pb2.LoadBalancingPolicy:
    """Send a request to the endpoint the picker named; round robin when it named none."""
    fallback = cluster_pb2.LoadBalancingPolicy(policies=[cluster_pb2.LoadBalancingPolicy.Policy(
        typed_extension_config=extension_pb2.TypedExtensionConfig(
            name="envoy.load_balancing_policies.round_robin", typed_config=pack(round_robin_pb2.RoundRobin())))])
    source = override_host_pb2.OverrideHost.OverrideHostSource
    config = override_host_pb2.OverrideHost(
        # The metadata first: only the picker writes it, while a client may send the header
        # (a picker answering in the header alone overwrites the client's).
        override_host_sources=[
            source(metadata=metadata_pb2.MetadataKey(
                key=DESTINATION_METADATA, path=[metadata_pb2.MetadataKey.PathSegment(key=DESTINATION_HEADER)])),
            source(header=DESTINATION_HEADER),
        ],
        fallback_policy=fallback,
    )
    return cluster_pb2.LoadBalancingPolicy(policies=[cluster_pb2.LoadBalancingPolicy.Policy(
        typed_extension_config=extension_pb2.TypedExtensionConfig(
            name="envoy.load_balancing_policies.override_host", typed_config=pack(config)))])


def _enabled() -> proc_pb.ExtProcPerRoute:
    # ext_proc wants a per-route config to turn on: empty overrides keep the filter's own.
    return proc_pb.ExtProcPerRoute(overrides=proc_pb.ExtProcOverrides())


class InferencePools(Feature):
    name = "inference_pools"
    order = 60  # after the policies' ext_proc: a policy may rewrite what the picker reads

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        for picker in listener.pickers:
            add_disabled_filter(hcm, filter_name(picker), picker_filter(picker))
        if listener.pickers:  # after the pickers: it runs before them on the response path
            add_disabled_filter(hcm, SERVED_FILTER, served_filter())

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if not isinstance(route.action, ir.Forward):
            return
        pickers = route.action.pickers
        if not pickers:
            return
        for picker in pickers:
            enable_on_route(out, filter_name(picker), _enabled())
        enable_on_route(out, SERVED_FILTER, served_filter())
        out.response_headers_to_add.append(base_pb2.HeaderValueOption(
            header=base_pb2.HeaderValue(key=SERVED_KEY, value="%UPSTREAM_HOST%"),
            append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD))
        # Several backends: each asks its own pool's picker only (a Service backend, none).
        by_cluster = {b.cluster: b.picker for b in route.action.backends}
        for weight in out.route.weighted_clusters.clusters:
            own = by_cluster.get(weight.name)
            for picker in pickers:
                if picker != own:
                    weight.typed_per_filter_config[filter_name(picker)].CopyFrom(
                        pack(proc_pb.ExtProcPerRoute(disabled=True)))


register(InferencePools())
