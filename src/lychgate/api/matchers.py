"""kgateway's shared StringMatcher, as GatewayParameters stats and TrafficPolicy csrf use it."""

from __future__ import annotations

from pydantic import Field, model_validator

from lychgate import envoy_limits
from lychgate.api.base import Model
from lychgate.api.rules import exactly_one_of

_KINDS = ("exact", "prefix", "suffix", "contains", "safe_regex")


class StringMatcher(Model):
    """Exactly one of exact, prefix, suffix, contains or safeRegex."""

    exact: str | None = None
    prefix: str | None = Field(None, min_length=1)
    suffix: str | None = Field(None, min_length=1)
    contains: str | None = None
    safe_regex: str | None = None
    ignore_case: bool | None = None

    RULES = (exactly_one_of(*_KINDS),)

    @model_validator(mode="after")
    def _regex(self) -> StringMatcher:
        if self.safe_regex is not None:
            try:
                envoy_limits.regex(self.safe_regex)  # as Envoy compiles it: RE2, program size
            except envoy_limits.EnvoyRejects as err:
                raise ValueError(f"safeRegex: {err}") from None
        return self
