"""internalRedirect: the gateway follows the backend's 3xx (a fully qualified
Location) itself and answers the client with the final response."""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, header_name


class InternalRedirectField(PolicyField):
    name, attr = "internalRedirect", "internal_redirect"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        return {"internal_redirect": ir.InternalRedirect(
            response_codes=tuple(value.get("redirectResponseCodes") or (302,)),
            allow_cross_scheme=bool(value.get("allowCrossSchemeRedirect")),
            headers_to_copy=tuple(header_name(h, f"{path}.responseHeadersToCopy[{i}]")
                                  for i, h in enumerate(value.get("responseHeadersToCopy") or ())),
            max_redirects=value.get("maxRedirects", 1))}


register(InternalRedirectField())
