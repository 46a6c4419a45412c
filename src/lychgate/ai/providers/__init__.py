"""One module per LLM provider (base.py says the shape); CODECS maps a provider kind
(kgateway's field name: openai, azureopenai, anthropic, gemini, vertexai, bedrock)
to its codec."""

from __future__ import annotations

# The provider modules register themselves on import (add each new one here).
from lychgate.ai.providers import anthropic, azureopenai, bedrock, gemini, openai, vertexai  # noqa: F401
from lychgate.ai.providers.base import CODECS, register

__all__ = ["CODECS", "register"]
