"""Bedrock's codec against the Bedrock stand-in, over real HTTP: requests signed with SigV4
as AWS verifies them, Converse bodies as Bedrock validates them, answers and AWS event
streams back in OpenAI's shapes as the openai SDK reads them, AWS errors as OpenAI errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import openai
import pytest
from openai.types import ErrorObject
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from lychgate.ai.config import Provider
from lychgate.ai.providers import CODECS
from lychgate.ai.providers.base import ProviderError
from tests.ai import roundtrip as rt
from tests.ai.standin_bedrock import BedrockStandIn, operation

BEDROCK = CODECS["bedrock"]
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
CONVERSATION: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "Answer in one line."},
    {"role": "user", "content": "Hello there"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "Tell me a joke"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object",
                                                          "properties": {"query": {"type": "string"}}}}}]


@pytest.fixture
def bedrock() -> Iterator[BedrockStandIn]:
    with BedrockStandIn() as standin:
        yield standin


def bedrock_provider(standin: BedrockStandIn, **fields: Any) -> Provider:
    defaults = {"model": MODEL, "region": "us-east-1", "access_key_id": "AKIDSTANDIN",
                "secret_access_key": "standin/secret/key"}
    return rt.provider("bedrock", standin, **{**defaults, **fields})


def test_converse_round_trip_signed_with_a_guardrail(bedrock: BedrockStandIn) -> None:
    p = bedrock_provider(bedrock, guardrail_identifier="gr-standin", guardrail_version="1")
    chat = {"model": "gpt-4o", "messages": CONVERSATION, "temperature": 0.5, "top_p": 0.9, "max_tokens": 100,
            "stop": ["zzz"]}
    up, got, answer = rt.call(BEDROCK, chat, p, bedrock, {"authorization": "Bearer the-client-s-key"})

    assert got.status_code == 200, got.text
    assert up.path == "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
    assert operation(bedrock.last) == (MODEL, "converse")
    sent = bedrock.last.json()
    assert sent["guardrailConfig"] == {"guardrailIdentifier": "gr-standin", "guardrailVersion": "1"}
    assert sent["system"] == [{"text": "Answer in one line."}]
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["inferenceConfig"] == {"maxTokens": 100, "temperature": 0.5, "topP": 0.9,
                                       "stopSequences": ["zzz"]}
    assert bedrock.last.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDSTANDIN/")
    completion = ChatCompletion.model_validate(answer.body)
    assert completion.id == f"chatcmpl-{got.headers['x-amzn-requestid']}"
    assert completion.model == MODEL
    assert completion.choices[0].message.content == "You said: Tell me a joke"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens, completion.usage.total_tokens) \
        == (15, 6, 21)
    assert answer.usage is not None and answer.usage.total == 21
    assert "standin/secret/key" not in repr(up)


def test_temporary_credentials_sign_the_session_token(bedrock: BedrockStandIn) -> None:
    p = bedrock_provider(bedrock, access_key_id="ASIATEMPORARY", secret_access_key="temporary/secret",
                         session_token="session-token-xyz")
    up, got, _ = rt.call(BEDROCK, {"messages": CONVERSATION}, p, bedrock)
    assert got.status_code == 200, got.text
    assert "x-amz-security-token" in up.headers["authorization"].split("SignedHeaders=")[1]
    assert bedrock.last.headers["x-amz-security-token"] == "session-token-xyz"


@pytest.mark.parametrize(("fields", "kind", "words"), [
    ({"secret_access_key": "not/the/secret"}, "InvalidSignatureException", "signature we calculated does not match"),
    ({"access_key_id": "AKIDUNKNOWN"}, "UnrecognizedClientException", "security token included in the request"),
    ({"region": "eu-west-1"}, "InvalidSignatureException", "scoped to a valid region"),
    ({"access_key_id": "ASIATEMPORARY", "secret_access_key": "temporary/secret"}, "UnrecognizedClientException",
     "security token included in the request"),
])
def test_bad_credentials_come_back_as_openai_errors(bedrock: BedrockStandIn, fields: dict[str, Any],
                                                    kind: str, words: str) -> None:
    _, got, answer = rt.call(BEDROCK, {"messages": CONVERSATION}, bedrock_provider(bedrock, **fields), bedrock)
    assert got.status_code == 403 and got.headers["x-amzn-errortype"].startswith(kind)
    assert answer.status == 403 and answer.usage is None
    error = ErrorObject.model_validate(answer.body["error"])
    assert (error.type, error.code) == ("permission_error", kind)
    assert words in error.message
    assert bedrock.last.problems == [error.message]  # refused before the Converse request was read


def test_the_signature_covers_path_body_and_host(bedrock: BedrockStandIn) -> None:
    """What is sent must be what was signed: the stand-in refuses anything changed after."""
    up = BEDROCK.request({"messages": CONVERSATION}, bedrock_provider(bedrock), {})
    assert rt.send(bedrock, up).status_code == 200
    for changed in (replace(up, body=up.body.replace(b"joke", b"poem")),
                    replace(up, path=up.path.replace("%3A", ":")),
                    replace(up, headers={**up.headers, "host": "bedrock-runtime.us-east-1.amazonaws.com"})):
        got = rt.send(bedrock, changed)
        assert got.status_code == 403 and got.headers["x-amzn-errortype"].startswith("InvalidSignatureException")


@pytest.mark.parametrize("model", [
    "amazon.nova-lite-v1:0",
    "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20241022-v2:0",
])
def test_model_ids_and_arns_are_escaped_into_the_signed_path(bedrock: BedrockStandIn, model: str) -> None:
    _, got, _ = rt.call(BEDROCK, {"messages": CONVERSATION}, bedrock_provider(bedrock, model=model), bedrock)
    assert got.status_code == 200, got.text
    assert operation(bedrock.last) == (model, "converse")


def test_stream_round_trip(bedrock: BedrockStandIn) -> None:
    chat = {"messages": [{"role": "user", "content": "one two three four five six seven"}],
            "stream_options": {"include_usage": True}}
    streamed = rt.stream(BEDROCK, chat, bedrock_provider(bedrock), bedrock)

    assert streamed.status == 200 and streamed.content_type == "application/vnd.amazon.eventstream"
    assert streamed.up.path.endswith("/converse-stream")
    rt.assert_streamed(streamed, "You said: one two three four five six seven", (7, 9))


def test_stream_frames_cut_anywhere_decode_the_same(bedrock: BedrockStandIn) -> None:
    """Frames split across network reads (inside the prelude, the headers, the payload,
    the CRC) decode to the same events."""
    p = bedrock_provider(bedrock)
    chat = {"messages": [{"role": "user", "content": "get_weather in Paris, café"}], "tools": TOOLS,
            "stream_options": {"include_usage": True}}
    streamed = rt.stream(BEDROCK, chat, p, bedrock)
    rt.assert_cuts_change_nothing(BEDROCK, p, streamed)


def test_exception_frame_mid_stream_is_an_openai_error_event(bedrock: BedrockStandIn) -> None:
    p = bedrock_provider(bedrock, model="meta.llama3-midstream-error")
    chat = {"messages": [{"role": "user", "content": "one two three four five six"}]}
    events = rt.openai_events(rt.stream(BEDROCK, chat, p, bedrock).translated)
    assert events.content() == "You said: one two "  # what came before the failure reached the client
    assert len(events.errors) == 1 and events.done
    error = ErrorObject.model_validate(events.errors[0])
    assert (error.code, error.type) == ("modelStreamErrorException", "server_error")
    assert "stream failed" in error.message
    with rt.sdk(BEDROCK, p, bedrock) as client:
        stream = client.chat.completions.create(model="x", messages=chat["messages"], stream=True)  # type: ignore[arg-type]
        with pytest.raises(openai.APIError, match="stream failed"):
            list(stream)


def test_a_corrupted_frame_ends_the_stream_with_an_error(bedrock: BedrockStandIn) -> None:
    p = bedrock_provider(bedrock)
    body = rt.stream(BEDROCK, {"messages": CONVERSATION}, p, bedrock).body
    broken = bytearray(body)
    broken[len(body) // 2] ^= 0xFF
    translator = BEDROCK.stream(p, MODEL)
    out = translator.feed(bytes(broken[:len(body) // 2 + 100])) + translator.feed(bytes(broken[len(body) // 2 + 100:]))
    events = rt.openai_events(out + translator.finish())
    assert len(events.errors) == 1 and "broken event stream" in events.errors[0]["message"]
    assert events.done


def test_tool_calls_both_ways(bedrock: BedrockStandIn) -> None:
    p = bedrock_provider(bedrock)
    ask = [{"role": "user", "content": "get_weather for Paris"}]
    _, _, answer = rt.call(BEDROCK, {"messages": ask, "tools": TOOLS, "tool_choice": "auto"}, p, bedrock)
    assert bedrock.last.json()["toolConfig"] == {
        "tools": [{"toolSpec": {"name": "get_weather", "description": "The weather in a city",
                                "inputSchema": {"json": TOOLS[0]["function"]["parameters"]}}}],  # type: ignore[index]
        "toolChoice": {"auto": {}}}
    choice = ChatCompletion.model_validate(answer.body).choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls is not None
    call_ = choice.message.tool_calls[0]
    assert call_.id.startswith("tooluse_")
    assert json.loads(call_.function.arguments) == {"query": "get_weather for Paris"}  # type: ignore[union-attr]

    follow_up = [*ask, choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call_.id, "content": '{"celsius": 21}'},
                 {"role": "user", "content": "And tomorrow?"}]
    _, got, answer = rt.call(BEDROCK, {"messages": follow_up, "tools": TOOLS}, p, bedrock)
    assert got.status_code == 200, got.text
    # the tool result and the user's next words are one user turn (Bedrock's roles alternate)
    assert bedrock.last.json()["messages"][2] == {"role": "user", "content": [
        {"toolResult": {"toolUseId": call_.id, "content": [{"json": {"celsius": 21}}]}},
        {"text": "And tomorrow?"}]}

    events = rt.openai_events(rt.stream(BEDROCK, {"messages": ask, "tools": TOOLS}, p, bedrock).translated)
    deltas = [tc for chunk in events.chunks for c in chunk.choices for tc in c.delta.tool_calls or []]
    assert deltas[0].function is not None and deltas[0].function.name == "get_weather"
    assert deltas[0].id is not None and deltas[0].id.startswith("tooluse_")
    assert {d.index for d in deltas} == {0}
    arguments = "".join(d.function.arguments or "" for d in deltas if d.function)
    assert json.loads(arguments) == {"query": "get_weather for Paris"}
    assert events.finish() == ["tool_calls"]


def test_guardrail_intervention_finishes_with_content_filter(bedrock: BedrockStandIn) -> None:
    p = bedrock_provider(bedrock, guardrail_identifier="gr-standin", guardrail_version="DRAFT")
    ask = {"messages": [{"role": "user", "content": "something forbidden"}]}
    _, _, answer = rt.call(BEDROCK, ask, p, bedrock)
    assert ChatCompletion.model_validate(answer.body).choices[0].finish_reason == "content_filter"
    assert rt.openai_events(rt.stream(BEDROCK, ask, p, bedrock).translated).finish() == ["content_filter"]


def test_max_tokens_and_stop_sequences(bedrock: BedrockStandIn) -> None:
    p = bedrock_provider(bedrock)
    _, _, answer = rt.call(BEDROCK, {"messages": CONVERSATION, "max_completion_tokens": 3}, p, bedrock)
    choice = ChatCompletion.model_validate(answer.body).choices[0]
    assert (choice.message.content, choice.finish_reason) == ("You said: Tell", "length")
    _, _, answer = rt.call(BEDROCK, {"messages": CONVERSATION, "stop": "joke"}, p, bedrock)
    choice = ChatCompletion.model_validate(answer.body).choices[0]
    assert (choice.message.content, choice.finish_reason) == ("You said: Tell me a", "stop")


@pytest.mark.parametrize(("fields", "messages", "status", "type_", "code", "words"), [
    ({"model": "throttled"}, CONVERSATION, 429, "rate_limit_error", "ThrottlingException", "Too many requests"),
    ({"model": "bogus.model"}, CONVERSATION, 400, "invalid_request_error", "ValidationException",
     "model identifier is invalid"),
    ({}, [{"role": "assistant", "content": "I start"}, {"role": "user", "content": "hi"}], 400,
     "invalid_request_error", "ValidationException", "must start with a user message"),
    ({"guardrail_identifier": "gr-missing"}, CONVERSATION, 400, "invalid_request_error", "ValidationException",
     "guardrail identifier or version"),
])
def test_bedrock_errors_come_back_in_openai_shape(bedrock: BedrockStandIn, fields: dict[str, Any],
                                                  messages: list[dict[str, Any]], status: int, type_: str,
                                                  code: str, words: str) -> None:
    _, got, answer = rt.call(BEDROCK, {"messages": messages}, bedrock_provider(bedrock, **fields), bedrock)
    assert got.status_code == status
    error = ErrorObject.model_validate(answer.body["error"])
    assert (answer.status, error.type, error.code) == (status, type_, code)
    assert words in error.message


def test_the_openai_sdk_unchanged(bedrock: BedrockStandIn) -> None:
    with rt.sdk(BEDROCK, bedrock_provider(bedrock), bedrock) as client:
        assert rt.ask(client, CONVERSATION) == ("You said: Tell me a joke", "You said: Tell me a joke", 21)
        with pytest.raises(openai.BadRequestError, match="Converse API answers with one choice"):
            client.chat.completions.create(model="gpt-4o", messages=CONVERSATION, n=2)
    with rt.sdk(BEDROCK, bedrock_provider(bedrock, secret_access_key="wrong"), bedrock) as client, \
            pytest.raises(openai.PermissionDeniedError, match="signature"):
        client.chat.completions.create(model="gpt-4o", messages=CONVERSATION)
    with rt.sdk(BEDROCK, bedrock_provider(bedrock, model="throttled"), bedrock) as client, \
            pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="gpt-4o", messages=CONVERSATION, stream=True)


def test_bad_input_and_missing_credentials_never_reach_aws(bedrock: BedrockStandIn) -> None:
    with pytest.raises(ProviderError) as e:
        BEDROCK.request({"messages": CONVERSATION, "n": 3}, bedrock_provider(bedrock), {})
    assert (e.value.status, e.value.param) == (400, "n")
    with pytest.raises(ProviderError) as e:
        BEDROCK.request({"messages": CONVERSATION}, bedrock_provider(bedrock, secret_access_key=None), {})
    assert e.value.status == 500 and "no AWS credentials" in e.value.message
    assert not bedrock.requests


def test_host_of_a_region_signed_as_clients_send_it() -> None:
    host = BEDROCK.upstream_host(region="eu-west-3")
    assert host == "bedrock-runtime.eu-west-3.amazonaws.com"
    assert BEDROCK.upstream_host() == "bedrock-runtime.us-east-1.amazonaws.com"
    p = Provider(id="a/b/c", kind="bedrock", host=host, port=443, tls=True, model=MODEL, region="eu-west-3",
                 access_key_id="AKIDSTANDIN", secret_access_key="standin/secret/key")
    up = BEDROCK.request({"messages": CONVERSATION}, p, {})
    assert up.headers["host"] == host  # no :443, as HTTP clients and Envoy send it
    assert "/eu-west-3/bedrock/aws4_request" in up.headers["authorization"]
