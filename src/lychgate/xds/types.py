"""xDS type URLs, in the order a make-before-break push sends them."""

from __future__ import annotations

CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
ENDPOINT = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
LISTENER = "type.googleapis.com/envoy.config.listener.v3.Listener"
ROUTE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
SCOPED_ROUTE = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration"
SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"

# Clusters before their endpoints, listeners before their routes: Envoy then
# never sees a reference to something it has not received yet.
PUSH_ORDER: tuple[str, ...] = (CLUSTER, ENDPOINT, LISTENER, SCOPED_ROUTE, ROUTE, SECRET)

# Types Envoy asks for by name; the others are wildcard (all resources).
NAMED = frozenset({ENDPOINT, ROUTE, SECRET})

SHORT = {CLUSTER: "CDS", ENDPOINT: "EDS", LISTENER: "LDS", SCOPED_ROUTE: "SRDS", ROUTE: "RDS", SECRET: "SDS"}
