"""MCP Backends on Envoy: Envoy's MCP filter on their routes, the relay as their upstream.

Routes to an MCP Backend run Envoy's `envoy.filters.http.mcp` filter, which parses each
JSON-RPC request into dynamic metadata (`envoy.filters.http.mcp`: `method`, `id`,
`params.name` for the tool, prompt or resource) before any policy filter reads the
request: RBAC's CEL, access logs and the JSON-RPC error shape below all read it. The
filter stays off on every other route. Such routes have no route timeout (a server's
event stream may stay open for hours; an HTTPRoute timeout still applies).

The Backend's cluster has one endpoint, the relay (lychgate.mcp, beside Envoy), and an
upstream filter that names the Backend in the header the relay reads, overwriting any
a client sent: the relay serves the Backend Envoy routed to, never one a client picks.

A request Envoy answers itself on an MCP route (a policy's 401, 403 or 429) is
answered in JSON-RPC's error shape, with the request's id, so an MCP client can tie
the error to its call; the HTTP status is kept.
"""

from __future__ import annotations

from envoy.config.accesslog.v3 import accesslog_pb2
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.common.mutation_rules.v3 import mutation_rules_pb2
from envoy.config.core.v3 import base_pb2, substitution_format_string_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.header_mutation.v3 import header_mutation_pb2
from envoy.extensions.filters.http.mcp.v3 import mcp_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.type.matcher.v3 import metadata_pb2, value_pb2
from google.protobuf import duration_pb2, struct_pb2

from lychgate import ir
from lychgate.mcp.config import BACKEND_HEADER
from lychgate.xds.translator.cluster_policy import add_upstream_filter, http_options
from lychgate.xds.translator.edge import BODY_BUFFER_BYTES
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.host_flags import any_host
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route

FILTER = "envoy.filters.http.mcp"
METADATA = FILTER  # the namespace the filter writes
# JSON-RPC's "server error" range; the HTTP status says which (401, 403, 429, ...).
POLICY_ERROR_CODE = -32001


def _forwards_to_mcp(route: ir.Route) -> bool:
    return isinstance(route.action, ir.Forward) and route.action.mcp


def _forwards_here(vh: ir.VirtualHost) -> bool:
    return any(_forwards_to_mcp(r) for r in vh.routes)


def _serves_mcp(listener: ir.HTTPListener) -> bool:
    return any_host(listener, _forwards_here)


def patch_cluster(cluster: ir.Cluster, out: cluster_pb2.Cluster) -> None:
    """The Backend's cluster (static: the relay): the Backend named in BACKEND_HEADER."""
    header = base_pb2.HeaderValueOption(
        header=base_pb2.HeaderValue(key=BACKEND_HEADER, value=cluster.mcp_backend),
        append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD)
    mutation = header_mutation_pb2.HeaderMutation(mutations=header_mutation_pb2.Mutations(
        request_mutations=[mutation_rules_pb2.HeaderMutation(append=header)]))
    with http_options(out) as options:
        add_upstream_filter(options, "envoy.filters.http.header_mutation", mutation)


def _filter_config() -> mcp_pb2.Mcp:
    # PASS_THROUGH: a request that is not MCP (the SSE transport's GET, a DELETE) goes on
    # to the relay, which answers it; the body limit is the route's body buffer.
    out = mcp_pb2.Mcp(traffic_mode=mcp_pb2.Mcp.PASS_THROUGH)
    out.max_request_body_size.value = BODY_BUFFER_BYTES
    return out


def _json_rpc_errors() -> hcm_pb.LocalReplyConfig:
    """Envoy's own answers on MCP requests, as JSON-RPC errors carrying the request's id."""
    on_mcp = accesslog_pb2.AccessLogFilter(metadata_filter=accesslog_pb2.MetadataFilter(
        matcher=metadata_pb2.MetadataMatcher(
            filter=METADATA, path=[metadata_pb2.MetadataMatcher.PathSegment(key="is_mcp_request")],
            value=value_pb2.ValueMatcher(bool_match=True))))
    body = struct_pb2.Struct()
    body.update({"jsonrpc": "2.0", "id": f"%DYNAMIC_METADATA({METADATA}:id)%",
                 "error": {"code": POLICY_ERROR_CODE, "message": "%LOCAL_REPLY_BODY%",
                           "data": {"status": "%RESPONSE_CODE%"}}})
    return hcm_pb.LocalReplyConfig(mappers=[hcm_pb.ResponseMapper(
        filter=on_mcp,
        body_format_override=substitution_format_string_pb2.SubstitutionFormatString(
            json_format=body, content_type="application/json"))])


class McpGateway(Feature):
    name = "mcp_gateway"
    # After CORS, ACL and CSRF, before authentication and RBAC: those read what it parsed.
    order = 13

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if _serves_mcp(listener):
            add_disabled_filter(hcm, FILTER, _filter_config())
            hcm.local_reply_config.mappers.extend(_json_rpc_errors().mappers)

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if not _forwards_to_mcp(route) or not out.HasField("route"):
            return
        enable_on_route(out, FILTER, mcp_pb2.McpOverride(traffic_mode=mcp_pb2.Mcp.PASS_THROUGH))
        assert isinstance(route.action, ir.Forward)
        if route.action.timeout_ms is None:
            out.route.timeout.CopyFrom(duration_pb2.Duration())  # 0: event streams stay open


register(McpGateway())
