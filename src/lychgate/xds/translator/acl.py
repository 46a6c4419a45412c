"""acl → a second Envoy rbac filter (`envoy.filters.http.rbac/acl`), off by default.

Its matcher lists every CIDR of the policy, longest prefix first (translation
sorted them), each allowing or denying; the first match decides and the
default action covers addresses no rule names. It runs before authentication:
a client the ACL refuses never reaches a login or an auth service.
"""

from __future__ import annotations

from envoy.extensions.filters.http.rbac.v3 import rbac_pb2
from xds.type.matcher.v3 import matcher_pb2 as m

from lychgate import ir
from lychgate.xds.translator.features import register
from lychgate.xds.translator.policy_filters import PolicyFilter
from lychgate.xds.translator.rbac import FieldMatcher, action, source_in

FILTER = "envoy.filters.http.rbac/acl"


def matcher(acl: ir.Acl) -> m.Matcher:
    rules = [FieldMatcher(predicate=source_in((cidr,)), on_match=action(f"acl:{name}", allow))
             for cidr, allow, name in acl.rules]
    return m.Matcher(matcher_list=m.Matcher.MatcherList(matchers=rules) if rules else None,
                     on_no_match=action("acl:default", acl.default_allow))


class Acl(PolicyFilter):
    name, filter, field = "acl", FILTER, "acl"
    order = 11  # right after CORS: before csrf and every authentication filter

    def listener_config(self) -> object:
        return rbac_pb2.RBAC()

    def route_config(self, value: ir.Acl) -> object:
        return rbac_pb2.RBACPerRoute(rbac=rbac_pb2.RBAC(matcher=matcher(value)))


register(Acl())
