"""DirectResponse (gateway.lychgate.dev/v1alpha1): a fixed answer for a route rule.

Field for field kgateway's `DirectResponse` (api/v1alpha1/kgateway/
direct_response_types.go). An HTTPRoute rule names it in an `ExtensionRef`
filter (`group: gateway.lychgate.dev, kind: DirectResponse`); the gateway then
answers with `status` and `body` (or a body Envoy formats, `bodyFormat`)
without calling a backend.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from lychgate.api.base import Model, Resource
from lychgate.api.format_dict import FormatDictionary
from lychgate.api.lychgate import GROUP
from lychgate.api.rules import at_most_one_of
from lychgate.api.status import PolicyStatus


class BodyFormat(Model):
    content_type: str | None = None
    text: str | None = Field(None, min_length=1, max_length=4096)
    json_: FormatDictionary | None = Field(None, alias="json")

    @model_validator(mode="after")
    def _one(self) -> BodyFormat:
        if (self.text is None) == (self.json_ is None):
            raise ValueError("exactly one of json, text must be set")
        return self


class DirectResponseSpec(Model):
    status: int = Field(ge=200, le=599)
    body: str | None = Field(None, min_length=1, max_length=4096)
    body_format: BodyFormat | None = None

    RULES = (at_most_one_of("body", "body_format"),)


class DirectResponse(Resource):
    """A status and body the gateway answers with, for the route rules that name it."""

    KIND: ClassVar[str] = "DirectResponse"
    STATUS: ClassVar[type[Model] | None] = PolicyStatus
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1alpha1",)
    spec: DirectResponseSpec
