"""directResponse: the routes a policy covers answer a fixed status and body themselves
(the shape of the DirectResponse kind: `status`, `body` or `bodyFormat`)."""

from __future__ import annotations

from typing import Any

from lychgate.api.direct_response import DirectResponseSpec
from lychgate.envoy_limits import EnvoyRejects
from lychgate.translate.direct_response import response_of
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, Invalid


class DirectResponseField(PolicyField):
    name, attr = "directResponse", "direct_response"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        try:
            return {"direct_response": response_of(DirectResponseSpec.model_validate(value))}
        except EnvoyRejects as err:
            raise Invalid(f"{path}.body", str(err)) from None


register(DirectResponseField())
