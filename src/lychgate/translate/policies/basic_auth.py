"""basicAuth: HTTP basic authentication against htpasswd users (Envoy basic_auth).

kgateway's shape: `users` inline, or `secretRef` (key `.htpasswd` unless
`key` says otherwise), or `disable`. As in kgateway and Envoy, only SHA-1
htpasswd entries (`user:{SHA}base64`) are accepted. A Secret that is missing,
not granted, lacks the key or holds no usable entry fails the route closed.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from lychgate import ir
from lychgate.api.policy import TrafficPolicy
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.policies.secret_refs import entries, secret
from lychgate.translate.values import CompileContext, Invalid, Unresolved

DEFAULT_KEY = ".htpasswd"


def htpasswd_problem(line: str) -> str | None:
    user, sep, hashed = line.partition(":")
    if not sep or not user:
        return f"{line!r} is not user:hash"
    if not hashed.startswith("{SHA}"):
        return f"user {user}: only SHA-1 ({{SHA}}...) htpasswd entries are supported"
    try:
        if len(base64.b64decode(hashed[5:], validate=True)) != 20:
            return f"user {user}: {{SHA}} must be followed by the base64 of a 20-byte SHA-1 digest"
    except (binascii.Error, ValueError):
        return f"user {user}: {{SHA}} must be followed by base64"
    return None


class BasicAuthField(PolicyField):
    name, attr, security = "basicAuth", "basic_auth", True

    def normalize(self, policy: TrafficPolicy, value: dict[str, Any]) -> dict[str, Any]:
        ref = value.get("secretRef")
        if ref is not None:
            # The policy's namespace decides which ReferenceGrant a Secret elsewhere needs.
            value["secretRef"] = {**ref, "namespace": ref.get("namespace") or policy.namespace,
                                  "fromNamespace": policy.namespace}
        return value

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if sum(k in value for k in ("users", "secretRef", "disable")) != 1:
            raise Invalid(path, "exactly one of users, secretRef or disable must be set")
        if "disable" in value:
            return {"basic_auth": None}
        if "users" in value:
            lines = value["users"]
            if not lines:
                raise Invalid(f"{path}.users", "at least one user is required")
            for i, line in enumerate(lines):
                problem = htpasswd_problem(line)
                if problem:
                    raise Invalid(f"{path}.users[{i}]", problem)
            return {"basic_auth": ir.BasicAuth("\n".join(lines))}
        ref = value["secretRef"]
        key = ref.get("key") or DEFAULT_KEY
        found = secret(ctx.store, ref["fromNamespace"], ref["namespace"], ref["name"], f"{path}.secretRef")
        where = f"{path}.secretRef: Secret {ref['namespace']}/{ref['name']}"
        text = entries(found).get(key)
        if text is None:
            raise Unresolved("InvalidSecret", f"{where} has no key {key}")
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        problems = [p for p in map(htpasswd_problem, lines) if p]
        if problems or not lines:
            raise Unresolved("InvalidSecret", f"{where} key {key}: {problems[0] if problems else 'no users'}")
        return {"basic_auth": ir.BasicAuth("\n".join(lines))}


register(BasicAuthField())
