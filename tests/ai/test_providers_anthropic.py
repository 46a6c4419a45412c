"""The anthropic codec against the Anthropic stand-in over real HTTP: requests compared
with what the anthropic SDK sends for the same conversation, answers and every streamed
chunk read by the openai SDK's types (and its client, for errors and streams)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import anthropic
import httpx
import openai
import pytest
from anthropic.types import RawMessageStreamEvent
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from pydantic import TypeAdapter

from lychgate.ai.config import Provider
from lychgate.ai.providers import CODECS
from lychgate.ai.providers.anthropic import DEFAULT_MAX_TOKENS
from lychgate.ai.providers.base import ProviderError
from tests.ai import roundtrip as rt
from tests.ai.standin_anthropic import AnthropicStandIn, prompt_tokens
from tests.ai.standins import count_tokens

ANTHROPIC = CODECS["anthropic"]
CHAT: dict[str, Any] = {"model": "claude-sonnet-4-6",
                        "messages": [{"role": "system", "content": "You are terse."},
                                     {"role": "user", "content": "Say hello to the gateway"}]}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The current weather of a place",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}]
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@pytest.fixture(scope="module")
def standin() -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn(key="sk-ant-provider") as s:
        yield s


@pytest.fixture(autouse=True)
def _reset(standin: AnthropicStandIn) -> None:
    standin.recover()
    standin.stream_error_after = None


def provider(**kw: object) -> Provider:
    return replace(Provider(id="default/llm/claude", kind="anthropic", host="api.anthropic.com", port=443, tls=True,
                            token="sk-ant-provider"), **kw)  # type: ignore[arg-type]


def sent(chat: dict[str, Any], prov: Provider | None = None) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(ANTHROPIC.request(chat, prov or provider(), rt.CLIENT_HEADERS).body)
    return body


# -- the request --------------------------------------------------------------------------------


def test_a_whole_conversation_becomes_the_request_the_anthropic_sdk_sends(standin: AnthropicStandIn) -> None:
    chat = {
        "model": "claude-sonnet-4-6", "max_tokens": 300, "temperature": 0.5, "top_p": 0.9, "stop": ["END"],
        "user": "user-7", "tools": TOOLS, "tool_choice": "auto", "parallel_tool_calls": False,
        "frequency_penalty": 0.1,  # sampling only, no Anthropic counterpart: left out
        "messages": [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "developer", "content": [{"type": "text", "text": "Answer in one line."}]},
            {"role": "user", "content": [{"type": "text", "text": "Weather here?"},
                                         {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                                         {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18C and sunny"},
            {"role": "user", "content": "And in words?"},
        ]}
    # The same conversation written with the anthropic SDK's own request type ...
    expected: MessageCreateParamsNonStreaming = {
        "model": "claude-sonnet-4-6", "max_tokens": 300, "stop_sequences": ["END"], "metadata": {"user_id": "user-7"},
        "system": [{"type": "text", "text": "You are a weather bot."}, {"type": "text", "text": "Answer in one line."}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Weather here?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"location": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "18C and sunny"},
                {"type": "text", "text": "And in words?"}]},
        ],
        "tools": [{"name": "get_weather", "description": "The current weather of a place",
                   "input_schema": {"type": "object", "properties": {"location": {"type": "string"}},
                                    "required": ["location"]}}],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    }
    # ... is what the SDK sends (with its API version, 2026-10-21: no sampling parameters),
    # and what the stand-in (checking as Anthropic does) accepts ...
    client = anthropic.Anthropic(api_key="sk-ant-provider", base_url=standin.url, max_retries=0)
    client.messages.create(**expected)
    assert standin.last.status == 200, standin.last.problems
    assert standin.last.headers["anthropic-version"] == "2026-10-21"
    # ... and what the gateway sends for the client's OpenAI request to a provider of that version.
    prov = provider(api_version="2026-10-21")
    assert json.loads(ANTHROPIC.request(chat, prov, rt.CLIENT_HEADERS).body) == standin.last.json()
    reply = rt.call(ANTHROPIC, chat, prov, standin).answer
    assert reply.status == 200, standin.last.problems
    # With the default version (2023-06-01) the temperature goes too (top_p not with it).
    assert sent(chat) == {**standin.last.json(), "temperature": 0.5}
    assert rt.call(ANTHROPIC, chat, provider(), standin).answer.status == 200, standin.last.problems


def test_sampling_parameters_as_the_api_version_takes_them(standin: AnthropicStandIn) -> None:
    assert sent({**CHAT, "top_p": 0.9})["top_p"] == 0.9
    both = sent({**CHAT, "temperature": 0.2, "top_p": 0.9})
    assert both["temperature"] == 0.2 and "top_p" not in both
    later = provider(api_version="2026-10-21")
    assert not {"temperature", "top_p"} & set(sent({**CHAT, "temperature": 1.5, "top_p": 0.9}, later))
    rt.validate_answer(rt.call(ANTHROPIC, {**CHAT, "temperature": 0.2, "top_p": 0.9}, later, standin).answer)
    rt.validate_answer(rt.call(ANTHROPIC, {**CHAT, "temperature": 0.2, "top_p": 0.9}, provider(), standin).answer)


def test_headers_key_version_and_the_clients_key_removed(standin: AnthropicStandIn) -> None:
    up = ANTHROPIC.request(CHAT, provider(), rt.CLIENT_HEADERS)
    assert (up.path, up.headers["x-api-key"], up.headers["anthropic-version"]) == \
        ("/v1/messages", "sk-ant-provider", "2023-06-01")
    assert up.remove_headers == ("authorization",)
    assert ANTHROPIC.request(CHAT, provider(api_version="2023-01-01"), rt.CLIENT_HEADERS) \
        .headers["anthropic-version"] == "2023-01-01"
    rt.validate_answer(rt.call(ANTHROPIC, CHAT, provider(), standin).answer)
    assert "authorization" not in standin.last.headers


def test_max_tokens_defaults_when_the_client_omits_it() -> None:
    assert sent(CHAT)["max_tokens"] == DEFAULT_MAX_TOKENS == 4096
    assert sent({**CHAT, "max_tokens": 50})["max_tokens"] == 50
    assert sent({**CHAT, "max_tokens": 50, "max_completion_tokens": 70})["max_tokens"] == 70


def test_model_override_and_path_override() -> None:
    assert sent(CHAT, provider(model="claude-opus-4-7"))["model"] == "claude-opus-4-7"
    assert ANTHROPIC.request(CHAT, provider(path="/anthropic/v1/messages"), rt.CLIENT_HEADERS).path == \
        "/anthropic/v1/messages"


def test_tool_choice_forms() -> None:
    forms = {"none": {"type": "none"}, "required": {"type": "any"},
             json.dumps({"type": "function", "function": {"name": "get_weather"}}):
                 {"type": "tool", "name": "get_weather"}}
    for choice, expected in forms.items():
        value = json.loads(choice) if choice.startswith("{") else choice
        assert sent({**CHAT, "tools": TOOLS, "tool_choice": value})["tool_choice"] == expected
    assert "tool_choice" not in sent({**CHAT, "tools": TOOLS})


def test_passthrough_sends_the_clients_key_as_x_api_key(standin: AnthropicStandIn) -> None:
    own = {**rt.CLIENT_HEADERS, "authorization": "Bearer sk-ant-provider"}
    rt.validate_answer(rt.call(ANTHROPIC, CHAT, provider(token=None, passthrough=True), standin, own).answer)
    assert standin.last.headers["x-api-key"] == "sk-ant-provider" and "authorization" not in standin.last.headers


def test_auth_header_override() -> None:
    up = ANTHROPIC.request(CHAT, provider(auth_header="Authorization", auth_prefix="Bearer"), rt.CLIENT_HEADERS)
    assert up.headers["authorization"] == "Bearer sk-ant-provider" and "x-api-key" not in up.headers
    assert up.remove_headers == ()


@pytest.mark.parametrize("change, param", [
    ({"messages": None}, "messages"),
    ({"temperature": 1.5}, "temperature"),
    ({"n": 2}, "n"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]},
     "messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,AA"}}]}]},
     "messages[0].content[0].image_url.url"),
    ({"messages": [{"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]}]},
     "messages[0].tool_calls[0].function.arguments"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
    ({"messages": [{"role": "function", "name": "f", "content": "x"}]}, "messages[0].role"),
])
def test_requests_anthropic_cannot_take_are_refused_naming_the_field(change: dict[str, Any], param: str) -> None:
    chat = {k: v for k, v in {**CHAT, **change}.items() if v is not None}
    with pytest.raises(ProviderError) as raised:
        ANTHROPIC.request(chat, provider(), rt.CLIENT_HEADERS)
    assert raised.value.status == 400 and raised.value.param == param
    with pytest.raises(openai.BadRequestError):
        rt.openai_client(400, raised.value.answer().encode()).chat.completions.create(model="m", messages=[])


# -- the whole answer ----------------------------------------------------------------------------


def test_answer_becomes_a_chat_completion_with_usage(standin: AnthropicStandIn) -> None:
    answer = rt.call(ANTHROPIC, CHAT, provider(), standin).answer
    completion = rt.validate_answer(answer)
    assert completion.object == "chat.completion" and completion.model == "claude-sonnet-4-6"
    assert completion.choices[0].message.content == standin.reply
    assert completion.choices[0].finish_reason == "stop"
    expected = (prompt_tokens(standin.last.json()), count_tokens(standin.reply))
    assert answer.usage is not None and (answer.usage.input, answer.usage.output) == expected
    assert completion.usage is not None and \
        (completion.usage.prompt_tokens, completion.usage.completion_tokens) == expected


def test_stop_reasons_become_finish_reasons(standin: AnthropicStandIn) -> None:
    short = rt.validate_answer(rt.call(ANTHROPIC, {**CHAT, "max_tokens": 2}, provider(), standin).answer)
    assert short.choices[0].finish_reason == "length"
    assert short.choices[0].message.content == "Hello! I"
    stopped = rt.validate_answer(rt.call(ANTHROPIC, {**CHAT, "stop": "Claude"}, provider(), standin).answer)
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].message.content == "Hello! I am "


def test_tool_use_becomes_tool_calls(standin: AnthropicStandIn) -> None:
    completion = rt.validate_answer(rt.call(ANTHROPIC, {**CHAT, "tools": TOOLS, "tool_choice": "required"},
                                      provider(), standin).answer)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls is not None
    call_ = choice.message.tool_calls[0]
    assert call_.type == "function" and call_.function.name == "get_weather"
    assert json.loads(call_.function.arguments) == standin.tool_input


@pytest.mark.parametrize("status, kind, error", [
    (429, "rate_limit_error", openai.RateLimitError), (529, "overloaded_error", openai.InternalServerError),
    (500, "api_error", openai.InternalServerError)])
def test_anthropic_errors_become_openais_with_the_same_status(standin: AnthropicStandIn, status: int, kind: str,
                                                              error: type[openai.APIStatusError]) -> None:
    standin.fail(status, times=1)
    answer = rt.call(ANTHROPIC, CHAT, provider(), standin).answer
    assert answer.status == status and answer.body["error"]["type"] == kind
    with pytest.raises(error) as raised:
        rt.openai_client(answer.status, answer.encode()).chat.completions.create(model="m", messages=[])
    assert "told to fail" in raised.value.message


def test_wrong_key_and_unknown_model(standin: AnthropicStandIn) -> None:
    answer = rt.call(ANTHROPIC, CHAT, provider(token="sk-ant-other"), standin).answer
    assert answer.status == 401 and answer.body["error"] == {
        "message": "invalid x-api-key", "type": "authentication_error", "param": None, "code": None}
    with pytest.raises(openai.AuthenticationError):
        rt.openai_client(answer.status, answer.encode()).chat.completions.create(model="m", messages=[])
    answer = rt.call(ANTHROPIC, {**CHAT, "model": "claude-nope"}, provider(), standin).answer
    assert answer.status == 404 and answer.body["error"]["type"] == "not_found_error"


# -- the stream ------------------------------------------------------------------------------------


def test_stream_becomes_openai_chunks_relayed_as_they_come(standin: AnthropicStandIn) -> None:
    out = rt.stream(ANTHROPIC, CHAT, provider(), standin)
    events = out.events()
    chunks = events.chunks
    assert chunks[0].choices[0].delta.role == "assistant"
    assert events.content() == standin.reply
    assert events.finish() == ["stop"] and all(c.choices for c in chunks)
    # One id, Anthropic's message id in it (the provider's logs find the answer by it).
    start = json.loads(out.body.split(b"\n")[1].removeprefix(b"data: "))  # message_start
    assert {c.id for c in chunks} == {f"chatcmpl-{start['message']['id']}"}
    assert events.done
    assert out.translator.usage is not None
    assert (out.translator.usage.input, out.translator.usage.output) == \
        (prompt_tokens(standin.last.json()), count_tokens(standin.reply))
    # The first token is not held back: the chunk that brought the first text delta
    # produced the first content chunk.
    first_text = next(i for i, o in enumerate(out.out) if b'"content":"Hello!"' in o)
    assert first_text < len(out.out) - 3


def test_stream_usage_chunk_when_the_client_asked(standin: AnthropicStandIn) -> None:
    chat = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
    assert "stream_options" not in sent(chat)
    chunks = rt.stream(ANTHROPIC, chat, provider(), standin).events().chunks
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == count_tokens(standin.reply)


def test_stream_events_cut_anywhere_translate_the_same(standin: AnthropicStandIn) -> None:
    out = rt.stream(ANTHROPIC, {**CHAT, "stream_options": {"include_usage": True}}, provider(), standin)
    rt.assert_cuts_change_nothing(ANTHROPIC, provider(), out)


def test_streamed_tool_calls(standin: AnthropicStandIn) -> None:
    out = rt.stream(ANTHROPIC, {**CHAT, "tools": TOOLS, "tool_choice": "required"}, provider(), standin)
    chunks = out.events().chunks
    calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or ()]
    assert calls[0].id and calls[0].function is not None and calls[0].function.name == "get_weather"
    arguments = "".join(t.function.arguments or "" for t in calls if t.function)
    assert json.loads(arguments) == standin.tool_input and {t.index for t in calls} == {0}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_the_openai_sdk_reads_the_translated_stream(standin: AnthropicStandIn) -> None:
    body = rt.stream(ANTHROPIC, CHAT, provider(), standin).translated
    client = rt.openai_client(200, body, "text/event-stream")
    text = "".join(c.choices[0].delta.content or "" for c in
                   client.chat.completions.create(model="m", messages=[], stream=True))
    assert text == standin.reply


def test_an_error_event_mid_stream_reaches_the_client_as_openais(standin: AnthropicStandIn) -> None:
    standin.stream_error_after = 2
    out = rt.stream(ANTHROPIC, CHAT, provider(), standin)
    events = out.events()
    assert [e["type"] for e in events.errors] == ["overloaded_error"] and events.done
    client = rt.openai_client(200, out.translated, "text/event-stream")
    received = []
    with pytest.raises(openai.APIError, match="Overloaded"):
        for chunk in client.chat.completions.create(model="m", messages=[], stream=True):
            received.append(chunk.choices[0].delta.content or "")
    assert "".join(received) == "Hello! I"  # what came before the error was not held back


def test_a_stream_cut_short_ends_with_an_error_not_a_silent_done() -> None:
    translator = ANTHROPIC.stream(provider(), "claude-sonnet-4-6")
    start = {"type": "message_start", "message": {"id": "msg_1", "model": "claude-sonnet-4-6",
                                                  "usage": {"input_tokens": 3, "output_tokens": 1}}}
    out = translator.feed(f"event: message_start\ndata: {json.dumps(start)}\n\n".encode())
    assert json.loads(out[len(b"data: "):])["choices"][0]["delta"]["role"] == "assistant"
    tail = translator.finish().decode().split("\n\n")
    assert json.loads(tail[0][len("data: "):])["error"]["type"] == "server_error"
    assert tail[1] == "data: [DONE]"
    assert translator.usage is not None and translator.usage.input == 3


# -- the stand-in itself, read by the official SDK -------------------------------------------------


def test_the_standin_speaks_anthropics_api_to_the_sdk(standin: AnthropicStandIn) -> None:
    client = anthropic.Anthropic(api_key="sk-ant-provider", base_url=standin.url, max_retries=0)
    message = client.messages.create(model="claude-sonnet-4-6", max_tokens=100, system="Be terse.",
                                     messages=[{"role": "user", "content": "Hi there"}])
    assert message.content[0].type == "text" and message.content[0].text == standin.reply
    assert message.usage.input_tokens == 4
    # The SDK builds its objects without validating them: validate the answer's shape here.
    raw = httpx.post(standin.url + "/v1/messages", headers={"x-api-key": "sk-ant-provider",
                                                            "anthropic-version": "2023-06-01"},
                     json={"model": "claude-sonnet-4-6", "max_tokens": 9, "messages": [{"role": "user", "content": "Hi"}]})
    assert anthropic.types.Message.model_validate(raw.json()).stop_reason == "end_turn"
    with client.messages.stream(model="claude-sonnet-4-6", max_tokens=100,
                                messages=[{"role": "user", "content": "Hi"}]) as events:
        assert "".join(events.text_stream) == standin.reply
        assert events.get_final_message().usage.output_tokens == count_tokens(standin.reply)
    # Every streamed event (but ping) validates as the SDK's stream event type.
    with httpx.stream("POST", standin.url + "/v1/messages",
                      headers={"x-api-key": "sk-ant-provider", "anthropic-version": "2023-06-01"},
                      json={"model": "claude-sonnet-4-6", "max_tokens": 50, "stream": True,
                            "messages": [{"role": "user", "content": "Hi"}]}) as reply:
        data = [json.loads(line[len("data: "):]) for line in reply.iter_lines() if line.startswith("data: ")]
    kinds = [TypeAdapter(RawMessageStreamEvent).validate_python(e).type for e in data if e["type"] != "ping"]
    assert kinds[:2] == ["message_start", "content_block_start"] and kinds[-2:] == ["message_delta", "message_stop"]
    refused = httpx.post(standin.url + "/v1/messages", headers={"x-api-key": "sk-ant-provider",
                                                                "anthropic-version": "2023-06-01"},
                         json={"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "Hi"}]})
    error = anthropic.types.ErrorResponse.model_validate(refused.json())
    assert refused.status_code == 400 and error.error.message == "max_tokens: Field required"
