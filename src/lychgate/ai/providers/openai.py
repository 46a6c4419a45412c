"""OpenAI: the client already speaks its API, so the request goes on with the provider's
credential, the Backend's `model` override and, for streams, `stream_options.include_usage`
(so the last chunk carries the tokens to count); the answer comes back as it is.

Streams: the usage chunk the gateway asked for (`choices: []`) reaches only a client that
asked for it too, as with OpenAI itself; code written for streams without it reads
`chunk.choices[0]` of every chunk. Other chunks without choices (Azure's
`prompt_filter_results` annotations) are dropped for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lychgate.ai.config import Provider
from lychgate.ai.providers import chat as chat_request
from lychgate.ai.providers.base import (
    Answer,
    ProviderCodec,
    StreamTranslator,
    UpstreamRequest,
    Usage,
    json_object,
    json_request,
    register,
)
from lychgate.ai.providers.credentials import credential_headers
from lychgate.ai.providers.sse import DONE, Event, EventReader


def usage_of(usage: Any) -> Usage | None:
    """OpenAI's `usage` object as Usage (None when absent, as in every chunk but the last)."""
    if not isinstance(usage, dict):
        return None
    return Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))


@dataclass
class OpenAICodec(ProviderCodec):
    kind: str = "openai"
    default_host: str = "api.openai.com"

    def path(self, provider: Provider) -> str:
        return provider.path or "/v1/chat/completions"

    def credentials(self, provider: Provider, client_headers: dict[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
        return credential_headers(provider, client_headers, "authorization", "Bearer")

    def body_model(self, chat: dict[str, Any], provider: Provider) -> str | None:
        return chat_request.model(chat, provider)

    def request(self, chat: dict[str, Any], provider: Provider, client_headers: dict[str, str]) -> UpstreamRequest:
        chat_request.messages(chat)
        body = dict(chat)
        model = self.body_model(chat, provider)
        if model is not None:
            body["model"] = model
        stream = chat_request.wants_stream(body)
        if stream:
            options = body.get("stream_options")
            body["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
        headers, remove = self.credentials(provider, client_headers)
        return json_request(self.path(provider), headers, body, remove, stream)

    def answer(self, data: dict[str, Any], headers: dict[str, str], model: str) -> Answer:
        return Answer(200, data, usage_of(data.get("usage")))

    def stream(self, provider: Provider, model: str, *, include_usage: bool = False) -> StreamTranslator:
        return OpenAIStream(include_usage)


class OpenAIStream:
    """OpenAI's events relayed as they are, each as soon as its blank line arrives."""

    def __init__(self, include_usage: bool) -> None:
        self._reader = EventReader()
        self._include_usage = include_usage
        self._usage: Usage | None = None
        self._done = False

    @property
    def usage(self) -> Usage | None:
        return self._usage

    def feed(self, chunk: bytes) -> bytes:
        return b"".join(map(self._relay, self._reader.feed(chunk)))

    def finish(self) -> bytes:
        out = b"".join(map(self._relay, self._reader.end()))
        return out if self._done else out + DONE

    def _relay(self, event: Event) -> bytes:
        if event.data == "[DONE]":
            self._done = True
            return DONE
        chunk = json_object(event.data)
        if chunk is not None:
            usage = usage_of(chunk.get("usage"))
            if usage is not None:
                self._usage = usage
            if chunk.get("choices") == [] and not (usage is not None and self._include_usage):
                return b""
        return event.raw + b"\n"


register(OpenAICodec())
