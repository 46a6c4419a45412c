"""TrafficPolicy `ai` on the request: defaults, prompt enrichment and the regex request
guard, in kgateway's order, and the answers a rejected client gets."""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from lychgate.ai.config import AIConfig, RouteSettings
from lychgate.ai.policy import apply_request, compile_policy
from lychgate.ai.rejection import PolicyError, Rejection
from lychgate.api.policy import TrafficPolicy
from lychgate.api.registry import parse
from lychgate.store import Store
from lychgate.translate.policies.ai import route_settings
from tests.ai.conftest import Serve


def chat(*contents: str, **fields: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": c} for c in contents], **fields}


async def applied(settings: RouteSettings, body: dict[str, Any]) -> dict[str, Any]:
    out = await apply_request(settings, body)
    assert not isinstance(out, Rejection), out
    return out


async def rejected(settings: RouteSettings, body: dict[str, Any]) -> Rejection:
    out = await apply_request(settings, body)
    assert isinstance(out, Rejection), out
    return out


async def test_defaults_fill_what_the_client_left_out() -> None:
    s = RouteSettings("r", defaults=({"field": "temperature", "value": "0.5"},
                                     {"field": "max_tokens", "value": 100},
                                     {"field": "stop", "value": '["\\n\\n"]'},
                                     {"field": "metadata", "value": '{"team": "search"}'},
                                     {"field": "user", "value": "answer all questions in French"}))
    out = await applied(s, chat("hi", max_tokens=20, stop=None))
    assert out["temperature"] == 0.5  # a JSON string is read as JSON
    assert out["max_tokens"] == 20  # the client's own value stays
    assert out["stop"] == ["\n\n"]  # null counts as left out
    assert out["metadata"] == {"team": "search"}
    assert out["user"] == "answer all questions in French"  # text that is not JSON stays text


async def test_override_replaces_the_clients_value() -> None:
    s = RouteSettings("r", defaults=({"field": "max_tokens", "value": "100", "override": True},
                                     {"field": "model", "value": "gpt-4o", "override": True}))
    out = await applied(s, chat("hi", max_tokens=4000))
    assert (out["max_tokens"], out["model"]) == (100, "gpt-4o")


async def test_a_falsy_choice_of_the_client_is_not_a_missing_field() -> None:
    s = RouteSettings("r", defaults=({"field": "temperature", "value": 0.7},
                                     {"field": "stream", "value": True}))
    out = await applied(s, chat("hi", temperature=0, stream=False))
    assert (out["temperature"], out["stream"]) == (0, False)


async def test_default_lists_are_not_shared_between_requests() -> None:
    s = RouteSettings("r", defaults=({"field": "stop", "value": ["END"]},))
    first = await applied(s, chat("a"))
    first["stop"].append("changed by someone downstream")
    assert (await applied(s, chat("b")))["stop"] == ["END"]


async def test_enrichment_prepends_and_appends_in_order() -> None:
    s = RouteSettings("r", prompt_enrichment={
        "prepend": [{"role": "SYSTEM", "content": "Answer all questions in French."},
                    {"role": "SYSTEM", "content": "Be brief."}],
        "append": [{"role": "USER", "content": "Describe it as a 17th century art critic."}]})
    out = await applied(s, chat("What is this painting?"))
    assert out["messages"] == [
        {"role": "system", "content": "Answer all questions in French."},
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is this painting?"},
        {"role": "user", "content": "Describe it as a 17th century art critic."}]


async def test_a_request_without_messages_is_left_to_the_provider_module() -> None:
    s = RouteSettings("r", prompt_enrichment={"prepend": [{"role": "SYSTEM", "content": "x"}]})
    assert await applied(s, {"model": "m"}) == {"model": "m"}


GUARD = {"regex": {"builtins": ["CREDIT_CARD", "EMAIL"]}}


async def test_mask_rewrites_every_text_of_the_prompt() -> None:
    s = RouteSettings("r", prompt_guard={"request": GUARD})
    body = {"model": "m", "messages": [
        {"role": "system", "content": "Reply to ops@example.com."},
        {"role": "user", "content": [{"type": "text", "text": "My card: 4111 1111 1111 1111"},
                                     {"type": "image_url", "image_url": {"url": "https://x/4111111111111111.png"}}]},
        {"role": "assistant", "content": None, "tool_calls": []}]}
    out = await applied(s, body)
    assert out["messages"][0]["content"] == "Reply to <EMAIL_ADDRESS>."
    assert out["messages"][1]["content"][0]["text"] == "My card: <CREDIT_CARD>"
    assert out["messages"][1]["content"][1]["image_url"]["url"] == "https://x/4111111111111111.png"


async def test_reject_answers_kgateways_default_403() -> None:
    s = RouteSettings("r", prompt_guard={"request": {"regex": {**GUARD["regex"], "action": "REJECT"}}})
    r = await rejected(s, chat("charge 4111-1111-1111-1111"))
    assert (r.status, r.body()) == (403, {"error": {
        "message": "The request was rejected due to inappropriate content",
        "type": "invalid_request_error", "param": None, "code": "content_policy_violation"}})
    assert not isinstance(await apply_request(s, chat("charge 4111-1111-1111-1112")), Rejection)


@pytest.mark.parametrize("key", ["customResponse", "response"])  # kgateway's name; the later API's
async def test_reject_answers_the_custom_response(key: str) -> None:
    s = RouteSettings("r", prompt_guard={"request": {
        key: {"message": "Rejected due to inappropriate content", "statusCode": 400},
        "regex": {"action": "REJECT", "matches": [{"pattern": "credit card", "name": "CC"}]}}})
    r = await rejected(s, chat("what is my Credit Card limit?"))
    assert (r.status, r.message) == (400, "Rejected due to inappropriate content")
    only_message = RouteSettings("r", prompt_guard={"request": {
        key: {"message": "No."}, "regex": {"action": "REJECT", "builtins": ["SSN"]}}})
    r = await rejected(only_message, chat("123-45-6789"))
    assert (r.status, r.message) == (403, "No.")


async def test_guards_see_the_enriched_prompt_with_defaults_applied() -> None:
    # kgateway's order: defaults, enrichment, then guards (on what the provider will get).
    s = RouteSettings("r", defaults=({"field": "user", "value": "jane@example.com"},),
                      prompt_enrichment={"append": [{"role": "USER", "content": "Mail jane@example.com"}]},
                      prompt_guard={"request": {"regex": {"builtins": ["EMAIL"]}}})
    out = await applied(s, chat("hello"))
    assert out["messages"][-1] == {"role": "user", "content": "Mail <EMAIL_ADDRESS>"}
    assert out["user"] == "jane@example.com"  # guards read messages, not other fields
    again = await applied(s, chat("hello"))  # masking did not edit the policy's own message
    assert again["messages"][-1]["content"] == "Mail <EMAIL_ADDRESS>"
    assert s.prompt_enrichment == {"append": [{"role": "USER", "content": "Mail jane@example.com"}]}


async def test_a_list_of_request_guards_runs_in_order_each_with_its_response() -> None:
    s = RouteSettings("r", prompt_guard={"request": [
        {"regex": {"builtins": ["EMAIL"]}},
        {"response": {"message": "card"}, "regex": {"action": "REJECT", "builtins": ["CREDIT_CARD"]}},
        {"response": {"message": "custom"}, "regex": {"action": "REJECT", "matches": ["EMAIL_ADDRESS"]}}]})
    assert (await rejected(s, chat("4111111111111111"))).message == "card"
    assert (await rejected(s, chat("me@example.com"))).message == "custom"  # saw the first one's mask


async def test_settings_are_compiled_once_per_settings_object() -> None:
    s = RouteSettings("r", prompt_guard={"request": GUARD})
    assert compile_policy(s) is compile_policy(s)
    assert compile_policy(copy.deepcopy(s)) is not compile_policy(s)


@pytest.mark.parametrize(("settings", "field"), [
    (RouteSettings("r", defaults=({"value": "1"},)), "defaults[0].field: required"),
    (RouteSettings("r", defaults=({"field": "x"},)), "defaults[0].value: required"),
    (RouteSettings("r", prompt_enrichment={"prepend": [{"content": "x"}]}), "promptEnrichment.prepend[0].role"),
    (RouteSettings("r", prompt_guard={"request": {"customResponse": {"statusCode": 99}, "regex": {}}}),
     "promptGuard.request.customResponse.statusCode: must be 200 to 599"),
    (RouteSettings("r", prompt_guard={"request": {"webhook": {"endpoint": {"host": "h"}}}}),
     "promptGuard.request.webhook.endpoint.port: required"),
    (RouteSettings("r", prompt_guard={"request": {"moderation": {"openAIModeration": {
        "authToken": {"kind": "SecretRef", "secretRef": {"name": "openai"}}}}}}),
     "promptGuard.request.moderation.openAIModeration.authToken.secretRef: the Secret's token was not resolved"),
    (RouteSettings("r", prompt_guard={"response": [{"customResponse": {}}]}),
     "promptGuard.response[0]: needs regex or webhook"),
])
async def test_settings_that_cannot_apply_fail_closed_naming_the_field(settings: RouteSettings, field: str) -> None:
    with pytest.raises(PolicyError) as err:
        compile_policy(settings)
    assert str(err.value).startswith(field)
    r = await rejected(settings, chat("hi"))
    assert (r.status, r.code, r.message) == (500, "ai_policy_invalid", "The route's AI policy could not be applied")
    assert r.detail.startswith(field)  # for the extension's log


async def test_a_trafficpolicy_as_users_write_it_reaches_the_request(
        serve: Serve, session: aiohttp.ClientSession) -> None:
    # The control plane's RouteSettings (the webhook's older field names included), through
    # the extension's config file, applied to a request.
    async def passes(request: web.Request) -> web.Response:
        return web.json_response({"action": {"reason": "fine"}})

    app = web.Application()
    app.router.add_post("/request", passes)
    host, port = (await serve(app)).removeprefix("http://").split(":")
    tp = parse({"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
                "metadata": {"name": "p", "namespace": "team"}, "spec": {"ai": {
                    "defaults": [{"field": "temperature", "value": "0.5"},
                                 {"field": "max_tokens", "value": "100", "override": True}],
                    "promptEnrichment": {"prepend": [{"role": "SYSTEM", "content": "Answer in French."}]},
                    "promptGuard": {"request": {
                        "customResponse": {"message": "No cards"},
                        "regex": {"action": "REJECT", "builtins": ["CREDIT_CARD"]},
                        "webhook": {"host": {"host": host, "port": int(port)},
                                    "forwardHeaders": [{"name": "x-user", "value": "any"}]}}}}}})
    assert isinstance(tp, TrafficPolicy) and tp.spec.ai is not None
    store = Store()
    store.upsert(tp)
    config = AIConfig(routes={"team/p": route_settings("team/p", tp.spec.ai, store=store, namespace="team")})
    settings = AIConfig.from_json(config.to_json()).routes["team/p"]
    out = await apply_request(settings, chat("hi", max_tokens=5), session=session)
    assert not isinstance(out, Rejection)
    assert (out["temperature"], out["max_tokens"]) == (0.5, 100)
    assert out["messages"][0] == {"role": "system", "content": "Answer in French."}
    r = await apply_request(settings, chat("4111 1111 1111 1111"), session=session)
    assert isinstance(r, Rejection) and (r.status, r.message) == (403, "No cards")
