"""acl → a second Envoy rbac filter (`envoy.filters.http.rbac/acl`), off by default.

Its matcher lists every CIDR of the policy, longest prefix first (translation
sorted them), each allowing or denying; the first match decides and the
default action covers addresses no rule names. It runs before authentication:
a client the ACL refuses never reaches a login or an auth service.
"""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from xds.type.matcher.v3 import matcher_pb2 as m

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route
from lychgate.xds.translator.rbac import FieldMatcher, action, source_in

FILTER = "envoy.filters.http.rbac/acl"


def matcher(acl: ir.Acl) -> m.Matcher:
    rules = [FieldMatcher(predicate=source_in((cidr,)), on_match=action(f"acl:{name}", allow))
             for cidr, allow, name in acl.rules]
    return m.Matcher(matcher_list=m.Matcher.MatcherList(matchers=rules) if rules else None,
                     on_no_match=action("acl:default", acl.default_allow))


class Acl(Feature):
    name = "acl"
    order = 11  # right after CORS: before csrf and every authentication filter

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if listener.policy_filters:
            add_disabled_filter(hcm, FILTER, rbac_pb2.RBAC())

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        acl = route.policy.acl if route.policy is not None else None
        if acl is not None:
            enable_on_route(out, FILTER, rbac_pb2.RBACPerRoute(rbac=rbac_pb2.RBAC(matcher=matcher(acl))))


register(Acl())
