"""Vertex AI's Gemini models: the Gemini API's bodies (gemini.py) at
`/{apiVersion}/projects/{projectId}/locations/{location}/publishers/{publisher}/models/{model}:{modelPath}`
(modelPath defaults to generateContent; streamed: streamGenerateContent?alt=sse).

The credential is an OAuth 2 access token in `Authorization: Bearer <token>`, the only
way Vertex AI takes one. kgateway's API reference says a "key" header, but its Envoy
transformation sent `Authorization: Bearer` too; `authHeader` changes name and prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

from lychgate.ai.config import Provider
from lychgate.ai.providers.base import ProviderError, register
from lychgate.ai.providers.credentials import credential_headers
from lychgate.ai.providers.gemini import GeminiCodec


@dataclass
class VertexAICodec(GeminiCodec):
    kind: str = "vertexai"
    default_host: str = "aiplatform.googleapis.com"

    def upstream_host(self, location: str | None = None, region: str | None = None) -> str:
        # Regional endpoints carry the location; the "global" location has none.
        if location and location != "global":
            return f"{location}-{self.default_host}"
        return self.default_host

    def path(self, provider: Provider, model: str) -> str:
        if not provider.project_id or not provider.location:
            raise ProviderError(500, "The Vertex AI provider has no projectId and location configured.",
                                "server_error")
        publisher = (provider.publisher or "google").lower()
        return (f"/{provider.api_version or 'v1'}/projects/{provider.project_id}/locations/{provider.location}"
                f"/publishers/{publisher}/models/{model}:{provider.model_path or 'generateContent'}")

    def credentials(self, provider: Provider, client_headers: dict[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
        return credential_headers(provider, client_headers, "authorization", "Bearer")


register(VertexAICodec())
