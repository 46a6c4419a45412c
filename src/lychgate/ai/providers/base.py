"""The shape every provider module has: OpenAI's Chat Completions in, the provider's
native API out, and the answer back in OpenAI's shape (whole, or streamed as
server-sent events, chunk by chunk as they come).

The extension calls, per attempt: `request()` with the client's (already guarded
and enriched) request; then `response()` for a whole answer, or, when the provider
streams, `stream()` once and `feed()` for each body chunk Envoy hands over and
`finish()` at the end. For an answer with an error status (not 2xx) the extension
calls `response()` with the whole body, streamed request or not: providers answer
errors whole. Nothing here does I/O: the extension owns the streams.

Here too: OpenAI's error bodies for what a provider answered (`error_answer()`, any
body; `provider_error()`, a provider's own error read), the 502 of an answer that cannot
be read (`unreadable()`), and a JSON request to a provider (`json_request()`). And the
codecs by kind (`CODECS`): each provider module adds its own with `register()`.
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
    output: int = 0  # the model's reasoning (thinking) included: it is billed as output
    reasoning: int = 0  # of `output`, the reasoning tokens (OpenAI's completion_tokens_details)

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


# The error type OpenAI uses for each status (what a client may read besides the status).
_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 409: "conflict_error", 413: "invalid_request_error",
          422: "invalid_request_error", 429: "rate_limit_error"}


def error_type(status: int) -> str:
    """The OpenAI error `type` for a provider's HTTP status (the openai SDK picks its
    exception class by status; the type tells a reader of the body)."""
    if status >= 500 or status == 424:  # 424: the model behind the provider failed (Bedrock)
        return "server_error"
    return _TYPES.get(status, "invalid_request_error")


def provider_error(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error body for a provider's error of this status."""
    return openai_error(message, error_type(status), code)


def _excerpt(body: bytes, size: int = 500) -> str:
    """A body that is not the provider's error shape (a proxy's HTML page...), for a message."""
    text = body[:size].decode("utf-8", "replace").strip()
    return f": {text}" if text else "."


def error_answer(status: int, body: bytes) -> Answer:
    """An upstream error in OpenAI's shape: an OpenAI error body as it is, anything else
    (a proxy's HTML page, an empty body) wrapped with the status's error type."""
    parsed = json_object(body)
    if parsed is not None and isinstance(parsed.get("error"), dict):
        return Answer(status, parsed)
    return Answer(status, provider_error(status, f"The provider answered {status}{_excerpt(body)}"))


def unreadable(body: bytes, what: str = "is not a JSON object") -> Answer:
    """A 2xx answer the codec cannot read: a 502, as from a gateway whose upstream failed."""
    return Answer(502, provider_error(502, f"The provider's answer {what}{_excerpt(body, 200)}"))


def json_object(text: str | bytes) -> dict[str, Any] | None:
    """`text` as a JSON object, or None (not JSON, or not an object)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def json_request(path: str, headers: dict[str, str], body: dict[str, Any], remove_headers: tuple[str, ...],
                 stream: bool) -> UpstreamRequest:
    """A JSON request to the provider: `headers` (its credentials, versions) and the content type."""
    return UpstreamRequest(path, {**headers, "content-type": "application/json"},
                           json.dumps(body, separators=(",", ":")).encode(), remove_headers=remove_headers,
                           stream=stream)


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
        """A whole answer: an error status through `error()`, a JSON object through
        `answer()`, anything else a 502."""
        if not 200 <= status < 300:
            return self.error(status, headers, body)
        data = json_object(body)
        return unreadable(body) if data is None else self.answer(data, headers, model)

    def error(self, status: int, headers: dict[str, str], body: bytes) -> Answer:
        """The provider's error answer in OpenAI's shape, same status."""
        return error_answer(status, body)

    def answer(self, data: dict[str, Any], headers: dict[str, str], model: str) -> Answer:
        """The provider's 2xx answer (a JSON object) in OpenAI's shape."""
        raise NotImplementedError

    def stream(self, provider: Provider, model: str, *, include_usage: bool = False) -> StreamTranslator:
        """`include_usage`: the client asked for `stream_options.include_usage` (chat.wants_usage),
        so the stream ends with OpenAI's usage chunk (`choices: []`); without it that chunk is
        not sent (clients reading `chunk.choices[0]` would fail on it) and the usage is only
        counted (`StreamTranslator.usage`)."""
        raise NotImplementedError

    def upstream_host(self, location: str | None = None, region: str | None = None) -> str:
        """The provider's API host when the Backend overrides none (Vertex AI's depends on the
        location, Bedrock's on the region)."""
        return self.default_host


# A provider kind (kgateway's field name) -> its codec; each provider module registers its
# own on import (the package's __init__ imports them all).
CODECS: dict[str, ProviderCodec] = {}


def register(codec: ProviderCodec) -> ProviderCodec:
    CODECS[codec.kind] = codec
    return codec
