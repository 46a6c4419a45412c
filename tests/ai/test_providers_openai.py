"""The openai and azureopenai codecs against their stand-ins over real HTTP, the answers
read by the openai SDK's types (and its client, for errors and streams)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import openai
import pytest

from lychgate.ai.config import Provider
from lychgate.ai.providers import CODECS
from lychgate.ai.providers.base import ProviderError
from tests.ai import roundtrip as rt
from tests.ai.standin_openai import AzureOpenAIStandIn, OpenAIStandIn, prompt_tokens
from tests.ai.standins import count_tokens

OPENAI = CODECS["openai"]
AZURE = CODECS["azureopenai"]
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "system", "content": "You are terse."},
                                             {"role": "user", "content": "Say hello to the gateway"}]}


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn(key="sk-provider") as s:
        yield s


@pytest.fixture(scope="module")
def azure() -> Iterator[AzureOpenAIStandIn]:
    with AzureOpenAIStandIn(key="azure-key", deployments={"prod-4o": "gpt-4o-mini-2024-07-18"}) as s:
        yield s


@pytest.fixture(autouse=True)
def _recovered(standin: OpenAIStandIn, azure: AzureOpenAIStandIn) -> None:
    standin.recover()
    azure.recover()


def provider(**kw: object) -> Provider:
    return replace(Provider(id="default/llm/openai", kind="openai", host="api.openai.com", port=443, tls=True,
                            token="sk-provider"), **kw)  # type: ignore[arg-type]


def azure_provider(**kw: object) -> Provider:
    return replace(Provider(id="default/llm/azure", kind="azureopenai", host="res.openai.azure.com", port=443,
                            tls=True, token="azure-key", endpoint="res.openai.azure.com", deployment_name="prod-4o",
                            api_version="2024-10-21"), **kw)  # type: ignore[arg-type]


def test_whole_answer_comes_back_as_openai_sent_it_with_its_usage(standin: OpenAIStandIn) -> None:
    answer = rt.call(OPENAI, CHAT, provider(), standin).answer
    completion = rt.validate_answer(answer)
    assert completion.choices[0].message.content == standin.reply
    assert standin.last.path == "/v1/chat/completions"
    assert standin.last.headers["authorization"] == "Bearer sk-provider"  # the provider's key, not the client's
    assert standin.last.json()["messages"] == CHAT["messages"]
    expected = (prompt_tokens(CHAT), count_tokens(standin.reply))
    assert answer.usage is not None and (answer.usage.input, answer.usage.output) == expected
    assert completion.usage is not None and completion.usage.total_tokens == sum(expected)


def test_model_override_replaces_the_clients_model(standin: OpenAIStandIn) -> None:
    completion = rt.validate_answer(rt.call(OPENAI, CHAT, provider(model="gpt-4o"), standin).answer)
    assert standin.last.json()["model"] == "gpt-4o"
    assert completion.model == "gpt-4o"


def test_stream_relays_chunks_as_they_come_and_counts_tokens_from_the_usage_chunk(standin: OpenAIStandIn) -> None:
    out = rt.stream(OPENAI, CHAT, provider(), standin)
    # The gateway asked for usage though the client did not ...
    assert standin.last.json()["stream_options"] == {"include_usage": True}
    # ... and the client gets no usage chunk: every chunk has a choice, as it expects.
    events = out.events()
    assert all(c.choices for c in events.chunks)
    assert events.content() == standin.reply
    assert events.finish() == ["stop"] and events.done
    assert out.translator.usage is not None
    assert (out.translator.usage.input, out.translator.usage.output) == (prompt_tokens(CHAT),
                                                                        count_tokens(standin.reply))
    # Relayed chunk by chunk: most received chunks produced output right away.
    assert sum(1 for o in out.out[:-1] if o) >= len(events.chunks) - 1


def test_stream_usage_chunk_reaches_a_client_that_asked_for_it(standin: OpenAIStandIn) -> None:
    chat = {**CHAT, "stream_options": {"include_usage": True}}
    chunks = rt.stream(OPENAI, chat, provider(), standin).events().chunks
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == prompt_tokens(CHAT)


def test_stream_events_cut_anywhere_come_out_whole_and_unchanged(standin: OpenAIStandIn) -> None:
    out = rt.stream(OPENAI, CHAT, provider(), standin)
    rt.assert_cuts_change_nothing(OPENAI, provider(), out)


def test_crlf_events_and_comments_cut_byte_by_byte() -> None:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}
    body = (": keep-alive\r\n\r\ndata: " + json.dumps(chunk) + "\r\n\r\ndata: [DONE]\r\n\r\n").encode()
    translator = OPENAI.stream(provider(), "m")
    out = b"".join(translator.feed(body[i:i + 1]) for i in range(len(body))) + translator.finish()
    assert out == b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n"


def test_the_openai_sdk_reads_the_relayed_stream(standin: OpenAIStandIn) -> None:
    body = rt.stream(OPENAI, CHAT, provider(), standin).translated
    client = rt.openai_client(200, body, "text/event-stream")
    pieces = [c.choices[0].delta.content or "" for c in
              client.chat.completions.create(model="gpt-4o-mini", messages=[], stream=True)]
    assert "".join(pieces) == standin.reply


@pytest.mark.parametrize("status, error", [(429, openai.RateLimitError), (503, openai.InternalServerError)])
def test_provider_errors_pass_through_in_openais_shape(standin: OpenAIStandIn, status: int,
                                                       error: type[openai.APIStatusError]) -> None:
    standin.fail(status, times=1)
    answer = rt.call(OPENAI, CHAT, provider(), standin).answer
    assert answer.status == status and answer.usage is None
    with pytest.raises(error) as raised:
        rt.openai_client(answer.status, answer.encode()).chat.completions.create(model="m", messages=[])
    assert "told to fail" in raised.value.message


def test_wrong_key_and_unknown_model_are_the_providers_401_and_404(standin: OpenAIStandIn) -> None:
    answer = rt.call(OPENAI, CHAT, provider(token="sk-wrong"), standin).answer
    assert answer.status == 401 and answer.body["error"]["code"] == "invalid_api_key"
    answer = rt.call(OPENAI, {**CHAT, "model": "gpt-nope"}, provider(), standin).answer
    assert answer.status == 404 and answer.body["error"]["code"] == "model_not_found"


def test_an_error_that_is_not_openais_is_wrapped_in_openais_shape() -> None:
    answer = OPENAI.response(502, {}, b"<html>Bad Gateway</html>", provider(), "gpt-4o-mini")
    assert answer.status == 502
    assert answer.body["error"]["type"] == "server_error" and "Bad Gateway" in answer.body["error"]["message"]


def test_passthrough_keeps_the_clients_authorization_header(standin: OpenAIStandIn) -> None:
    up = OPENAI.request(CHAT, provider(token=None, passthrough=True), rt.CLIENT_HEADERS)
    assert up.remove_headers == () and "authorization" not in up.headers
    own = {**rt.CLIENT_HEADERS, "authorization": "Bearer sk-provider"}
    rt.validate_answer(rt.call(OPENAI, CHAT, provider(token=None, passthrough=True), standin, own).answer)
    assert standin.last.headers["authorization"] == "Bearer sk-provider"


def test_passthrough_without_a_client_key_is_refused_before_the_provider() -> None:
    with pytest.raises(ProviderError) as raised:
        OPENAI.request(CHAT, provider(token=None, passthrough=True), {"content-type": "application/json"})
    assert raised.value.status == 401 and "Authorization" in raised.value.message


def test_auth_header_override_sets_name_and_prefix() -> None:
    up = OPENAI.request(CHAT, provider(auth_header="X-Custom-Key", auth_prefix="Token"), rt.CLIENT_HEADERS)
    assert up.headers["x-custom-key"] == "Token sk-provider"
    assert "authorization" not in up.headers and up.remove_headers == ("authorization",)
    up = OPENAI.request(CHAT, provider(auth_prefix=""), rt.CLIENT_HEADERS)
    assert up.headers["authorization"] == "sk-provider" and up.remove_headers == ()


def test_path_override() -> None:
    assert OPENAI.request(CHAT, provider(path="/proxy/v1/chat"), rt.CLIENT_HEADERS).path == "/proxy/v1/chat"


@pytest.mark.parametrize("chat, param", [
    ({"model": "gpt-4o-mini"}, "messages"),
    ({"model": "gpt-4o-mini", "messages": []}, "messages"),
    ({"model": "gpt-4o-mini", "messages": ["hi"]}, "messages[0]"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
])
def test_requests_that_cannot_be_valid_are_refused_before_the_provider(chat: dict[str, object], param: str) -> None:
    with pytest.raises(ProviderError) as raised:
        OPENAI.request(chat, provider(), rt.CLIENT_HEADERS)
    assert raised.value.status == 400 and raised.value.param == param
    with pytest.raises(openai.BadRequestError):
        rt.openai_client(400, raised.value.answer().encode()).chat.completions.create(model="m", messages=[])


def test_missing_credentials_fail_closed_without_naming_a_key() -> None:
    with pytest.raises(ProviderError) as raised:
        OPENAI.request(CHAT, provider(token=None), rt.CLIENT_HEADERS)
    assert raised.value.status == 500


# -- Azure OpenAI ---------------------------------------------------------------------------


def test_azure_deployment_url_api_version_and_api_key(azure: AzureOpenAIStandIn) -> None:
    answer = rt.call(AZURE, CHAT, azure_provider(), azure).answer
    completion = rt.validate_answer(answer)
    assert (azure.last.path, azure.last.query) == ("/openai/deployments/prod-4o/chat/completions",
                                                   {"api-version": "2024-10-21"})
    assert azure.last.headers["api-key"] == "azure-key" and "authorization" not in azure.last.headers
    assert completion.model == "gpt-4o-mini-2024-07-18" and completion.choices[0].message.content == azure.reply
    assert answer.usage is not None and answer.usage.input == prompt_tokens(CHAT)


def test_azure_stream_drops_the_prompt_filter_chunk_clients_do_not_expect(azure: AzureOpenAIStandIn) -> None:
    out = rt.stream(AZURE, CHAT, azure_provider(), azure)
    events = out.events()
    assert b"prompt_filter_results" in out.body
    assert all(c.choices for c in events.chunks) and events.done
    assert events.content() == azure.reply
    assert out.translator.usage is not None


def test_azure_errors_pass_through(azure: AzureOpenAIStandIn) -> None:
    answer = rt.call(AZURE, CHAT, azure_provider(token="other"), azure).answer
    assert answer.status == 401 and "invalid subscription key" in answer.body["error"]["message"]
    answer = rt.call(AZURE, CHAT, azure_provider(deployment_name="missing"), azure).answer
    assert answer.status == 404
    with pytest.raises(openai.NotFoundError):
        rt.openai_client(answer.status, answer.encode()).chat.completions.create(model="m", messages=[])


def test_azure_model_is_the_deployments_unless_overridden() -> None:
    chat = {"messages": CHAT["messages"]}
    assert "model" not in json.loads(AZURE.request(chat, azure_provider(), rt.CLIENT_HEADERS).body)
    assert json.loads(AZURE.request(chat, azure_provider(model="gpt-4o"), rt.CLIENT_HEADERS).body)["model"] == "gpt-4o"


def test_azure_passthrough_moves_the_clients_key_to_api_key(azure: AzureOpenAIStandIn) -> None:
    own = {**rt.CLIENT_HEADERS, "authorization": "Bearer azure-key"}
    rt.validate_answer(rt.call(AZURE, CHAT, azure_provider(token=None, passthrough=True), azure, own).answer)
    assert azure.last.headers["api-key"] == "azure-key" and "authorization" not in azure.last.headers


# -- the stand-ins themselves, read by the official SDK ------------------------------------


def test_the_openai_standin_speaks_openais_api_to_the_sdk(standin: OpenAIStandIn) -> None:
    client = openai.OpenAI(api_key="sk-provider", base_url=standin.url + "/v1", max_retries=0)
    assert client.chat.completions.create(**CHAT).choices[0].message.content == standin.reply  # type: ignore[call-overload]
    chunks = list(client.chat.completions.create(**CHAT, stream=True,  # type: ignore[call-overload]
                                                 stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens == count_tokens(standin.reply)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(api_key="sk-other", base_url=standin.url + "/v1", max_retries=0).chat.completions.create(
            **CHAT)  # type: ignore[call-overload]


def test_the_azure_standin_speaks_azures_api_to_the_sdk(azure: AzureOpenAIStandIn) -> None:
    client = openai.AzureOpenAI(api_key="azure-key", azure_endpoint=azure.url, api_version="2024-10-21",
                                max_retries=0)
    completion = client.chat.completions.create(model="prod-4o", messages=CHAT["messages"])  # type: ignore[arg-type]
    assert completion.choices[0].message.content == azure.reply
    assert azure.last.path == "/openai/deployments/prod-4o/chat/completions"
