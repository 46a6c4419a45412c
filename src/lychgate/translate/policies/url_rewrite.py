"""urlRewrite.pathRegex: the request path rewritten by an RE2 pattern and its
substitution (capture groups as \\1), before the request goes to the backend."""

from __future__ import annotations

import re
from typing import Any

from lychgate.translate.policies.common import CompileContext, Invalid
from lychgate.translate.policies.fields import PolicyField, register


class URLRewriteField(PolicyField):
    name, attr = "urlRewrite", "url_rewrite"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        rewrite = value["pathRegex"]
        try:  # Python's re accepts a superset of RE2; Envoy itself is the final judge
            re.compile(rewrite["pattern"])
        except re.error as err:
            raise Invalid(f"{path}.pathRegex.pattern", f"{rewrite['pattern']!r} is not a valid regex: {err}") from None
        return {"path_regex_rewrite": (rewrite["pattern"], rewrite["substitution"])}


register(URLRewriteField())
