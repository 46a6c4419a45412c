"""rbac: allow or deny requests by CEL expressions and client CIDRs (Envoy rbac).

kgateway's shape (shared.Authorization): `policy.matchExpressions` (CEL, any
one true matches), `allowedCIDRs` (AND-ed with the expressions),
`blockedCIDRs` (denied whatever else matches) and `action` Allow (default:
what matches passes, the rest gets 403) or Deny (what matches gets 403). As
in kgateway, rbac at a more specific attachment point replaces, never adds to,
one above. Expressions are parsed here, so a typo is a status on the policy,
not a configuration Envoy rejects.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from lychgate import cel, ir
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, Invalid


def cidr(value: str, path: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except ValueError:
        raise Invalid(path, f"{value!r} is not an IP address or CIDR range") from None


class RbacField(PolicyField):
    name, attr, security = "rbac", "rbac", True

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        policy = value.get("policy") or {}
        exprs = policy.get("matchExpressions") or []
        allowed = [cidr(c, f"{path}.policy.allowedCIDRs[{i}]") for i, c in enumerate(policy.get("allowedCIDRs") or [])]
        blocked = [cidr(c, f"{path}.policy.blockedCIDRs[{i}]") for i, c in enumerate(policy.get("blockedCIDRs") or [])]
        if not (exprs or allowed or blocked):
            raise Invalid(f"{path}.policy", "at least one of matchExpressions, allowedCIDRs or blockedCIDRs "
                                            "must be set")
        for i, expr in enumerate(exprs):
            try:
                cel.parse(expr)
            except cel.CelError as err:
                raise Invalid(f"{path}.policy.matchExpressions[{i}]", f"{expr!r} is not valid CEL: {err}") from None
        return {"rbac": ir.Rbac(action=value.get("action") or "Allow", expressions=tuple(exprs),
                                allowed_cidrs=tuple(allowed), blocked_cidrs=tuple(blocked))}


register(RbacField())
