"""Custom span attributes (kgateway's CustomAttribute): what tracing adds to each span, on a
listener (ListenerPolicy `httpSettings.tracing`) or a route (TrafficPolicy `tracing`)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from lychgate.api.base import Model


class CustomAttributeLiteral(Model):
    value: str


class CustomAttributeEnvironment(Model):
    name: str = Field(min_length=1)
    default_value: str | None = None


class CustomAttributeHeader(Model):
    name: str = Field(min_length=1)
    default_value: str | None = None


class MetadataPathSegment(Model):
    key: str = Field(min_length=1)


class MetadataKey(Model):
    key: str = Field(min_length=1)
    path: list[MetadataPathSegment] = Field(min_length=1)


class CustomAttributeMetadata(Model):
    kind: Literal["Request", "Route", "Cluster", "Host"]
    metadata_key: MetadataKey
    default_value: str | None = None


class CustomAttribute(Model):
    # kgateway's Min/MaxProperties (the name and at most one source); translation asks for
    # exactly one source (translate/tracing.py), as a name alone would add no attribute.
    model_config = ConfigDict(json_schema_extra={"minProperties": 1, "maxProperties": 2})

    name: str = Field(min_length=1)
    literal: CustomAttributeLiteral | None = None
    environment: CustomAttributeEnvironment | None = None
    request_header: CustomAttributeHeader | None = None
    metadata: CustomAttributeMetadata | None = None
