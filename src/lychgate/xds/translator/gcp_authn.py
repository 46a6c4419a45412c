"""GCP Backends on Envoy: an identity token from the GCE metadata server on every
request routed to one, and no request without it.

Envoy's gcp_authn filter asks the metadata server (its own cluster, the controller
setting `gcp_metadata_server`) for a token for the audience in the chosen cluster's
metadata, `GET /computeMetadata/v1/instance/service-accounts/default/identity?audience=...`
with `Metadata-Flavor: Google`, and sets it as a header. Measured on Envoy 1.40: when
the fetch fails (server down, an error status, an answer that is not a JWT) the filter
lets the request through without a token, with the client's own `Authorization` if it
sent one. lychgate fails closed instead, in three parts:

- in the listeners whose routes reach a GCP Backend (only those), off by default and
  on in those routes: a header_mutation filter that drops any `TOKEN_HEADER` the
  client sent, then gcp_authn, which writes the token ("Bearer ...") to `TOKEN_HEADER`;
- in the GCP Backend's cluster, an upstream Lua filter that copies `TOKEN_HEADER` to
  `Authorization` (replacing the client's) or, when there is none, answers 503 before
  any connection to the service: a request only ever reaches it with the proxy's token.
  `TOKEN_HEADER` stays on the request (the service sees its own token twice): what an
  upstream filter changes, the router's retries inherit (measured), so a filter that
  removed it would find no token on the second attempt.

The token is this service's alone: the route's RequestMirror copies (made from the
request as the filters left it) drop `TOKEN_HEADER`, and a GCP Backend cannot be a
mirror's target (translate/routes.py), nor a backend Envoy calls on its own account
(a JWKS or token endpoint, an extension: translate/policies/extension_backend.py),
since only routed requests get a token.

The check sits in the cluster, not the route, so a rule that splits traffic between a
GCP Backend and another backend leaves the other's requests (and their Authorization)
alone. Routes to a GCP Backend also get auto_host_rewrite (the service's host as Host,
which Cloud Run routes by), unless the route rewrites Host already, as kgateway does.
Tokens are fetched per request, as kgateway configures the filter: Envoy's token cache
keeps a token up to a minute past its expiry (its JWT clock skew), which the service
would refuse.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.common.mutation_rules.v3 import mutation_rules_pb2
from envoy.config.core.v3 import address_pb2, base_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.gcp_authn.v3 import gcp_authn_pb2
from envoy.extensions.filters.http.header_mutation.v3 import header_mutation_pb2
from envoy.extensions.filters.http.lua.v3 import lua_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from google.protobuf import duration_pb2

from lychgate import ir
from lychgate.settings import split_host_port
from lychgate.xds import types
from lychgate.xds.translator.cluster_policy import add_upstream_filter, http_options
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.host_flags import any_host
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route, pack

FILTER = "envoy.filters.http.gcp_authn"
STRIP_FILTER = "envoy.filters.http.header_mutation/gcp_authn"
CHECK_FILTER = "envoy.filters.http.lua/gcp_authn"
METADATA_CLUSTER = "lychgate_gcp_metadata"
# Where gcp_authn puts the token, for the cluster's check; never what the client sent (STRIP_FILTER).
TOKEN_HEADER = "x-lychgate-gcp-token"
TOKEN_TIMEOUT_S = 10  # kgateway's: how long a request waits for its token
METADATA_CONNECT_TIMEOUT_S = 5
NO_TOKEN_BODY = "no identity token for this GCP backend: the metadata server gave none\n"

CHECK = f"""\
function envoy_on_request(handle)
  local headers = handle:headers()
  local token = headers:get("{TOKEN_HEADER}")
  if token == nil or token == "" then
    handle:respond({{[":status"] = "503", ["content-type"] = "text/plain"}}, "{NO_TOKEN_BODY.strip()}\\n")
    return
  end
  headers:replace("authorization", token)
