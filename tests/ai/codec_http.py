"""Running a provider codec over real HTTP, as the extension does per attempt: what
`request()` builds goes to a stand-in with httpx (the client's headers minus the ones the
codec removes, plus the ones it sets), and the stand-in's answer goes back through
`response()`, or, streamed, through `stream()` chunk by chunk as httpx receives it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import httpx2  # the openai SDK's HTTP client
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from lychgate.ai.config import Provider
from lychgate.ai.providers.base import Answer, ProviderCodec, StreamTranslator, UpstreamRequest
from tests.ai.standins import StandIn

CLIENT_HEADERS = {"authorization": "Bearer gateway-client-key", "content-type": "application/json",
                  "user-agent": "OpenAI/Python"}


def upstream_headers(up: UpstreamRequest, client_headers: dict[str, str]) -> dict[str, str]:
    headers = {k: v for k, v in client_headers.items() if k.lower() not in up.remove_headers}
    return {**headers, **up.headers}


@dataclass
class Streamed:
    """A translated stream: what each received chunk produced, and the whole."""

    status: int
    outputs: list[bytes] = field(default_factory=list)  # one per chunk fed, then finish()'s
    translator: StreamTranslator | None = None

    @property
    def body(self) -> bytes:
        return b"".join(self.outputs)

    def events(self) -> list[str]:
        return sse_data(self.body)

    def chunks(self) -> list[ChatCompletionChunk]:
        """Every event but [DONE], validated by the openai SDK's chunk type."""
        return [ChatCompletionChunk.model_validate(json.loads(e)) for e in self.events() if e != "[DONE]"]

    def content(self) -> str:
        return "".join(c.choices[0].delta.content or "" for c in self.chunks() if c.choices)


def sse_data(body: bytes) -> list[str]:
    """The `data:` of each event of an OpenAI stream (no other field is expected there)."""
    events = body.decode().split("\n\n")
    assert events[-1] == "", f"the stream does not end with a blank line: {body[-80:]!r}"
    out = []
    for event in events[:-1]:
        assert event.startswith("data: ") and "\n" not in event, f"not one data line: {event!r}"
        out.append(event[len("data: "):])
    return out


def call(codec: ProviderCodec, chat: dict[str, Any], provider: Provider, standin: StandIn,
         client_headers: dict[str, str] = CLIENT_HEADERS) -> Answer:
    """A whole answer: request() -> the stand-in -> response()."""
    up = codec.request(chat, provider, client_headers)
    assert not up.stream
    reply = httpx.request(up.method, standin.url + up.path, headers=upstream_headers(up, client_headers),
                          content=up.body, timeout=10)
    return codec.response(reply.status_code, dict(reply.headers), reply.content, provider, str(chat.get("model")))


def stream(codec: ProviderCodec, chat: dict[str, Any], provider: Provider, standin: StandIn,
           client_headers: dict[str, str] = CLIENT_HEADERS, include_usage: bool = False,
           split: int | None = None) -> Streamed:
    """A streamed answer: request() -> the stand-in -> stream().feed() per received chunk
    (or per `split` bytes of it, to cut events anywhere) -> finish()."""
    up = codec.request(chat, provider, client_headers)
    assert up.stream
    with httpx.stream(up.method, standin.url + up.path, headers=upstream_headers(up, client_headers),
                      content=up.body, timeout=10) as reply:
        out = Streamed(reply.status_code)
        assert reply.status_code == 200, reply.read()
        translator = out.translator = codec.stream(provider, str(chat.get("model")), include_usage=include_usage)
        for chunk in reply.iter_raw():
            for i in range(0, len(chunk), split or len(chunk)):
                out.outputs.append(translator.feed(chunk[i:i + (split or len(chunk))]))
        out.outputs.append(translator.finish())
    return out


def openai_client(status: int, body: bytes, content_type: str = "application/json") -> openai.OpenAI:
    """An openai SDK client whose every request gets this answer: how a client of the
    gateway reads what the codec produced."""
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, content=body, headers={"content-type": content_type})

    return openai.OpenAI(api_key="k", base_url="http://gateway.test/v1", max_retries=0,
                         http_client=httpx2.Client(transport=httpx2.MockTransport(answer)))


def validate_answer(answer: Answer) -> ChatCompletion:
    assert answer.status == 200, answer.body
    return ChatCompletion.model_validate(answer.body)
