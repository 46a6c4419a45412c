"""What a client using the official openai SDK sees of the policy: rejections as the
SDK's error classes with the policy's message, masked answers and streams that parse
with strict response validation, a stream ended by a guard as an APIError.

The SDK talks to a handler wired as the AI extension wires the policy (apply_request
before the provider, ResponseGuard on its answer), through httpx's mock transport."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import httpx2
import openai
import pytest

from lychgate.ai.config import RouteSettings
from lychgate.ai.policy import ResponseGuard, apply_request
from lychgate.ai.rejection import Rejection

Client = Callable[..., openai.AsyncOpenAI]


def completion(text: str) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": text, "refusal": None}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}


def chunks(text: str) -> list[dict[str, Any]]:
    """The answer as a provider streams it: a role chunk, 3 characters a chunk, the end."""
    def one(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
                "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return ([one({"role": "assistant", "content": ""})] + [one({"content": text[i:i + 3]})
            for i in range(0, len(text), 3)] + [one({}, "stop")])


def sse(events: list[Any]) -> bytes:
    return b"".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events)


def gateway(settings: RouteSettings, answer: str, session: aiohttp.ClientSession | None) -> httpx2.MockTransport:
    async def handle(request: httpx2.Request) -> httpx2.Response:
        chat = json.loads(request.content)
        out = await apply_request(settings, chat, headers=dict(request.headers), session=session)
        if isinstance(out, Rejection):
            return httpx2.Response(out.status, content=out.encode(), headers={"content-type": "application/json"})
        guard = ResponseGuard(settings)
        if not chat.get("stream"):
            checked = await guard.check(completion(answer))
            if isinstance(checked, Rejection):
                return httpx2.Response(checked.status, content=checked.encode(),
                                       headers={"content-type": "application/json"})
            return httpx2.Response(200, json=checked)
        events: list[Any] = []
        for c in chunks(answer):
            events.extend(await guard.feed(c))
            if guard.rejection:
                break
        else:
            events += [*await guard.finish(), "[DONE]"]
        return httpx2.Response(200, content=sse(events), headers={"content-type": "text/event-stream"})
    return httpx2.MockTransport(handle)


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    made: list[openai.AsyncOpenAI] = []

    def make(settings: RouteSettings, answer: str,
             session: aiohttp.ClientSession | None = None) -> openai.AsyncOpenAI:
        c = openai.AsyncOpenAI(api_key="sk-client", base_url="http://gateway.test/v1", max_retries=0,
                               _strict_response_validation=True,
                               http_client=httpx2.AsyncClient(transport=gateway(settings, answer, session)))
        made.append(c)
        return c

    yield make
    for c in made:
        await c.close()


MESSAGES: Any = [{"role": "user", "content": "My SSN is 123-45-6789, keep it safe"}]


async def test_a_rejected_prompt_is_the_sdks_permission_denied(client: Client) -> None:
    s = RouteSettings("r", prompt_guard={"request": {"regex": {"action": "REJECT", "builtins": ["SSN"]}}})
    with pytest.raises(openai.PermissionDeniedError) as err:
        await client(s, "unused").chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert str(err.value) == "Error code: 403 - The request was rejected due to inappropriate content"
    assert err.value.code == "content_policy_violation"


async def test_a_custom_status_is_the_sdks_class_for_it(client: Client) -> None:
    s = RouteSettings("r", prompt_guard={"request": {
        "customResponse": {"message": "No personal data, please", "statusCode": 400},
        "regex": {"action": "REJECT", "builtins": ["SSN"]}}})
    with pytest.raises(openai.BadRequestError, match="No personal data, please"):
        await client(s, "unused").chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)


async def test_a_guard_that_cannot_be_asked_is_a_server_error(
        client: Client, session: aiohttp.ClientSession) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = RouteSettings("r", prompt_guard={"request": {"webhook": {"endpoint": {"host": "127.0.0.1", "port": port}}}})
    with pytest.raises(openai.InternalServerError) as err:
        await client(s, "unused", session).chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert err.value.status_code == 503
    assert str(err.value) == ("Error code: 503 - The request could not be checked: "
                              "the request guard webhook is unavailable")


async def test_masked_prompt_and_answer_parse_strictly(client: Client) -> None:
    s = RouteSettings("r", prompt_guard={"request": {"regex": {"builtins": ["SSN"]}},
                                         "response": {"regex": {"builtins": ["CREDIT_CARD"]}}})
    answer = await client(s, "Your card 4111 1111 1111 1111 is saved.").chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES)
    assert answer.choices[0].message.content == "Your card <CREDIT_CARD> is saved."


async def test_a_masked_stream_parses_chunk_by_chunk(client: Client) -> None:
    s = RouteSettings("r", prompt_guard={"response": {"regex": {"builtins": ["CREDIT_CARD", "EMAIL"]}}})
    stream = await client(s, "Card 4111 1111 1111 1111, mail jane@example.com.").chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream])
    assert text == "Card <CREDIT_CARD>, mail <EMAIL_ADDRESS>."


async def test_a_stream_a_guard_ends_raises_the_sdks_api_error(client: Client) -> None:
    s = RouteSettings("r", prompt_guard={"response": {
        "response": {"message": "The answer contained an SSN"},
        "regex": {"action": "REJECT", "builtins": ["SSN"]}}})
    stream = await client(s, "Sure. It is 123-45-6789, as asked.").chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "what is my SSN?"}], stream=True)
    received = []
    with pytest.raises(openai.APIError, match="The answer contained an SSN"):
        async for c in stream:
            received.append(c.choices[0].delta.content or "")
    assert "".join(received) == "Sure. It is "  # what came before the SSN, nothing of it
