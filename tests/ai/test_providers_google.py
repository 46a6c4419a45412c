"""Gemini and Vertex AI codecs against the Google stand-in, over real HTTP: the requests
Google would accept (credential, URL, GenerateContentRequest), the answers and streams
back in OpenAI's shapes as the openai SDK reads them, Google's errors as OpenAI errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types import ErrorObject
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from lychgate.ai.config import Provider
from lychgate.ai.providers import CODECS
from lychgate.ai.providers.base import ProviderError
from tests.ai import roundtrip as rt
from tests.ai.standin_google import GoogleStandIn

KINDS = ["gemini", "vertexai"]
CONVERSATION: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "Answer in one line."},
    {"role": "user", "content": "Hello there"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": [{"type": "text", "text": "Tell me "}, {"type": "text", "text": "a joke"}]}]


@pytest.fixture
def google() -> Iterator[GoogleStandIn]:
    with GoogleStandIn() as standin:
        yield standin


def google_provider(kind: str, standin: GoogleStandIn, **fields: Any) -> Provider:
    if kind == "gemini":
        fields.setdefault("token", GoogleStandIn.api_key)
        fields.setdefault("api_version", "v1beta")
    else:
        fields.setdefault("token", GoogleStandIn.token)
        for name, value in (("project_id", "my-project"), ("location", "us-central1"), ("publisher", "GOOGLE")):
            fields.setdefault(name, value)
    fields.setdefault("model", "gemini-2.0-flash")
    return rt.provider(kind, standin, **fields)


@pytest.mark.parametrize("kind", KINDS)
def test_chat_round_trip(google: GoogleStandIn, kind: str) -> None:
    p = google_provider(kind, google)
    chat = {"model": "gpt-4o", "messages": CONVERSATION, "temperature": 0.3, "top_p": 0.9,
            "max_completion_tokens": 50, "stop": ["zzz"], "seed": 7}
    _, got, answer = rt.call(CODECS[kind], chat, p, google, {"authorization": "Bearer the-client-s-key"})

    assert got.status_code == 200, got.text
    assert google.last.path.startswith("/v1beta/models/" if kind == "gemini" else "/v1/projects/")
    sent = google.last.json()
    assert sent["systemInstruction"] == {"parts": [{"text": "Answer in one line."}]}
    assert [c["role"] for c in sent["contents"]] == ["user", "model", "user"]
    assert sent["contents"][2]["parts"] == [{"text": "Tell me a joke"}]
    assert sent["generationConfig"] == {"temperature": 0.3, "topP": 0.9, "maxOutputTokens": 50,
                                        "stopSequences": ["zzz"], "seed": 7}
    completion = ChatCompletion.model_validate(answer.body)
    assert completion.model == "gemini-2.0-flash"
    assert completion.choices[0].message.content == "You said: Tell me a joke"
    assert completion.choices[0].finish_reason == "stop"
    # words are the stand-in's tokens: 4 in the system instruction and the three messages' 2 + 5 + 4
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (15, 6)
    assert completion.usage.total_tokens == 21
    assert answer.usage is not None and (answer.usage.input, answer.usage.output) == (15, 6)


def test_gemini_key_travels_in_a_header_never_in_the_url(google: GoogleStandIn) -> None:
    up, got, _ = rt.call(CODECS["gemini"], {"messages": CONVERSATION}, google_provider("gemini", google), google,
                      {"authorization": "Bearer the-client-s-key"})
    assert got.status_code == 200
    assert up.path == "/v1beta/models/gemini-2.0-flash:generateContent"
    assert google.last.headers["x-goog-api-key"] == GoogleStandIn.api_key
    assert "key" not in google.last.query
    assert "authorization" in up.remove_headers  # the client's own credential stays at the gateway
    assert GoogleStandIn.api_key not in repr(up)


def test_vertex_url_and_bearer_token(google: GoogleStandIn) -> None:
    up, got, _ = rt.call(CODECS["vertexai"], {"messages": CONVERSATION}, google_provider("vertexai", google), google)
    assert got.status_code == 200
    assert up.path == ("/v1/projects/my-project/locations/us-central1/publishers/google/models/"
                       "gemini-2.0-flash:generateContent")
    assert google.last.headers["authorization"] == f"Bearer {GoogleStandIn.token}"
    assert CODECS["vertexai"].upstream_host(location="europe-west4") == "europe-west4-aiplatform.googleapis.com"
    assert CODECS["vertexai"].upstream_host(location="global") == "aiplatform.googleapis.com"
    assert CODECS["gemini"].upstream_host() == "generativelanguage.googleapis.com"


def test_vertex_model_path_replaces_the_method(google: GoogleStandIn) -> None:
    p = google_provider("vertexai", google, model_path="generateContent")
    up = CODECS["vertexai"].request({"messages": CONVERSATION, "stream": True}, p, {})
    assert up.path.endswith("/models/gemini-2.0-flash:streamGenerateContent?alt=sse")


@pytest.mark.parametrize("kind", KINDS)
def test_stream_round_trip(google: GoogleStandIn, kind: str) -> None:
    p = google_provider(kind, google)
    chat = {"messages": [{"role": "user", "content": "one two three four five six seven"}],
            "stream_options": {"include_usage": True}}
    streamed = rt.stream(CODECS[kind], chat, p, google)

    assert streamed.status == 200 and streamed.content_type.startswith("text/event-stream")
    assert google.last.query == {"alt": "sse"}
    rt.assert_streamed(streamed, "You said: one two three four five six seven", (7, 9))


def test_stream_without_include_usage_has_choices_in_every_chunk(google: GoogleStandIn) -> None:
    p = google_provider("gemini", google)
    streamed = rt.stream(CODECS["gemini"], {"messages": CONVERSATION}, p, google)
    events = rt.openai_events(streamed.translated)
    assert events.chunks and all(chunk.choices for chunk in events.chunks)
    assert streamed.translator.usage is not None and streamed.translator.usage.input == 15  # still counted


def test_stream_cut_at_awkward_places_decodes_the_same(google: GoogleStandIn) -> None:
    """Google ends events with CRLF CRLF: cuts between CR and LF, inside `data:`, inside
    the JSON and inside a multi-byte character must not change a thing."""
    p = google_provider("gemini", google)
    chat = {"messages": [{"role": "user", "content": "café crème brûlée ünïcödé"}],
            "stream_options": {"include_usage": True}}
    streamed = rt.stream(CODECS["gemini"], chat, p, google)
    assert b"\r\n\r\n" in streamed.body and "é".encode() in streamed.body
    rt.assert_cuts_change_nothing(CODECS["gemini"], p, streamed)


def test_max_tokens_finishes_with_length(google: GoogleStandIn) -> None:
    p = google_provider("gemini", google)
    _, _, answer = rt.call(CODECS["gemini"], {"messages": CONVERSATION, "max_tokens": 3}, p, google)
    completion = ChatCompletion.model_validate(answer.body)
    assert completion.choices[0].message.content == "You said: Tell"
    assert completion.choices[0].finish_reason == "length"


def test_n_choices_are_candidates(google: GoogleStandIn) -> None:
    p = google_provider("gemini", google)
    _, _, answer = rt.call(CODECS["gemini"], {"messages": CONVERSATION, "n": 2}, p, google)
    assert google.last.json()["generationConfig"] == {"candidateCount": 2}
    completion = ChatCompletion.model_validate(answer.body)
    assert [(c.index, c.message.content) for c in completion.choices] == [
        (0, "You said: Tell me a joke (1)"), (1, "You said: Tell me a joke (2)")]
    events = rt.openai_events(rt.stream(CODECS["gemini"], {"messages": CONVERSATION, "n": 2}, p, google).translated)
    assert [events.content(i) for i in (0, 1)] == ["You said: Tell me a joke (1)", "You said: Tell me a joke (2)"]
    assert events.finish(0) == events.finish(1) == ["stop"]


def test_tool_calls_both_ways(google: GoogleStandIn) -> None:
    p = google_provider("gemini", google)
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"query": {"type": "string"}}}}}]
    ask = [{"role": "user", "content": "get_weather for Paris"}]
    _, _, answer = rt.call(CODECS["gemini"], {"messages": ask, "tools": tools, "tool_choice": "auto"}, p, google)
    sent = google.last.json()
    assert sent["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["type"] == "object"
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    completion = ChatCompletion.model_validate(answer.body)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls is not None
    call_ = choice.message.tool_calls[0]
    assert call_.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call_.function.arguments) == {"query": "get_weather for Paris"}  # type: ignore[union-attr]

    follow_up = [*ask, choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call_.id, "content": '{"celsius": 21}'}]
    _, got, answer = rt.call(CODECS["gemini"], {"messages": follow_up, "tools": tools}, p, google)
    assert got.status_code == 200, got.text
    assert google.last.json()["contents"][1:] == [
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather",
                                                      "args": {"query": "get_weather for Paris"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"celsius": 21}}}]}]
    assert ChatCompletion.model_validate(answer.body).choices[0].message.content == 'The tool said: {"celsius": 21}'

    events = rt.openai_events(rt.stream(CODECS["gemini"], {"messages": ask, "tools": tools}, p, google).translated)
    deltas = [tc for chunk in events.chunks for c in chunk.choices for tc in c.delta.tool_calls or []]
    assert [(d.index, d.function.name) for d in deltas] == [(0, "get_weather")]  # type: ignore[union-attr]
    assert events.finish() == ["tool_calls"]


def test_safety_and_blocked_prompts_finish_with_content_filter(google: GoogleStandIn) -> None:
    p = google_provider("gemini", google)
    for text in ("something forbidden", "a blocked-prompt"):
        _, _, answer = rt.call(CODECS["gemini"], {"messages": [{"role": "user", "content": text}]}, p, google)
        choice = ChatCompletion.model_validate(answer.body).choices[0]
        assert (choice.finish_reason, choice.message.content) == ("content_filter", None), text
        streamed = rt.stream(CODECS["gemini"], {"messages": [{"role": "user", "content": text}]}, p, google)
        assert rt.openai_events(streamed.translated).finish() == ["content_filter"], text


def test_thinking_counts_as_output_and_stays_out_of_the_answer(google: GoogleStandIn) -> None:
    p = google_provider("gemini", google, model="gemini-2.5-thinking")
    _, _, answer = rt.call(CODECS["gemini"], {"messages": [{"role": "user", "content": "hi"}]}, p, google)
    completion = ChatCompletion.model_validate(answer.body)
    assert completion.choices[0].message.content == "You said: hi"
    assert completion.usage is not None and completion.usage.completion_tokens_details is not None
    assert completion.usage.completion_tokens_details.reasoning_tokens == 7
    assert (completion.usage.completion_tokens, completion.usage.total_tokens) == (3 + 7, 1 + 3 + 7)


@pytest.mark.parametrize(("kind", "fields", "status", "type_", "code", "words"), [
    ("gemini", {"token": "wrong"}, 400, "invalid_request_error", "INVALID_ARGUMENT", "API key not valid"),
    ("vertexai", {"token": "wrong"}, 401, "authentication_error", "UNAUTHENTICATED", "invalid authentication"),
    ("vertexai", {"project_id": "not-mine"}, 403, "permission_error", "PERMISSION_DENIED", "not-mine"),
    ("gemini", {"model": "gemini-busy"}, 429, "rate_limit_error", "RESOURCE_EXHAUSTED", "exhausted"),
    ("gemini", {"model": "gemini-down"}, 503, "server_error", "UNAVAILABLE", "overloaded"),
    ("gemini", {"model": "palm-2"}, 404, "not_found_error", "NOT_FOUND", "models/palm-2 is not found"),
])
def test_google_errors_come_back_in_openai_shape(google: GoogleStandIn, kind: str,
                                                 fields: dict[str, Any], status: int, type_: str, code: str,
                                                 words: str) -> None:
    p = google_provider(kind, google, **fields)
    _, got, answer = rt.call(CODECS[kind], {"messages": CONVERSATION}, p, google)
    assert got.status_code == status and "error" in got.json()
    assert answer.status == status and answer.usage is None
    error = ErrorObject.model_validate(answer.body["error"])
    assert (error.type, error.code) == (type_, code)
    assert words in error.message


def test_vertex_error_in_an_array_an_error_in_a_200_and_a_proxy_s_html_page() -> None:
    p = Provider(id="a/b/c", kind="vertexai", host="h", port=443, tls=True)
    vertex = CODECS["vertexai"]
    wrapped = b'[{"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}]'
    answer = vertex.response(429, {}, wrapped, p, "gemini-2.0-flash")
    assert (answer.status, answer.body["error"]["message"]) == (429, "Quota exceeded")
    inside = vertex.response(200, {}, wrapped[1:-1].replace(b"429", b"503"), p, "gemini-2.0-flash")
    assert (inside.status, inside.body["error"]["code"]) == (503, "RESOURCE_EXHAUSTED")
    html = vertex.response(502, {}, b"<html><body>Bad Gateway</body></html>", p, "gemini-2.0-flash")
    assert (html.status, html.body["error"]["type"]) == (502, "server_error")
    assert "Bad Gateway" in html.body["error"]["message"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_openai_sdk_unchanged(google: GoogleStandIn, kind: str) -> None:
    """The official client parses every answer: a completion, a stream with usage, errors
    raised as the exception classes a client catches."""
    with rt.sdk(CODECS[kind], google_provider(kind, google), google) as client:
        assert rt.ask(client, CONVERSATION) == ("You said: Tell me a joke", "You said: Tell me a joke", 21)
        with pytest.raises(openai.BadRequestError, match="messages"):
            client.chat.completions.create(model="gpt-4o", messages=[])
    with rt.sdk(CODECS[kind], google_provider(kind, google, model="gemini-busy"), google) as client, \
            pytest.raises(openai.RateLimitError, match="exhausted"):
        client.chat.completions.create(model="gpt-4o", messages=CONVERSATION)


def test_passthrough_uses_the_client_s_bearer_token(google: GoogleStandIn) -> None:
    p = google_provider("gemini", google, token=None, passthrough=True)
    _, got, _ = rt.call(CODECS["gemini"], {"messages": CONVERSATION}, p, google,
                     {"Authorization": f"Bearer {GoogleStandIn.api_key}"})
    assert got.status_code == 200 and google.last.headers["x-goog-api-key"] == GoogleStandIn.api_key
    with pytest.raises(ProviderError) as e:
        CODECS["gemini"].request({"messages": CONVERSATION}, p, {})
    assert e.value.status == 401


def test_auth_header_override() -> None:
    p = Provider(id="a/b/c", kind="vertexai", host="h", port=443, tls=True, model="gemini-2.0-flash",
                 token="tok", project_id="p", location="l", auth_header="X-Goog-Token", auth_prefix="")
    up = CODECS["vertexai"].request({"messages": CONVERSATION}, p, {})
    assert up.headers["x-goog-token"] == "tok" and "authorization" not in up.headers
    assert up.remove_headers == ("authorization",)


@pytest.mark.parametrize(("chat", "field"), [
    ({}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"google": "x"}}]}]},
     "messages[0].content[0]"),
    ({"messages": [{"role": "tool", "tool_call_id": "call_1", "content": "21"}]}, "messages[0].tool_call_id"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, "max_tokens"),
    ({"messages": [{"role": "user", "content": "hi"}], "stop": 3}, "stop"),
    ({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "retrieval"}]}, "tools[0]"),
    ({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "yaml"}}, "response_format.type"),
    ({"messages": [{"role": "system", "content": "only a system prompt"}]}, "messages"),
])
def test_bad_requests_name_the_field_and_never_reach_google(google: GoogleStandIn,
                                                            chat: dict[str, Any], field: str) -> None:
    with pytest.raises(ProviderError) as e:
        CODECS["gemini"].request(chat, google_provider("gemini", google), {})
    assert e.value.status == 400 and e.value.param == field and f"'{field}'" in e.value.message
    assert ErrorObject.model_validate(e.value.answer().body["error"]).param == field
    assert not google.requests


def test_json_mode(google: GoogleStandIn) -> None:
    p = google_provider("gemini", google)
    schema = {"type": "object", "properties": {"joke": {"type": "string"}}}
    for fmt, config in (({"type": "json_object"}, {"responseMimeType": "application/json"}),
                        ({"type": "json_schema", "json_schema": {"name": "j", "schema": schema}},
                         {"responseMimeType": "application/json", "responseJsonSchema": schema})):
        _, got, _ = rt.call(CODECS["gemini"], {"messages": CONVERSATION, "response_format": fmt}, p, google)
        assert got.status_code == 200, got.text
        assert google.last.json()["generationConfig"] == config
