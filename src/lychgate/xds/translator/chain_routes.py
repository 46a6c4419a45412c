"""A listener's route table is named after its filter chain.

A listener carries the policy filters only once one of its routes has a policy
(translate PolicyIndex.filters_for). Gaining or losing them changes the
listener, and Envoy keeps the connections it opened on the old filter chain
while they drain; those connections still look their routes up. Were the route
table shared by the two chains, a request on an old connection would find a
route that turns on an auth filter its chain does not have, and would reach the
backend unauthenticated.

So each chain names its own table: `http-8080` without the policy filters,
`http-8080/policies` with them. The name of the chain a listener no longer has
holds a table that answers every request 503 and asks the client to send it
again: a connection opened before the change never reaches a backend with a
policy missing, and Envoy (`--drain-strategy immediate`, deploy/bootstrap.py)
closes it at that answer, so the retry opens a connection on the new chain.
Envoy asks for a table only while a chain names it: once the old connections
are gone the other table is never sent.

A table split into scopes (scoped.py) needs no stand-in: its scope keys start
with the table's name, so an old chain's keys match no scope after the switch
and Envoy answers 404 without a route.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.config.route.v3 import route_pb2

from lychgate import ir
from lychgate.xds.translator.wire import RawMessage

POLICY_CHAIN = "/policies"

RETRY_BODY = ("this connection was opened before the gateway's filters changed; "
              "send the request again on a new connection\n")


def routes_name(listener: ir.HTTPListener) -> str:
    """The name of the route table the listener's chain looks routes up in."""
    return listener.name + POLICY_CHAIN if listener.policy_filters else listener.name


def other_routes_name(listener: ir.HTTPListener) -> str:
    """The name the listener's other chain (with or without policy filters) uses."""
    return listener.name if listener.policy_filters else listener.name + POLICY_CHAIN


@lru_cache(maxsize=1024)
def stand_in(name: str) -> RawMessage:
    """The table of a chain the listener no longer has: 503 and close, for any request."""
    route = route_pb.Route(
        name="lychgate/filter-chain-changed",
        match=route_pb.RouteMatch(prefix="/"),
        direct_response=route_pb.DirectResponseAction(
            status=503, body=base_pb2.DataSource(inline_string=RETRY_BODY)),
    )
    route.response_headers_to_add.add(header=base_pb2.HeaderValue(key="retry-after", value="0"))
    table = route_pb2.RouteConfiguration(
        name=name, virtual_hosts=[route_pb.VirtualHost(name="filter-chain-changed", domains=["*"], routes=[route])])
    data = table.SerializeToString(deterministic=True)
    return RawMessage(route_pb2.RouteConfiguration, data, hashlib.blake2b(data, digest_size=8).hexdigest())
