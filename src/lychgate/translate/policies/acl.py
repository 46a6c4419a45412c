"""acl (also `httpAcl`): allow or deny by client address, the longest matching prefix deciding.

kgateway's shape (shared.ACLPolicy): `defaultAction`, `rules[]` of `cidrs`
(bare addresses are /32 or /128; a range with host bits set is refused, as
kgateway does, naming the range meant) with an `action` and an optional
`name`, and `denyResponse`: the status (403 by default), extra headers, and a
header (`blockedByHeaderName`, older `addBlockedByHeader`) naming what decided:
the rule's name, `rule` for an unnamed rule, `default` for the default action.

Merging follows kgateway: policies at one tier (the Gateway and its listeners;
a route and its rules) merge, rules joined (the higher-priority policy's
first), defaultAction and denyResponse from the higher-priority policy, and
when they disagree on those the higher-priority policy wins whole. A route-tier
ACL replaces the Gateway's.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from lychgate import ir
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, Invalid, header_name

_SINGLE = ("statusCode", "blockedByHeaderName")


def _network(text: str, path: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(text)
    except ValueError:
        pass
    try:
        meant = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise Invalid(path, f"{text!r} is not an IP address or CIDR range") from None
    raise Invalid(path, f"{text!r} has host bits set; did you mean {meant}?")


def _deny(value: dict[str, Any]) -> dict[str, Any]:
    deny = dict(value.get("denyResponse") or {})
    if "addBlockedByHeader" in deny:
        deny["blockedByHeaderName"] = deny.pop("addBlockedByHeader")
    return deny


class AclField(PolicyField):
    name, attr, security = "acl", "acl", True
    merges_within_tier = True

    def merge(self, high: dict[str, Any], low: dict[str, Any]) -> dict[str, Any]:
        hd, ld = _deny(high), _deny(low)
        if high["defaultAction"] != low["defaultAction"] or any(
                k in hd and k in ld and hd[k] != ld[k] for k in _SINGLE):
            return high  # disagreeing on a single setting: the higher-priority policy whole
        # A range both name is decided by the higher-priority policy's rule.
        named = {c for r in high.get("rules") or [] for c in r["cidrs"]}
        lower = [dict(r, cidrs=[c for c in r["cidrs"] if c not in named]) for r in low.get("rules") or []]
        out = dict(high, rules=(high.get("rules") or []) + [r for r in lower if r["cidrs"]])
        if hd or ld:
            deny = {**ld, **hd}
            if hd.get("headers") or ld.get("headers"):
                deny["headers"] = (hd.get("headers") or []) + (ld.get("headers") or [])
            out["denyResponse"] = deny
        return out

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        deny = _deny(value)
        headers = []
        for i, h in enumerate(deny.get("headers") or []):
            headers.append((header_name(h["name"], f"{path}.denyResponse.headers[{i}].name").lower(), h["value"]))
        blocked_by = deny.get("blockedByHeaderName")
        if blocked_by is not None:
            blocked_by = header_name(blocked_by, f"{path}.denyResponse.blockedByHeaderName").lower()
        found: list[tuple[int, str, bool, str]] = []
        seen: dict[str, tuple[bool, str]] = {}
        for i, rule in enumerate(value.get("rules") or []):
            allow = rule["action"] == "allow"
            name = rule.get("name") or "rule"
            for j, text in enumerate(rule["cidrs"]):
                key = str(_network(text, f"{path}.rules[{i}].cidrs[{j}]"))
                if key in seen and seen[key][0] != allow:
                    raise Invalid(f"{path}.rules[{i}].cidrs[{j}]", f"{key} is both allowed and denied "
                                                                 f"(rule {seen[key][1]})")
                if key not in seen:  # the first (higher-priority) rule naming a range decides it
                    seen[key] = (allow, name)
                    found.append((ipaddress.ip_network(key).prefixlen, key, allow, name))
        # Longest prefix first, so the first rule that matches is the most specific one.
        found.sort(key=lambda r: -r[0])
        return {"acl": ir.Acl(rules=tuple((cidr, allow, name) for _, cidr, allow, name in found),
                              default_allow=value["defaultAction"] == "allow",
                              deny_status=deny.get("statusCode", 403), deny_headers=tuple(headers),
                              blocked_by_header=blocked_by)}


register(AclField())
