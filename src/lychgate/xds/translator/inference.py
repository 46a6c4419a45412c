"""InferencePool backends → an ext_proc filter per endpoint picker, and clusters that obey it.

The Gateway API Inference Extension's endpoint picker protocol: the proxy sends
each request to the pool's endpoint picker (EPP) over Envoy ext_proc; the EPP
answers with the chosen endpoint ("ip:port") in the request header
`x-gateway-destination-endpoint` (and/or the same key in the `envoy.lb`
dynamic metadata). The pool's cluster uses Envoy's override_host load
balancing policy, which sends the request to that endpoint; without a pick
(the picker failed open) it falls back to round robin over the pool's ready
endpoints.

Every picker a listener's routes use gets one ext_proc filter, off by default
and enabled on the routes of its pool (as policy filters are, policy_filters.py).
The picker reads the request headers and the (buffered) body, where an
OpenAI-style request names its model.
"""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import extension_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2 as proc_pb
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2 as mode_pb
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
DESTINATION_HEADER = "x-gateway-destination-endpoint"
DESTINATION_METADATA = "envoy.lb"
PICKER_TIMEOUT_MS = 10_000  # the picker may queue a request until a model server has room
_MODE = mode_pb.ProcessingMode


def filter_name(picker: ir.EndpointPicker) -> str:
    return PREFIX + picker.pool


def picker_filter(picker: ir.EndpointPicker) -> proc_pb.ExternalProcessor:
    return proc_pb.ExternalProcessor(
        grpc_service=grpc_service(picker.cluster, None, None),
        failure_mode_allow=picker.fail_open,
        # FailClose: "the picker is unavailable" is a 503, not ext_proc's default 500.
        status_on_error=http_status_pb2.HttpStatus(code=503),
        processing_mode=_MODE(
            request_header_mode=_MODE.SEND,
            request_body_mode=_MODE.BUFFERED,
            response_header_mode=_MODE.SKIP,
        ),
        message_timeout={"seconds": PICKER_TIMEOUT_MS // 1000},
        stat_prefix="inferencepool_" + stat_name(picker.pool),
    )


def override_host_policy() -> cluster_pb2.LoadBalancingPolicy:
    """Send a request to the endpoint the picker named; round robin when it named none."""
    fallback = cluster_pb2.LoadBalancingPolicy(policies=[cluster_pb2.LoadBalancingPolicy.Policy(
        typed_extension_config=extension_pb2.TypedExtensionConfig(
            name="envoy.load_balancing_policies.round_robin", typed_config=pack(round_robin_pb2.RoundRobin())))])
    source = override_host_pb2.OverrideHost.OverrideHostSource
    config = override_host_pb2.OverrideHost(
        override_host_sources=[
            source(header=DESTINATION_HEADER),
            source(metadata=metadata_pb2.MetadataKey(
                key=DESTINATION_METADATA, path=[metadata_pb2.MetadataKey.PathSegment(key=DESTINATION_HEADER)])),
        ],
        fallback_policy=fallback,
    )
    return cluster_pb2.LoadBalancingPolicy(policies=[cluster_pb2.LoadBalancingPolicy.Policy(
        typed_extension_config=extension_pb2.TypedExtensionConfig(
            name="envoy.load_balancing_policies.override_host", typed_config=pack(config)))])


class InferencePools(Feature):
    name = "inference_pools"
    order = 60  # after the policies' ext_proc: a policy may rewrite what the picker reads

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        for picker in listener.pickers:
            add_disabled_filter(hcm, filter_name(picker), picker_filter(picker))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if isinstance(route.action, ir.Forward) and route.action.picker is not None:
            # ext_proc wants a per-route config to turn on: empty overrides keep the filter's own.
            enable_on_route(out, filter_name(route.action.picker), proc_pb.ExtProcPerRoute(
                overrides=proc_pb.ExtProcOverrides()))


register(InferencePools())