end
"""


def _forwards_to_gcp(route: ir.Route) -> bool:
    return isinstance(route.action, ir.Forward) and route.action.gcp


def _forwards_here(vh: ir.VirtualHost) -> bool:
    return any(_forwards_to_gcp(r) for r in vh.routes)


def filter_config() -> gcp_authn_pb2.GcpAuthnFilterConfig:
    return gcp_authn_pb2.GcpAuthnFilterConfig(
        cluster=METADATA_CLUSTER, timeout=duration_pb2.Duration(seconds=TOKEN_TIMEOUT_S),
        token_header=gcp_authn_pb2.TokenHeader(name=TOKEN_HEADER, value_prefix="Bearer "))


def patch_cluster(cluster: ir.Cluster, out: cluster_pb2.Cluster) -> None:
    """A GCP Backend's cluster: the token's audience for gcp_authn, and the check."""
    assert cluster.gcp_audience is not None
    out.metadata.typed_filter_metadata[FILTER].CopyFrom(pack(gcp_authn_pb2.Audience(url=cluster.gcp_audience)))
    with http_options(out) as options:
        add_upstream_filter(options, CHECK_FILTER, lua_pb2.Lua(default_source_code=base_pb2.DataSource(
            inline_string=CHECK)))


def metadata_cluster(server: str) -> cluster_pb2.Cluster:
    """The metadata server, plain HTTP: resolved by DNS unless it is an address."""
    host, port = split_host_port(server)
    out = cluster_pb2.Cluster(name=METADATA_CLUSTER,
                              connect_timeout=duration_pb2.Duration(seconds=METADATA_CONNECT_TIMEOUT_S))
    try:
        ipaddress.ip_address(host)
        out.type = cluster_pb2.Cluster.STATIC
    except ValueError:
        # Imported here: backend_cluster imports this module.
        from lychgate.xds.translator.backend_cluster import as_dns_cluster

        as_dns_cluster(out)
    out.load_assignment.CopyFrom(endpoint_pb2.ClusterLoadAssignment(
        cluster_name=METADATA_CLUSTER, endpoints=[endpoint_components_pb2.LocalityLbEndpoints(lb_endpoints=[
            endpoint_components_pb2.LbEndpoint(endpoint=endpoint_components_pb2.Endpoint(
                address=address_pb2.Address(socket_address=address_pb2.SocketAddress(
                    address=host, port_value=port))))])]))
    return out


class GcpAuthn(Feature):
    name = "gcp_authn"
    order = 93  # kgateway's "before the Route stage"; after the policies, before aws_lambda

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if any_host(listener, _forwards_here):
            add_disabled_filter(hcm, STRIP_FILTER, header_mutation_pb2.HeaderMutation())
            add_disabled_filter(hcm, FILTER, filter_config())

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if not _forwards_to_gcp(route) or not out.HasField("route"):
            return
        enable_on_route(out, STRIP_FILTER, header_mutation_pb2.HeaderMutationPerRoute(
            mutations=header_mutation_pb2.Mutations(request_mutations=[
                mutation_rules_pb2.HeaderMutation(remove=TOKEN_HEADER)])))
        enable_on_route(out, FILTER, None)
        for mirror in out.route.request_mirror_policies:
            # The router copies the request as the filters left it, TOKEN_HEADER included:
            # a mirror (another service) would get the token for this one (measured).
            mirror.request_headers_mutations.append(mutation_rules_pb2.HeaderMutation(remove=TOKEN_HEADER))
        if out.route.WhichOneof("host_rewrite_specifier") is None:
            out.route.auto_host_rewrite.value = True

    def resources(self, gateway: ir.GatewayIR) -> Iterable[tuple[str, str, Any]]:
        if gateway.gcp_metadata_server:
            yield types.CLUSTER, METADATA_CLUSTER, metadata_cluster(gateway.gcp_metadata_server)


register(GcpAuthn())
