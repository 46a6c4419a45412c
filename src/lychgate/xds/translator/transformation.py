"""transformation → Envoy's Lua filter: one fixed runtime, per-route data.

The templates were compiled by translation into parts; here they become plain
data in the route's `filter_context` (a Struct), which the runtime in the
listener's Lua filter (lua_runtime.py) reads per request. The Lua filter is in
every listener, off by default; a route with a transformation enables it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.lua.v3 import lua_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from google.protobuf import struct_pb2

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.lua_runtime import RUNTIME
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route
from lychgate.xds.translator.template_uses import uses

FILTER = "envoy.filters.http.lua/transformation"
# What response templates read of the request, stashed by the request half.
_REQUEST_PARTS = {"request_header", "path", "method", "query_param"}


def _templates(m: ir.MessageTransform) -> list[ir.Template]:
    out = [t for _, t in m.set] + [t for _, t in m.add] + [t for _, _, t in m.dynamic_metadata]
    return out + ([m.body] if m.body is not None else [])


def _data(node: Any) -> Any:
    """Tuples as lists, for a protobuf Struct."""
    return [_data(x) for x in node] if isinstance(node, tuple) else node


def _message(m: ir.MessageTransform | None) -> list[Any] | bool:
    """[set, add, remove, body or false, parseAs, read the body?, reads JSON fields?, metadata]
    (positional: see lua_runtime)."""
    if m is None:
        return False
    found = [uses(t) for t in _templates(m)]
    functions = set().union(*(u.functions for u in found))
    free = any(u.free for u in found)
    # A response that will be refused (fields read, body not parsed as JSON) is
    # buffered too, so its body can be replaced by the reason.
    read_body = m.parse_as != "None" and (
        m.body is not None or m.parse_as == "AsJson" or bool(functions & {"body", "context"}) or free)
    return [
        [[name, _data(t)] for name, t in m.set],
        [[name, _data(t)] for name, t in m.add],
        list(m.remove),
        _data(m.body) if m.body is not None else False,
        m.parse_as,
        read_body,
        free,
        [[ns, key, _data(t)] for ns, key, t in m.dynamic_metadata],
    ]


def context(t: ir.Transformation) -> list[Any]:
    """[request, response, stash]: what the runtime reads with handle:filterContext().

    Lists, not maps: protobuf Struct maps have no stable order, and the same
    transformation must always produce the same bytes (and golden files).
    `stash` names the request headers the response templates read ("*" for
    all, when a name is computed; false when they read nothing of the request).
    """
    stash: list[str] | bool = False
    if t.response is not None:
        found = [uses(tpl) for tpl in _templates(t.response)]
        if any(u.functions & _REQUEST_PARTS for u in found):
            names = set().union(*(u.request_headers for u in found))
            stash = ["*"] if any(u.any_request_header for u in found) else sorted(names)
    return [_message(t.request), _message(t.response), stash]


@lru_cache(maxsize=4096)
def per_route(t: ir.Transformation) -> lua_pb2.LuaPerRoute:
    """The per-route config of a transformation (cached: equal policies, one message)."""
    data = struct_pb2.Struct()
    data.update({"transformation": context(t)})
    return lua_pb2.LuaPerRoute(filter_context=data)


class Transformation(Feature):
    name = "transformation"
    order = 60

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if not listener.policy_filters:
            return
        add_disabled_filter(hcm, FILTER, lua_pb2.Lua(default_source_code=base_pb2.DataSource(inline_string=RUNTIME)))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if route.policy is not None and route.policy.transformation is not None:
            enable_on_route(out, FILTER, per_route(route.policy.transformation))


register(Transformation())
