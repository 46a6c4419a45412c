"""Azure OpenAI: OpenAI's request and answer shapes at a deployment's URL
(`/openai/deployments/{deploymentName}/chat/completions?api-version={apiVersion}` on the
resource's endpoint), with the key in `api-key` (no prefix). The deployment picks the
model: the request's `model` is sent as it is unless the Backend overrides it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from lychgate.ai.config import Provider
from lychgate.ai.providers.base import ProviderError, register
from lychgate.ai.providers.credentials import credential_headers
from lychgate.ai.providers.openai import OpenAICodec


@dataclass
class AzureOpenAICodec(OpenAICodec):
    kind: str = "azureopenai"
    default_host: str = ""  # the resource's endpoint, e.g. my-resource.openai.azure.com

    def path(self, provider: Provider) -> str:
        if not provider.api_version:
            raise ProviderError(500, "The Azure OpenAI provider has no apiVersion configured.", type_="server_error")
        path = provider.path
        if path is None:
            if not provider.deployment_name:
                raise ProviderError(500, "The Azure OpenAI provider has no deploymentName configured.",
                                    type_="server_error")
            path = f"/openai/deployments/{quote(provider.deployment_name, safe='')}/chat/completions"
        if "api-version=" in path:  # a `path` override that says its own version
            return path
        return f"{path}{'&' if '?' in path else '?'}api-version={quote(provider.api_version, safe='')}"

    def credentials(self, provider: Provider, client_headers: dict[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
        return credential_headers(provider, client_headers, "api-key")

    def body_model(self, chat: dict[str, Any], provider: Provider) -> str | None:
        return provider.model or None


register(AzureOpenAICodec())
