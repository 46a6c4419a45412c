"""urlRewrite.pathRegex, autoHostRewrite and internalRedirect → the route's
regex_rewrite, auto_host_rewrite and internal_redirect_policy. The HTTPRoute's
own URLRewrite filter wins where both apply."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as route_pb

from lychgate import ir
from lychgate.xds.translator.features import Feature, register


class PolicyRewrite(Feature):
    name = "policy_rewrite"

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        p = route.policy
        if p is None or not out.HasField("route"):
            return
        action = out.route
        if p.path_regex_rewrite is not None and not action.HasField("regex_rewrite") \
                and not action.prefix_rewrite and not action.HasField("path_rewrite_policy"):
            action.regex_rewrite.pattern.regex, action.regex_rewrite.substitution = p.path_regex_rewrite
        if p.auto_host_rewrite and route.url_rewrite_host is None:
            action.auto_host_rewrite.value = True
        if p.internal_redirect is not None:
            redirect = action.internal_redirect_policy
            redirect.redirect_response_codes.extend(p.internal_redirect.response_codes)
            redirect.allow_cross_scheme_redirect = p.internal_redirect.allow_cross_scheme
            redirect.response_headers_to_copy.extend(p.internal_redirect.headers_to_copy)
            redirect.max_internal_redirects.value = p.internal_redirect.max_redirects


register(PolicyRewrite())
