"""requestMirror → the Host settings of the route's request mirror policies.

The mirror policies come from the route's RequestMirror filters (route.py);
a TrafficPolicy's requestMirror changes how their copies carry the Host.
"""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as route_pb

from lychgate import ir
from lychgate.xds.translator.features import Feature, register


class RequestMirror(Feature):
    name = "request_mirror"
    order = 70

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        mirror = route.policy.request_mirror if route.policy is not None else None
        if mirror is None or not out.HasField("route"):
            return
        for policy in out.route.request_mirror_policies:
            if mirror.keep_host is not None:
                policy.disable_shadow_host_suffix_append = mirror.keep_host
            if mirror.host is not None:
                policy.host_rewrite_literal = mirror.host


register(RequestMirror())
