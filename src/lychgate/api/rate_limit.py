"""Rate limit descriptors a RateLimit GatewayExtension's service counts: TrafficPolicy
`rateLimit.global` (Envoy asks the service per request) and `ai.tokenRateLimit` (the
AI extension asks it, and charges the tokens of each answer)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from lychgate.api.auth import NamespacedObjectReference
from lychgate.api.base import Model


class RateLimitDescriptorEntryGeneric(Model):
    key: str = Field(min_length=1)
    value: str = Field(min_length=1)


class RateLimitDescriptorEntry(Model):
    """One entry of a descriptor: a fixed key and value, a request header, the client address or the path."""

    type: Literal["Generic", "Header", "RemoteAddress", "Path"]
    generic: RateLimitDescriptorEntryGeneric | None = None
    header: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> RateLimitDescriptorEntry:
        if (self.generic is not None) != (self.type == "Generic") or (self.header is not None) != (self.type == "Header"):
            raise ValueError("exactly one entry type must be specified")
        return self


class RateLimitDescriptor(Model):
    entries: list[RateLimitDescriptorEntry] = Field(min_length=1)


class GlobalRateLimitPolicy(Model):
    """Descriptors a RateLimit GatewayExtension's service counts: requests (`rateLimit.global`)
    or LLM tokens (`ai.tokenRateLimit`)."""

    descriptors: list[RateLimitDescriptor] = Field(min_length=1)
    extension_ref: NamespacedObjectReference
