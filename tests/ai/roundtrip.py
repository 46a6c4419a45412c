"""A provider codec between a client and a provider stand-in, over real HTTP, as the
extension runs it per attempt but without Envoy: what `request()` builds goes to the
stand-in with httpx (the client's headers minus the ones the codec removes, plus the ones
it sets), the stand-in's answer comes back through `response()`, or, streamed, through
`stream()` chunk by chunk as httpx receives it.

- `call()` / `stream()`: one request, the provider's reply and its translation;
- `openai_events()`: a translated stream checked as OpenAI writes its streams (one
  `data:` line an event, nothing after [DONE]) and read as the openai SDK's decoder reads
  it, every chunk validated with the SDK's ChatCompletionChunk type;
- `replay()` / `assert_cuts_change_nothing()`: a recorded stream fed again, cut elsewhere;
- `openai_client()`: an openai SDK client that gets a given answer (how a client of the
  gateway reads what a codec produced); `sdk()`: an openai SDK client whose every request
  goes through the codec to the stand-in.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import httpx
import httpx2  # the openai SDK's HTTP client
import openai
from openai._streaming import SSEDecoder
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam

from lychgate.ai.config import Provider
from lychgate.ai.providers.base import (
    Answer,
    ProviderCodec,
    ProviderError,
    StreamTranslator,
    UpstreamRequest,
)
from lychgate.ai.providers.chat import wants_usage
from tests.ai.standins import StandIn

CLIENT_HEADERS = {"authorization": "Bearer gateway-client-key", "content-type": "application/json",
                  "user-agent": "OpenAI/Python"}


def provider(kind: str, standin: StandIn, **fields: Any) -> Provider:
    """A provider whose host and port are the stand-in's (what a Backend's host/port override says)."""
    return Provider(id=f"ai/backend/{kind}", kind=kind, host=standin.host, port=standin.port, tls=False,  # type: ignore[arg-type]
                    **fields)


def model_of(chat: dict[str, Any], p: Provider) -> str:
    """The model the extension hands to response() and stream()."""
    return p.model or str(chat.get("model") or "")


def upstream_headers(up: UpstreamRequest, client_headers: dict[str, str]) -> dict[str, str]:
    """The client's headers but those the codec removes, and Host and Content-Length
    (Envoy sets the provider's host, the extension the new body's length), plus the codec's."""
    headers = {k: v for k, v in client_headers.items()
               if k.lower() not in (*up.remove_headers, "host", "content-length")}
    return {**headers, **up.headers}


def send(standin: StandIn, up: UpstreamRequest, client_headers: dict[str, str] = CLIENT_HEADERS) -> httpx.Response:
    return httpx.request(up.method, standin.url + up.path, headers=upstream_headers(up, client_headers),
                         content=up.body, timeout=10)


class Trip(NamedTuple):
    up: UpstreamRequest  # what the codec built
    reply: httpx.Response  # what the stand-in answered
    answer: Answer  # what the client gets


def call(codec: ProviderCodec, chat: dict[str, Any], p: Provider, standin: StandIn,
         client_headers: dict[str, str] = CLIENT_HEADERS) -> Trip:
    """A whole answer: request() -> the stand-in -> response()."""
    up = codec.request(chat, p, client_headers)
    assert not up.stream
    reply = send(standin, up, client_headers)
    return Trip(up, reply, codec.response(reply.status_code, dict(reply.headers), reply.content, p,
                                          model_of(chat, p)))


@dataclass
class Streamed:
    up: UpstreamRequest
    status: int
    content_type: str
    include_usage: bool  # the client asked for the usage chunk
    translator: StreamTranslator
    raw: list[bytes] = field(default_factory=list)  # the provider's body as the network delivered it
    out: list[bytes] = field(default_factory=list)  # the translation of each of those reads, then finish()'s

    @property
    def body(self) -> bytes:
        return b"".join(self.raw)

    @property
    def translated(self) -> bytes:
        return b"".join(self.out)

    def events(self) -> Events:
        return openai_events(self.translated)


def stream(codec: ProviderCodec, chat: dict[str, Any], p: Provider, standin: StandIn,
           client_headers: dict[str, str] = CLIENT_HEADERS) -> Streamed:
    """A streamed answer: request() (with `stream: true`) -> the stand-in -> stream().feed()
    for each read of the body -> finish()."""
    chat = {**chat, "stream": True}
    up = codec.request(chat, p, client_headers)
    assert up.stream
    with httpx.stream(up.method, standin.url + up.path, headers=upstream_headers(up, client_headers),
                      content=up.body, timeout=10) as reply:
        assert reply.status_code == 200, reply.read()
        translator = codec.stream(p, model_of(chat, p), include_usage=wants_usage(chat))
        out = Streamed(up, reply.status_code, reply.headers.get("content-type", ""), wants_usage(chat), translator)
        for chunk in reply.iter_raw():
            out.raw.append(chunk)
            out.out.append(translator.feed(chunk))
        out.out.append(translator.finish())
    return out


