"""A provider codec between a client and a provider stand-in, over real HTTP, without Envoy:
what `request()` builds is sent with httpx as it is, the provider's real answer or stream
comes back through `response()` / `stream()`.

- `call()` / `call_stream()`: one request, the provider's answer and the translation;
- `openai_events()`: the translated server-sent events as the openai SDK's decoder reads
  them, each chunk validated with its ChatCompletionChunk type;
- `sdk()`: an `openai.OpenAI` client whose transport does the same, so the official SDK
  parses every answer, error and stream itself.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
from openai._streaming import SSEDecoder
from openai.types.chat import ChatCompletionChunk

from lychgate.ai.config import Provider
from lychgate.ai.providers.base import (
    Answer,
    ProviderCodec,
    ProviderError,
    StreamTranslator,
    UpstreamRequest,
)


def provider(kind: str, base_url: str, **fields: Any) -> Provider:
    url = httpx.URL(base_url)
    return Provider(id=f"ai/backend/{kind}", kind=kind, host=url.host, port=url.port or 80, tls=False,  # type: ignore[arg-type]
                    **fields)


def model_of(chat: dict[str, Any], p: Provider) -> str:
    return p.model or chat["model"]


def send(base_url: str, up: UpstreamRequest) -> httpx.Response:
    with httpx.Client(base_url=base_url, timeout=10) as client:
        return client.request(up.method, up.path, headers=up.headers, content=up.body)


def call(codec: ProviderCodec, chat: dict[str, Any], p: Provider, base_url: str,
         client_headers: dict[str, str] | None = None) -> tuple[UpstreamRequest, httpx.Response, Answer]:
    up = codec.request(chat, p, client_headers or {})
    got = send(base_url, up)
    return up, got, codec.response(got.status_code, dict(got.headers), got.content, p, model_of(chat, p))


@dataclass
class Streamed:
    up: UpstreamRequest
    status: int
    raw: list[bytes]  # the provider's body as the network delivered it
    out: list[bytes]  # the translation of each of those chunks, then finish()'s
    translator: StreamTranslator
    content_type: str = ""

    @property
    def body(self) -> bytes:
        return b"".join(self.raw)

    @property
    def translated(self) -> bytes:
        return b"".join(self.out)


def call_stream(codec: ProviderCodec, chat: dict[str, Any], p: Provider, base_url: str) -> Streamed:
    up = codec.request({**chat, "stream": True}, p, {})
    translator = codec.stream(p, model_of(chat, p), include_usage(chat))
    raw, out = [], []
    with httpx.Client(base_url=base_url, timeout=10) as client, \
            client.stream(up.method, up.path, headers=up.headers, content=up.body) as got:
        for chunk in got.iter_raw():
            raw.append(chunk)
            out.append(translator.feed(chunk))
        out.append(translator.finish())
        return Streamed(up, got.status_code, raw, out, translator, got.headers.get("content-type", ""))


def replay(codec: ProviderCodec, p: Provider, model: str, pieces: list[bytes], usage: bool = True) -> bytes:
    """A recorded stream fed again, cut into other pieces."""
    translator = codec.stream(p, model, usage)
    return b"".join(translator.feed(piece) for piece in pieces) + translator.finish()


def assert_streamed(streamed: Streamed, text: str, tokens: tuple[int, int]) -> None:
    """A stream asked with include_usage, as a client must see it: the provider's body in
    several network reads, the first translated at once (the first token not held back),
    one id, the role first, the text, one finish "stop", the usage chunk last, [DONE]."""
    assert len(streamed.raw) > 2, "the stand-in sends its events one by one"
    assert streamed.out[0], "the first event is translated as it arrives, not held back"
    events = openai_events(streamed.translated)
    assert events.done and not events.errors
    assert len({c.id for c in events.chunks}) == 1
    assert events.chunks[0].choices[0].delta.role == "assistant"
    assert events.content() == text
    assert events.finish() == ["stop"]
    usage = events.chunks[-1]
    assert usage.choices == [] and usage.usage is not None
    assert (usage.usage.prompt_tokens, usage.usage.completion_tokens, usage.usage.total_tokens) == (*tokens, sum(tokens))
    assert streamed.translator.usage is not None and streamed.translator.usage.total == sum(tokens)


def assert_cuts_change_nothing(codec: ProviderCodec, p: Provider, streamed: Streamed) -> None:
    """The recorded stream fed a byte at a time, cut in two at every byte, and cut in
    seven at random places translates to the same events as it did from the network."""
    body, model = streamed.body, p.model or ""
    expected = normalized(streamed.translated)
    assert expected[-1] == "[DONE]" and len(expected) > 4
    assert normalized(replay(codec, p, model, [body[i:i + 1] for i in range(len(body))])) == expected
    for cut in range(1, len(body)):
        assert normalized(replay(codec, p, model, [body[:cut], body[cut:]])) == expected, cut
    rng = random.Random(30)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(body)), 6))
        pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
        assert normalized(replay(codec, p, model, pieces)) == expected


def include_usage(chat: dict[str, Any]) -> bool:
    return bool((chat.get("stream_options") or {}).get("include_usage"))


@dataclass
class Events:
    chunks: list[ChatCompletionChunk] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False

    def content(self, index: int = 0) -> str:
        return "".join(c.delta.content or "" for chunk in self.chunks for c in chunk.choices if c.index == index)

    def finish(self, index: int = 0) -> list[str]:
        return [c.finish_reason for chunk in self.chunks for c in chunk.choices
                if c.index == index and c.finish_reason]


def openai_events(data: bytes) -> Events:
    """The translated stream as the openai SDK decodes it. Nothing may follow [DONE]."""
    out = Events()
    for event in SSEDecoder().iter_bytes(iter([data])):
        assert not out.done, f"event after [DONE]: {event.data}"
        if event.data == "[DONE]":
            out.done = True
            continue
        body = json.loads(event.data)
        if "error" in body:
            out.errors.append(body["error"])
        else:
            out.chunks.append(ChatCompletionChunk.model_validate(body))
    return out


def normalized(data: bytes) -> list[Any]:
    """The events without what differs from one translation to the next (id, created)."""
    events = []
    for event in SSEDecoder().iter_bytes(iter([data])):
        body = event.data if event.data == "[DONE]" else json.loads(event.data)
        if isinstance(body, dict):
            body.pop("id", None)
            body.pop("created", None)
        events.append(body)
    return events


@contextmanager
def sdk(codec: ProviderCodec, p: Provider, base_url: str) -> Iterator[openai.OpenAI]:
    """The official client, its requests translated by the codec and sent to the stand-in."""
    upstream = httpx.Client(base_url=base_url, timeout=10)

    def handle(request: httpx.Request) -> httpx.Response:
        chat = json.loads(request.read())
        try:
            up = codec.request(chat, p, dict(request.headers))
        except ProviderError as e:
            return _json(e.answer())
        got = upstream.send(upstream.build_request(up.method, up.path, headers=up.headers, content=up.body),
                            stream=True)
        if got.status_code >= 400 or not up.stream:
            body = got.read()
            got.close()
            return _json(codec.response(got.status_code, dict(got.headers), body, p, model_of(chat, p)))
        translator = codec.stream(p, model_of(chat, p), include_usage(chat))

        def relay() -> Iterator[bytes]:
            try:
                for chunk in got.iter_raw():
                    if out := translator.feed(chunk):
                        yield out
                yield translator.finish()
            finally:
                got.close()

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=relay())

    client = openai.OpenAI(api_key="the-client-s-key", base_url="http://gateway.test/v1", max_retries=0,
                           http_client=httpx.Client(transport=httpx.MockTransport(handle)))
    try:
        yield client
    finally:
        client.close()
        upstream.close()


def ask(client: openai.OpenAI, messages: list[dict[str, Any]]) -> tuple[str | None, str, int | None]:
    """Through the SDK: the answer's text, the text of the same asked as a stream (with
    usage) and the stream's total tokens."""
    completion = client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    stream = client.chat.completions.create(model="gpt-4o", messages=messages, stream=True,  # type: ignore[arg-type]
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    usage = chunks[-1].usage
    return (completion.choices[0].message.content,
            "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), usage and usage.total_tokens)


def _json(answer: Answer) -> httpx.Response:
    return httpx.Response(answer.status, content=answer.encode(), headers={"content-type": "application/json"})
