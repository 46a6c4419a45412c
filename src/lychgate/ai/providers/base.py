"""The shape every provider module has: OpenAI's Chat Completions in, the provider's
native API out, and the answer back in OpenAI's shape (whole, or streamed as
server-sent events, chunk by chunk as they come).

The extension calls, per attempt: `request()` with the client's (already guarded
and enriched) request; then `response()` for a whole answer, or, when the provider
streams, `stream()` once and `feed()` for each body chunk Envoy hands over and
`finish()` at the end. Nothing here does I/O: the extension owns the streams.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from lychgate.ai.config import Provider


@dataclass
class Usage:
    """Tokens of one request, as the provider counted them."""

    input: int = 0
    output: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output


@dataclass
class UpstreamRequest:
    """What goes to the provider instead of the client's request."""

    path: str  # with the query string, if any
    # set on the upstream request (credentials, versions, content type); out of the repr: keys
    headers: dict[str, str] = field(repr=False)
    body: bytes
    method: str = "POST"
    remove_headers: tuple[str, ...] = ("authorization",)  # the client's credentials never reach a provider
    stream: bool = False  # the client asked for a stream


@dataclass
class Answer:
    """A whole answer in OpenAI's shape (a chat.completion, or an OpenAI error)."""

    status: int
    body: dict[str, Any]
    usage: Usage | None = None

    def encode(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":")).encode()


class ProviderError(Exception):
    """A request the provider cannot be sent (answered by the gateway in OpenAI's error
    shape, the provider never called)."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type_, code, param

    def answer(self) -> Answer:
        return Answer(self.status, openai_error(self.message, self.type, self.code, self.param))


def openai_error(message: str, type_: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None) -> dict[str, Any]:
    """OpenAI's error body: what the openai SDK turns into its APIError subclasses."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


class StreamTranslator(Protocol):
    """A streamed answer, translated as it arrives."""

    def feed(self, chunk: bytes) -> bytes:
        """The provider's next body bytes -> OpenAI server-sent events for every event
        complete so far (b"" when none is): `data: {chat.completion.chunk}\\n\\n`."""

    def finish(self) -> bytes:
        """The end of the provider's stream -> the last events and `data: [DONE]\\n\\n`."""

    @property
    def usage(self) -> Usage | None:
        """The tokens, once the provider said (a usage event, the last chunk), else None."""


@dataclass
class ProviderCodec:
    """Base of the provider modules; each overrides what differs."""

    kind: str = ""
    default_host: str = ""
    extras: dict[str, Any] = field(default_factory=dict)

    def request(self, chat: dict[str, Any], provider: Provider, client_headers: dict[str, str]) -> UpstreamRequest:
        raise NotImplementedError

    def response(self, status: int, headers: dict[str, str], body: bytes, provider: Provider,
                 model: str) -> Answer:
        raise NotImplementedError

    def stream(self, provider: Provider, model: str, include_usage: bool = False) -> StreamTranslator:
        """include_usage: the client's `stream_options.include_usage` (OpenAI sends the usage
        chunk, with empty choices, only when asked: clients reading choices[0] of every chunk
        would break on it otherwise)."""
        raise NotImplementedError

    def upstream_host(self, location: str | None = None, region: str | None = None) -> str:
        """The provider's API host when the Backend overrides none (Vertex AI's depends on the
        location, Bedrock's on the region)."""
        return self.default_host
