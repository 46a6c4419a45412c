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

FILTER = "envoy.filters.http.lua/transformation"
_REQUEST_PARTS = {"request_header", "path", "method", "query"}


def _templates(m: ir.MessageTransform) -> list[ir.Template]:
    out = [t for _, t in m.set] + [t for _, t in m.add]
    return out + ([m.body] if m.body is not None else [])


def _message(m: ir.MessageTransform | None) -> list[Any] | bool:
    """[set, add, remove, body or false, parse JSON?, read the body?] (positional: see lua_runtime)."""
    if m is None:
        return False
    templates = _templates(m)
    read_body = m.body is not None or m.parse_json or any(
        k.removeprefix("json:") in ("body", "field") for t in templates for k, _ in t)
    return [
        [[name, [list(p) for p in t]] for name, t in m.set],
        [[name, [list(p) for p in t]] for name, t in m.add],
        list(m.remove),
        [list(p) for p in m.body] if m.body is not None else False,
        m.parse_json,
        read_body,
    ]


def context(t: ir.Transformation) -> list[Any]:
    """[request, response, stash]: what the runtime reads with handle:filterContext().

    Lists, not maps: protobuf Struct maps have no stable order, and the same
    transformation must always produce the same bytes (and golden files).
    `stash` names the request headers the response templates read (false when
    they read nothing of the request).
    """
    stash: list[str] | bool = False
    if t.response is not None:
        used = [(k.removeprefix("json:"), a) for tpl in _templates(t.response) for k, a in tpl]
        used = [(k, a) for k, a in used if k in _REQUEST_PARTS]
        if used:
            stash = sorted({a for k, a in used if k == "request_header"})
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
