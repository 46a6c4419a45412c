"""A DirectResponse's `bodyFormat`: the body Envoy formats per request (its
command operators, such as %REQ(:path)%, filled in)."""

from __future__ import annotations

import json

from envoy.config.route.v3 import route_components_pb2 as route_pb
from google.protobuf import struct_pb2

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.route import action_of


class FormattedBody(Feature):
    name = "direct_response_body_format"

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        action = action_of(route)
        if not isinstance(action, ir.DirectResponse) or (action.text_format is None and action.json_format is None):
            return
        fmt = out.direct_response.body_format
        if action.text_format is not None:
            fmt.text_format_source.inline_string = action.text_format
        else:
            body = struct_pb2.Struct()
            body.update(json.loads(action.json_format or "{}"))
            fmt.json_format.CopyFrom(body)
        if action.content_type:
            fmt.content_type = action.content_type


register(FormattedBody())
