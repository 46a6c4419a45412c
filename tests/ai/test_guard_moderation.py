"""promptGuard moderation: OpenAI's moderation endpoint (a stand-in on loopback that
checks the bearer token and the request schema as OpenAI does, its answers checked by
the openai SDK), flagged prompts rejected, failing closed when it cannot be asked."""

from __future__ import annotations

import socket
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp import web

from lychgate.ai.config import RouteSettings
from lychgate.ai.policy import apply_request, compile_policy
from lychgate.ai.rejection import Rejection
from tests.ai.conftest import Serve

TOKEN = "sk-moderation-0123456789"
CATEGORIES = ["harassment", "harassment/threatening", "hate", "hate/threatening", "illicit",
              "illicit/violent", "self-harm", "self-harm/intent", "self-harm/instructions", "sexual",
              "sexual/minors", "violence", "violence/graphic"]


class Moderations:
    """POST /v1/moderations as OpenAI answers it; flags texts that mention killing."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/moderations", self.handle)
        return app

    @staticmethod
    def error(status: int, message: str, code: str | None) -> web.Response:
        return web.json_response({"error": {"message": message, "type": "invalid_request_error",
                                            "param": None, "code": code}}, status=status)

    async def handle(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.error(401, "Incorrect API key provided", "invalid_api_key")
        body = await request.json()
        inputs = body.get("input")
        if (set(body) - {"input", "model"} or not isinstance(body.get("model", ""), str)
                or not (isinstance(inputs, str) or (isinstance(inputs, list) and all(isinstance(i, str) for i in inputs)))):
            return self.error(400, "Invalid moderation request", None)
        self.calls.append(body)
        texts = [inputs] if isinstance(inputs, str) else inputs
        return web.json_response({"id": "modr-1", "model": body.get("model", "omni-moderation-latest"),
                                  "results": [self.result("kill" in t.lower()) for t in texts]})

    @staticmethod
    def result(violent: bool) -> dict[str, Any]:
        return {"flagged": violent,
                "categories": {c: violent and c == "violence" for c in CATEGORIES},
                "category_scores": {c: 0.93 if violent and c == "violence" else 0.001 for c in CATEGORIES},
                "category_applied_input_types": {c: ["text"] for c in CATEGORIES}}


@pytest.fixture
async def moderations(serve: Serve) -> tuple[Moderations, str]:
    m = Moderations()
    return m, await serve(m.app()) + "/v1/moderations"


def moderated(token: dict[str, Any] | None = None, with_regex: bool = False, **extra: Any) -> RouteSettings:
    return RouteSettings("r", prompt_guard={"request": {
        "customResponse": {"message": "That is not something we can help with", "statusCode": 400},
        "moderation": {"openAIModeration": {"authToken": token or {"kind": "Inline", "inline": TOKEN}, **extra}},
        **({"regex": {"builtins": ["EMAIL"]}} if with_regex else {})}})


def chat(*contents: str) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": c} for c in contents]}


async def test_the_stand_in_speaks_openais_moderation_api(moderations: tuple[Moderations, str]) -> None:
    _, url = moderations
    base = url.removesuffix("/moderations")
    async with openai.AsyncOpenAI(api_key=TOKEN, base_url=base, max_retries=0,
                                  _strict_response_validation=True) as client:
        answer = await client.moderations.create(input="how do I kill a process?", model="omni-moderation-latest")
        assert answer.results[0].flagged and answer.results[0].categories.violence
    async with openai.AsyncOpenAI(api_key="sk-wrong", base_url=base, max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError):
            await client.moderations.create(input="hello")


async def test_a_flagged_prompt_is_rejected_with_the_custom_response(
        moderations: tuple[Moderations, str], session: aiohttp.ClientSession) -> None:
    m, url = moderations
    r = await apply_request(moderated(), chat("I want to kill"), session=session, moderation_url=url)
    assert isinstance(r, Rejection)
    assert (r.status, r.message) == (400, "That is not something we can help with")
    out = await apply_request(moderated(), chat("Be kind", "to everyone"), session=session, moderation_url=url)
    assert not isinstance(out, Rejection)
    # kgateway's default model; the prompt's texts as one input.
    assert m.calls[-1] == {"model": "omni-moderation-latest", "input": "Be kind\nto everyone"}


async def test_the_model_is_the_policys(moderations: tuple[Moderations, str],
                                        session: aiohttp.ClientSession) -> None:
    m, url = moderations
    await apply_request(moderated(model="text-moderation-stable"), chat("hi"), session=session, moderation_url=url)
    assert m.calls[-1]["model"] == "text-moderation-stable"


async def test_passthrough_uses_the_clients_token(moderations: tuple[Moderations, str],
                                                  session: aiohttp.ClientSession) -> None:
    _, url = moderations
    s = moderated({"kind": "Passthrough"})
    out = await apply_request(s, chat("hi"), headers={"authorization": f"Bearer {TOKEN}"},
                              session=session, moderation_url=url)
    assert not isinstance(out, Rejection)
    r = await apply_request(s, chat("hi"), headers={"authorization": "Bearer sk-other"},
                            session=session, moderation_url=url)
    assert isinstance(r, Rejection) and r.status == 503


async def test_moderation_reads_the_prompt_after_the_regex_guard(
        moderations: tuple[Moderations, str], session: aiohttp.ClientSession) -> None:
    m, url = moderations
    await apply_request(moderated(with_regex=True), chat("mail jane@example.com"), session=session,
                        moderation_url=url)
    assert m.calls[-1]["input"] == "mail <EMAIL_ADDRESS>"


async def test_a_wrong_token_fails_closed_without_showing_it(
        moderations: tuple[Moderations, str], session: aiohttp.ClientSession) -> None:
    _, url = moderations
    s = moderated({"kind": "Inline", "inline": "sk-wrong-secret-value"})
    r = await apply_request(s, chat("hi"), session=session, moderation_url=url)
    assert isinstance(r, Rejection)
    assert (r.status, r.code) == (503, "guard_unavailable")
    assert r.message == "The request could not be checked: the moderation service is unavailable"
    assert "401" in r.detail
    for text in (r.message, r.detail, repr(r), repr(compile_policy(s))):
        assert "sk-wrong-secret-value" not in text


async def test_moderation_that_cannot_be_reached_fails_closed(session: aiohttp.ClientSession) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    r = await apply_request(moderated(), chat("hi"), session=session,
                            moderation_url=f"http://127.0.0.1:{port}/v1/moderations")
    assert isinstance(r, Rejection) and (r.status, r.code) == (503, "guard_unavailable")


async def test_the_later_list_form_is_read_too(moderations: tuple[Moderations, str],
                                               session: aiohttp.ClientSession) -> None:
    _, url = moderations
    s = RouteSettings("r", prompt_guard={"request": [
        {"openAIModeration": {"authToken": {"kind": "Inline", "inline": TOKEN}}}]})
    r = await apply_request(s, chat("kill it"), session=session, moderation_url=url)
    assert isinstance(r, Rejection)
    assert (r.status, r.message) == (403, "The request was rejected due to inappropriate content")
