"""promptGuard webhook: a real webhook server on loopback speaking kgateway's guardrail
webhook API (pass / mask / reject), the headers it is sent, and failing closed when
it cannot be asked."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from lychgate.ai.config import RouteSettings
from lychgate.ai.policy import ResponseGuard, apply_request
from lychgate.ai.rejection import Rejection
from tests.ai.conftest import Serve


class Webhook:
    """A guardrail webhook as kgateway documents it: POST /request and /response."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str], Any]] = []
        self.status = 200
        self.delay = 0.0
        self.raw: bytes | None = None  # answer these bytes instead
        self.drop_one = False  # mask with one text too few

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/request", self.handle)
        app.router.add_post("/response", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        kind = request.path.strip("/")
        self.calls.append((kind, {k.lower(): v for k, v in request.headers.items()}, body))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.raw is not None or self.status != 200:
            return web.Response(status=self.status, body=self.raw or b"{}")
        # The request schema of kgateway's API (GuardrailsPromptRequest / GuardrailsResponseRequest).
        if kind == "request":
            items = body["body"]["messages"]
            texts = [m["content"] for m in items]
            assert all(set(m) == {"role", "content"} and isinstance(m["role"], str) for m in items)
        else:
            items = body["body"]["choices"]
            texts = [c["message"]["content"] for c in items]
            assert all(set(c["message"]) == {"role", "content"} for c in items)
        assert all(isinstance(t, str) for t in texts)
        if any("forbidden" in t for t in texts):
            return web.json_response({"action": {"body": "Forbidden topic", "status_code": 422,
                                                 "reason": "the topic is forbidden"}})
        if any("secret" in t for t in texts):
            masked = [t.replace("secret", "[hidden]") for t in texts][: len(texts) - self.drop_one]
            key = "messages" if kind == "request" else "choices"
            out = ([{"role": m["role"], "content": t} for m, t in zip(items, masked, strict=False)]
                   if kind == "request" else [{"message": {"role": "assistant", "content": t}} for t in masked])
            return web.json_response({"action": {"body": {key: out}, "reason": "masked a secret"}})
        return web.json_response({"action": {"reason": "nothing to see"}})


@pytest.fixture
async def hook(serve: Serve) -> tuple[Webhook, dict[str, Any]]:
    wh = Webhook()
    url = await serve(wh.app())
    host, port = url.removeprefix("http://").split(":")
    return wh, {"host": host, "port": int(port)}


def chat(*contents: str) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": c} for c in contents]}


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_pass_leaves_the_prompt_and_the_webhook_sees_kgateways_body(
        hook: tuple[Webhook, dict[str, Any]], session: aiohttp.ClientSession) -> None:
    wh, endpoint = hook
    s = RouteSettings("r", prompt_enrichment={"prepend": [{"role": "SYSTEM", "content": "Be nice."}]},
                      prompt_guard={"request": {"webhook": {"endpoint": endpoint}}})
    out = await apply_request(s, chat("Hello there"), session=session)
    assert out == {"model": "gpt-4o-mini", "messages": [{"role": "system", "content": "Be nice."},
                                                        {"role": "user", "content": "Hello there"}]}
    assert wh.calls[0][2] == {"body": {"messages": [{"role": "system", "content": "Be nice."},
                                                    {"role": "user", "content": "Hello there"}]}}


async def test_mask_replaces_the_contents(hook: tuple[Webhook, dict[str, Any]],
                                          session: aiohttp.ClientSession) -> None:
    _, endpoint = hook
    s = RouteSettings("r", prompt_guard={"request": {"webhook": {"endpoint": endpoint}}})
    body = {"model": "m", "messages": [{"role": "user", "content": "my secret plan"},
                                       {"role": "user", "content": [{"type": "text", "text": "a secret too"}]}]}
    out = await apply_request(s, body, session=session)
    assert not isinstance(out, Rejection)
    assert out["messages"][0] == {"role": "user", "content": "my [hidden] plan"}
    assert out["messages"][1]["content"] == [{"type": "text", "text": "a [hidden] too"}]


async def test_reject_answers_with_the_webhooks_status_and_message(
        hook: tuple[Webhook, dict[str, Any]], session: aiohttp.ClientSession) -> None:
    _, endpoint = hook
    s = RouteSettings("r", prompt_guard={"request": {"webhook": {"endpoint": endpoint}}})
    r = await apply_request(s, chat("a forbidden question"), session=session)
    assert isinstance(r, Rejection)
    assert (r.status, r.message, r.code) == (422, "Forbidden topic", "content_policy_violation")
    assert "the topic is forbidden" in r.detail


@pytest.mark.parametrize(("endpoint_key", "headers_key"), [
    ("endpoint", "forwardHeaderMatches"),  # kgateway's newer names
    ("host", "forwardHeaders"),  # its older ones
])
async def test_only_the_selected_headers_are_forwarded(
        hook: tuple[Webhook, dict[str, Any]], session: aiohttp.ClientSession,
        endpoint_key: str, headers_key: str) -> None:
    wh, endpoint = hook
    s = RouteSettings("r", prompt_guard={"request": {"webhook": {
        endpoint_key: endpoint,
        headers_key: [{"name": "X-User-Id", "value": "ignored"},
                      {"type": "RegularExpression", "name": "x-team-.*", "value": ".*"}]}}})
    client_headers = {"x-user-id": "alice", "x-team-a": "search", "x-other": "no",
                      "authorization": "Bearer sk-client", ":path": "/v1/chat/completions"}
    await apply_request(s, chat("hi"), headers=client_headers, session=session)
    sent = wh.calls[0][1]
    assert sent["x-user-id"] == "alice" and sent["x-team-a"] == "search"
    assert "authorization" not in sent and "x-other" not in sent and ":path" not in sent


async def test_the_regex_guard_sees_the_webhooks_mask(hook: tuple[Webhook, dict[str, Any]],
                                                      session: aiohttp.ClientSession) -> None:
    # kgateway's order: webhook, then regex, then moderation.
    _, endpoint = hook
    s = RouteSettings("r", prompt_guard={"request": {
        "customResponse": {"message": "masked text is not allowed"},
        "webhook": {"endpoint": endpoint},
        "regex": {"action": "REJECT", "matches": [{"pattern": r"\[hidden\]"}]}}})
    r = await apply_request(s, chat("my secret"), session=session)
    assert isinstance(r, Rejection) and r.message == "masked text is not allowed"


async def test_a_webhook_that_is_down_fails_closed(session: aiohttp.ClientSession) -> None:
    port = unused_port()
    s = RouteSettings("r", prompt_guard={"request": {"webhook": {"endpoint": {"host": "127.0.0.1", "port": port}}}})
    r = await apply_request(s, chat("hi"), session=session)
    assert isinstance(r, Rejection)
    assert (r.status, r.code) == (503, "guard_unavailable")
    assert r.message == "The request could not be checked: the request guard webhook is unavailable"
    assert str(port) not in r.message and str(port) in r.detail  # where: for the log, not the client


async def test_a_slow_webhook_fails_closed_at_the_timeout(hook: tuple[Webhook, dict[str, Any]],
                                                          session: aiohttp.ClientSession) -> None:
    wh, endpoint = hook
    wh.delay = 1
    s = RouteSettings("r", prompt_guard={"request": {"webhook": {"endpoint": endpoint}}})
    started = time.monotonic()
    r = await apply_request(s, chat("hi"), session=session, timeout=0.3)
    assert isinstance(r, Rejection) and r.status == 503
    assert time.monotonic() - started < 0.9


@pytest.mark.parametrize("broken", ["status", "not json", "short mask"])
async def test_an_answer_that_cannot_be_used_fails_closed(
        hook: tuple[Webhook, dict[str, Any]], session: aiohttp.ClientSession, broken: str) -> None:
    wh, endpoint = hook
    if broken == "status":
        wh.status = 500
    elif broken == "not json":
        wh.raw = b"<html>oops</html>"
    else:
        wh.drop_one = True
    s = RouteSettings("r", prompt_guard={"request": {"webhook": {"endpoint": endpoint}}})
    r = await apply_request(s, chat("a secret", "another secret"), session=session)
    assert isinstance(r, Rejection) and (r.status, r.code) == (503, "guard_unavailable")


def completion(*contents: str) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-4o-mini",
            "choices": [{"index": i, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": c, "refusal": None}}
                        for i, c in enumerate(contents)],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}


async def test_the_response_webhook_masks_a_whole_answer(hook: tuple[Webhook, dict[str, Any]],
                                                          session: aiohttp.ClientSession) -> None:
    wh, endpoint = hook
    s = RouteSettings("r", prompt_guard={"response": {
        "webhook": {"endpoint": endpoint, "forwardHeaderMatches": [{"name": "x-request-id", "value": "x"}]}}})
    guard = ResponseGuard(s, session=session, headers={"x-request-id": "abc", "server": "provider"})
    out = await guard.check(completion("the secret is 42", "no secret here"))
    assert not isinstance(out, Rejection)
    ChatCompletion.model_validate(out)
    assert [c["message"]["content"] for c in out["choices"]] == ["the [hidden] is 42", "no [hidden] here"]
    kind, headers, body = wh.calls[0]
    assert kind == "response" and headers.get("x-request-id") == "abc" and "server" not in headers
    assert body == {"body": {"choices": [{"message": {"role": "assistant", "content": "the secret is 42"}},
                                         {"message": {"role": "assistant", "content": "no secret here"}}]}}


def chunk(content: str | None, finish: str | None = None) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
            "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def test_a_streamed_answer_goes_to_the_webhook_a_sentence_at_a_time(
        hook: tuple[Webhook, dict[str, Any]], session: aiohttp.ClientSession) -> None:
    wh, endpoint = hook
    guard = ResponseGuard(RouteSettings("r", prompt_guard={"response": {"webhook": {"endpoint": endpoint},
                                                                        "regex": {"builtins": ["EMAIL"]}}}),
                          session=session)
    answer = ("The first sentence is long enough to be checked on its own. It keeps a secret "
              "for ops@example.com. And a short end")
    out: list[dict[str, Any]] = []
    for i in range(0, len(answer), 5):
        out.extend(await guard.feed(chunk(answer[i:i + 5])))
    out.extend(await guard.feed(chunk(None, finish="stop")))
    for c in out:
        ChatCompletionChunk.model_validate(c)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in out)
    assert text == ("The first sentence is long enough to be checked on its own. It keeps a [hidden] "
                    "for <EMAIL_ADDRESS>. And a short end")
    segments = [body["body"]["choices"][0]["message"]["content"] for _, _, body in wh.calls]
    assert segments == ["The first sentence is long enough to be checked on its own. ",
                        "It keeps a secret for ops@example.com. And a short end"]


async def test_a_response_webhook_that_is_down_ends_the_stream_with_an_error(
        session: aiohttp.ClientSession) -> None:
    s = RouteSettings("r", prompt_guard={"response": {"webhook": {"endpoint": {"host": "127.0.0.1",
                                                                               "port": unused_port()}}}})
    guard = ResponseGuard(s, session=session)
    assert (await guard.feed(chunk("Hello")))[0]["choices"][0]["delta"]["content"] == ""
    out = await guard.feed(chunk(" world.", finish="stop"))
    assert out == [{"error": {"message": "The response could not be checked: the response guard webhook "
                                         "is unavailable", "type": "server_error", "param": None,
                              "code": "guard_unavailable"}}]
    assert guard.rejection is not None and guard.rejection.status == 503
