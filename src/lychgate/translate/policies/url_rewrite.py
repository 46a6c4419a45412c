"""urlRewrite.pathRegex: the request path rewritten by an RE2 pattern and its
substitution (capture groups as \\1), before the request goes to the backend."""

from __future__ import annotations

from typing import Any

from lychgate import envoy_limits
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, envoy_check


class URLRewriteField(PolicyField):
    name, attr = "urlRewrite", "url_rewrite"
    target_kinds = frozenset({"HTTPRoute"})

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        rewrite = value["pathRegex"]
        envoy_check(lambda p: envoy_limits.regex(p, sized=False), rewrite["pattern"], f"{path}.pathRegex.pattern")
        return {"path_regex_rewrite": (rewrite["pattern"], rewrite["substitution"])}


register(URLRewriteField())
