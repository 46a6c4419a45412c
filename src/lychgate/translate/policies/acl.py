"""acl: allow or deny by client address, the longest matching prefix deciding (Envoy rbac).

kgateway's shape (shared.ACLPolicy): `defaultAction`, `rules[]` of `cidrs`
(bare addresses are /32 or /128) with an `action` and an optional `name`.
Denied requests get 403. `denyResponse` (another status, extra headers, a
blocked-by header) is not implemented yet: a policy asking for it is
reported invalid rather than served with a response it did not ask for.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from lychgate import ir
from lychgate.translate.policies.common import CompileContext, Invalid
from lychgate.translate.policies.fields import PolicyField, register


class AclField(PolicyField):
    name, attr, security = "acl", "acl", True

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        deny = value.get("denyResponse")
        if deny and (deny.get("headers") or deny.get("addBlockedByHeader") or deny.get("statusCode", 403) != 403):
            raise Invalid(f"{path}.denyResponse", "a custom deny response is not supported by lychgate yet "
                                                  "(denied requests get 403)")
        found: list[tuple[int, str, bool, str]] = []
        seen: dict[str, tuple[bool, str]] = {}
        for i, rule in enumerate(value.get("rules") or []):
            allow = rule["action"] == "allow"
            name = rule.get("name") or "rule"
            for j, text in enumerate(rule["cidrs"]):
                try:
                    net = ipaddress.ip_network(text, strict=False)
                except ValueError:
                    raise Invalid(f"{path}.rules[{i}].cidrs[{j}]", f"{text!r} is not an IP address or CIDR range") from None
                if ipaddress.ip_address(text.split("/")[0]) != net.network_address:
                    # As kgateway: a range with host bits set is a typo more often than not.
                    raise Invalid(f"{path}.rules[{i}].cidrs[{j}]", f"{text!r} has host bits set; the range is {net}")
                key = str(net)
                if key in seen and seen[key][0] != allow:
                    raise Invalid(f"{path}.rules[{i}].cidrs[{j}]", f"{key} is both allowed and denied "
                                                                 f"(rule {seen[key][1]})")
                if key not in seen:
                    seen[key] = (allow, name)
                    found.append((net.prefixlen, key, allow, name))
        # Longest prefix first, so the first rule that matches is the most specific one.
        found.sort(key=lambda r: -r[0])
        return {"acl": ir.Acl(rules=tuple((cidr, allow, name) for _, cidr, allow, name in found),
                              default_allow=value["defaultAction"] == "allow")}


register(AclField())
