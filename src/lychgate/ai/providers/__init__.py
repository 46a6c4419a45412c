"""One module per LLM provider (base.py says the shape); CODECS maps a provider kind
(kgateway's field name: openai, azureopenai, anthropic, gemini, vertexai, bedrock)
to its codec."""

from __future__ import annotations

from lychgate.ai.providers.base import ProviderCodec

CODECS: dict[str, ProviderCodec] = {}


def register(codec: ProviderCodec) -> ProviderCodec:
    CODECS[codec.kind] = codec
    return codec


# The provider modules register themselves on import (add each new one here).
from lychgate.ai.providers import anthropic, azureopenai, bedrock, gemini, openai, vertexai  # noqa: E402,F401