def replay(codec: ProviderCodec, p: Provider, model: str, pieces: list[bytes], include_usage: bool) -> bytes:
    """A recorded stream fed again, cut into other pieces."""
    translator = codec.stream(p, model, include_usage=include_usage)
    return b"".join(translator.feed(piece) for piece in pieces) + translator.finish()


def assert_streamed(streamed: Streamed, text: str, tokens: tuple[int, int]) -> None:
    """A stream asked with include_usage, as a client must see it: the provider's body in
    several network reads, the first translated at once (the first token not held back),
    one id, the role first, the text, one finish "stop", the usage chunk last, [DONE]."""
    assert len(streamed.raw) > 2, "the stand-in sends its events one by one"
    assert streamed.out[0], "the first event is translated as it arrives, not held back"
    events = streamed.events()
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
    body, model, usage = streamed.body, p.model or "", streamed.include_usage
    expected = normalized(streamed.translated)
    assert expected[-1] == "[DONE]" and len(expected) > 4
    assert normalized(replay(codec, p, model, [body[i:i + 1] for i in range(len(body))], usage)) == expected
    for cut in range(1, len(body)):
        assert normalized(replay(codec, p, model, [body[:cut], body[cut:]], usage)) == expected, cut
    rng = random.Random(30)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(body)), 6))
        pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
        assert normalized(replay(codec, p, model, pieces, usage)) == expected


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
    """The translated stream as the openai SDK decodes it. Every event is one `data:` line
    (no other field: OpenAI's streams have none) and nothing follows [DONE]."""
    blocks = data.decode().split("\n\n")
    assert blocks[-1] == "", f"the stream does not end with a blank line: {data[-80:]!r}"
    for block in blocks[:-1]:
        assert block.startswith("data: ") and "\n" not in block, f"not one data line: {block!r}"
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


def validate_answer(answer: Answer) -> ChatCompletion:
    assert answer.status == 200, answer.body
    return ChatCompletion.model_validate(answer.body)


def _sdk_client(handle: Any) -> openai.OpenAI:
    return openai.OpenAI(api_key="the-client-s-key", base_url="http://gateway.test/v1", max_retries=0,
                         http_client=httpx2.Client(transport=httpx2.MockTransport(handle)))


def openai_client(status: int, body: bytes, content_type: str = "application/json") -> openai.OpenAI:
    """An openai SDK client whose every request gets this answer: how a client of the
    gateway reads what the codec produced."""
    return _sdk_client(lambda request: httpx2.Response(status, content=body, headers={"content-type": content_type}))


@contextmanager
def sdk(codec: ProviderCodec, p: Provider, standin: StandIn) -> Iterator[openai.OpenAI]:
    """The official client, its requests translated by the codec and sent to the stand-in."""
    upstream = httpx.Client(base_url=standin.url, timeout=10)

    def handle(request: httpx2.Request) -> httpx2.Response:
        chat = json.loads(request.read())
        headers = dict(request.headers)
        try:
            up = codec.request(chat, p, headers)
        except ProviderError as e:
            return _json(e.answer())
        got = upstream.send(upstream.build_request(up.method, up.path, headers=upstream_headers(up, headers),
                                                   content=up.body), stream=True)
        if got.status_code >= 400 or not up.stream:
            body = got.read()
            got.close()
            return _json(codec.response(got.status_code, dict(got.headers), body, p, model_of(chat, p)))
        translator = codec.stream(p, model_of(chat, p), include_usage=wants_usage(chat))

        def relay() -> Iterator[bytes]:
            try:
                for chunk in got.iter_raw():
                    if out := translator.feed(chunk):
                        yield out
                yield translator.finish()
            finally:
                got.close()

        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=relay())

    client = _sdk_client(handle)
    try:
        yield client
    finally:
        client.close()
        upstream.close()


def ask(client: openai.OpenAI, messages: list[ChatCompletionMessageParam]) -> tuple[str | None, str, int | None]:
    """Through the SDK: the answer's text, the text of the same asked as a stream (with
    usage) and the stream's total tokens."""
    completion = client.chat.completions.create(model="gpt-4o", messages=messages)
    stream_ = client.chat.completions.create(model="gpt-4o", messages=messages, stream=True,
                                             stream_options={"include_usage": True})
    chunks = list(stream_)
    usage = chunks[-1].usage
    return (completion.choices[0].message.content,
            "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
            usage.total_tokens if usage else None)


def _json(answer: Answer) -> httpx2.Response:
    return httpx2.Response(answer.status, content=answer.encode(), headers={"content-type": "application/json"})
