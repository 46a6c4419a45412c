"""acl → Envoy's rbac filter deciding in shadow mode, then a small Lua filter answering.

The rbac filter (`envoy.filters.http.rbac/acl`) matches every CIDR of the
policy, longest prefix first (translation sorted them), each allowing or
denying; the first match decides and the default action covers addresses no
rule names. It runs its matcher as *shadow* rules: it does not answer itself
but records the decision and the deciding action's name ("acl:<rule>") in
dynamic metadata. The Lua filter right after it (`envoy.filters.http.lua/acl`)
turns a deny into the policy's response: its status, its extra headers, the
blocked-by header, and `dev.kgateway.http.acl: blocked-by` in dynamic metadata
(the rule's name, `rule` if unnamed, `default`), where access logs read it as
`%DYNAMIC_METADATA(dev.kgateway.http.acl:blocked-by)%`, as on kgateway.

Both are in every listener, off by default, and run before authentication: a
client the ACL refuses never reaches a login or an auth service.
"""

from __future__ import annotations

from functools import lru_cache

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.lua.v3 import lua_pb2
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from google.protobuf import struct_pb2
from xds.type.matcher.v3 import matcher_pb2 as m

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route
from lychgate.xds.translator.rbac import FieldMatcher, action, source_in

FILTER = "envoy.filters.http.rbac/acl"
RESPONDER = "envoy.filters.http.lua/acl"
PREFIX = "acl_"  # the rbac filter's shadow stats and metadata keys: acl_shadow_engine_result, ...
METADATA = "dev.kgateway.http.acl"
DENIED_BODY = "access denied\n"

RUNTIME = r"""
-- The deny response for this request, or nil when the ACL lets it through.
local function deny_response(handle)
  local info = handle:streamInfo()
  local decided = info:dynamicMetadata():get("envoy.filters.http.rbac")
  if decided == nil or decided["acl_shadow_engine_result"] ~= "denied" then return nil end
  local by = string.sub(decided["acl_shadow_effective_policy_id"] or "acl:default", 5)
  info:dynamicMetadata():set("dev.kgateway.http.acl", "blocked-by", by)
  local deny = handle:filterContext()
  local headers = {[":status"] = deny:get("status")}
  for _, h in ipairs(deny:get("headers") or {}) do headers[h[1]] = h[2] end
  local blocked_by = deny:get("blocked_by")
  if blocked_by then headers[blocked_by] = by end
  return headers, deny:get("body")
end

function envoy_on_request(handle)
  local ok, headers, body = pcall(deny_response, handle)
  if not ok then  -- never let a request through because the ACL could not be applied
    handle:logErr("acl: " .. tostring(headers))
    handle:respond({[":status"] = "500"}, "the access list of this route could not be applied\n")
  elseif headers ~= nil then
    handle:respond(headers, body)
  end
end
"""


def matcher(acl: ir.Acl) -> m.Matcher:
    rules = [FieldMatcher(predicate=source_in((cidr,)), on_match=action(f"acl:{name}", allow))
             for cidr, allow, name in acl.rules]
    return m.Matcher(matcher_list=m.Matcher.MatcherList(matchers=rules) if rules else None,
                     on_no_match=action("acl:default", acl.default_allow))


@lru_cache(maxsize=4096)
def decider(acl: ir.Acl) -> rbac_pb2.RBACPerRoute:
    return rbac_pb2.RBACPerRoute(rbac=rbac_pb2.RBAC(shadow_matcher=matcher(acl), shadow_rules_stat_prefix=PREFIX))


@lru_cache(maxsize=4096)
def responder(acl: ir.Acl) -> lua_pb2.LuaPerRoute:
    data = struct_pb2.Struct()
    # Lists, not maps, for the headers: the same policy must always give the same bytes.
    data.update({"status": str(acl.deny_status), "body": DENIED_BODY})
    if acl.deny_headers:
        data.update({"headers": [list(h) for h in acl.deny_headers]})
    if acl.blocked_by_header:
        data.update({"blocked_by": acl.blocked_by_header})
    return lua_pb2.LuaPerRoute(filter_context=data)


class Acl(Feature):
    name = "acl"
    order = 11  # right after CORS: before csrf and every authentication filter

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if listener.policy_filters:
            add_disabled_filter(hcm, FILTER, rbac_pb2.RBAC())
            add_disabled_filter(hcm, RESPONDER, lua_pb2.Lua(default_source_code=base_pb2.DataSource(
                inline_string=RUNTIME)))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        acl = route.policy.acl if route.policy is not None else None
        if acl is not None:
            enable_on_route(out, FILTER, decider(acl))
            enable_on_route(out, RESPONDER, responder(acl))


register(Acl())
