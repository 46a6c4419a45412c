"""The AI gateway end to end: the official openai SDK pointed at a Gateway (`base_url`),
a real `lychgate run` with its Envoy and its AI extension process, and provider stand-ins
speaking the providers' real APIs (tests/ai/standin_*.py) behind an AI Backend."""

from __future__ import annotations

import functools
import json
import os
import signal
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from prometheus_client.parser import text_string_to_metric_families

from tests.ai.standin_anthropic import AnthropicStandIn
from tests.ai.standin_bedrock import BedrockStandIn
from tests.ai.standin_google import GoogleStandIn
from tests.ai.standin_openai import AzureOpenAIStandIn, OpenAIStandIn
from tests.ai.standins import StandIn, count_tokens
from tests.harness import Lychgate, free_port, gateway_yaml, service_yaml, wait_for
from tests.policies.ratelimit_server import RateLimitServer
from tests.policies.ratelimit_server import start as start_rls
from tests.policies.servers import Servers

pytestmark = pytest.mark.e2e

KEY = "sk-gateway-held-key"
REPLY = "The gateway answered this."


def backend(name: str, providers: str) -> str:
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: Backend
metadata: {{name: {name}, namespace: default}}
spec:
  type: AI
  ai:
{providers}
"""


def route(name: str, backend_name: str, path: str = "/v1") -> str:
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
    - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]
      backendRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: {backend_name}}}]
"""


def openai_provider(port: int, indent: int, name: str | None = None) -> str:
    """An OpenAI provider at the stand-in, its keys `indent` spaces in (its first line not indented)."""
    lines = [f"name: {name}"] if name else []
    lines += ["openai: {authToken: {kind: SecretRef, secretRef: {name: openai-key}}}", "host: 127.0.0.1",
              f"port: {port}"]
    return ("\n" + " " * indent).join(lines)


SECRET = f"""
apiVersion: v1
kind: Secret
metadata: {{name: openai-key, namespace: default}}
stringData: {{Authorization: {KEY}}}
"""


@pytest.fixture
def openai_standin() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn(key=KEY, reply=REPLY) as standin:
        yield standin


def client(lg: Lychgate) -> openai.OpenAI:
    # The client's own key is not the provider's: the gateway holds that one.
    return openai.OpenAI(base_url=f"http://{lg.address('gw')}:8080/v1", api_key="client-key", max_retries=0,
                         timeout=20)


def ready(lg: Lychgate) -> None:
    def answers() -> bool:
        try:
            r = httpx.post(f"http://{lg.address('gw')}:8080/v1/chat/completions", timeout=5,
                           json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "ping"}]})
        except httpx.HTTPError:
            return False
        return r.status_code == 200
    wait_for(answers, 30, "the AI route to answer")


def serve(lg: Lychgate, ai: str, *docs: str, secret: str = SECRET) -> openai.OpenAI:
    """The Gateway, `secret`, Backend llm (its `ai:` body), route chat and `docs`; started
    and answering: the SDK client for it."""
    lg.write("gateway.yaml", gateway_yaml())
    lg.write("ai.yaml", "---".join([secret, backend("llm", ai), route("chat", "llm"), *docs]))
    lg.start()
    ready(lg)
    return client(lg)


def llm(provider: str) -> str:
    return "    llm:\n      " + provider


def test_openai_sdk_through_the_gateway(lychgate: Lychgate, openai_standin: OpenAIStandIn) -> None:
    sdk = serve(lychgate, llm(openai_provider(openai_standin.port, 6)))

    answer = sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])
    assert answer.choices[0].message.content == REPLY
    assert answer.usage is not None and answer.usage.total_tokens > 0
    sent = openai_standin.last
    assert sent is not None and sent.headers["authorization"] == f"Bearer {KEY}"  # the gateway's key, not the client's
    # sent whole, with its length (as providers and SigV4 signatures expect), not chunked
    assert sent.headers["content-length"] == str(len(sent.body)) and "transfer-encoding" not in sent.headers

    # Streaming: chunks arrive one by one (the stand-in spaces them), the first well before the last.
    started = time.monotonic()
    seen: list[tuple[float, str]] = []
    with sdk.chat.completions.create(model="gpt-4o-mini", stream=True, stream_options={"include_usage": True},
                                     messages=[{"role": "user", "content": "Hi"}]) as stream:
        usage = None
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                seen.append((time.monotonic() - started, chunk.choices[0].delta.content))
            usage = chunk.usage or usage
    assert "".join(text for _, text in seen) == REPLY
    assert len(seen) > 2 and seen[-1][0] - seen[0][0] > 0.04  # relayed as they came, not held back
    assert usage is not None and usage.completion_tokens == count_tokens(REPLY)

    # A provider error comes back in OpenAI's shape: the SDK raises its own error type.
    openai_standin.fail(429, times=1)
    with pytest.raises(openai.RateLimitError):
        sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])

    # Bad input is answered by the gateway; the provider is never called.
    calls = len(openai_standin.requests)
    with pytest.raises(openai.BadRequestError):
        sdk.chat.completions.create(model="gpt-4o-mini", messages=[])
    r = httpx.post(f"http://{lychgate.address('gw')}:8080/v1/chat/completions", content=b"{not json", timeout=10)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert len(openai_standin.requests) == calls


def test_failover_to_the_next_priority_group(lychgate: Lychgate, openai_standin: OpenAIStandIn) -> None:
    with AnthropicStandIn(key=KEY, reply="Claude answered.") as claude:
        providers = f"""    priorityGroups:
      - providers:
          - {openai_provider(openai_standin.port, 12, "primary")}
      - providers:
          - name: fallback
            anthropic: {{authToken: {{kind: SecretRef, secretRef: {{name: openai-key}}}}, model: claude-sonnet-4-5}}
            host: 127.0.0.1
            port: {claude.port}"""
        sdk = serve(lychgate, providers)
        openai_standin.fail(503)  # the first group is down: the second answers, in OpenAI's shape
        answer = sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])
        assert answer.choices[0].message.content == "Claude answered."
        assert claude.last is not None and claude.last.headers["x-api-key"] == KEY
        openai_standin.recover()


def test_whole_answers_arriving_in_pieces(lychgate: Lychgate) -> None:
    """A provider's whole answer that reaches the gateway in several pieces (chunked, a
    slow link) is translated whole, its status set after its last piece: an answer, a
    response guard's refusal of one (its status, not the provider's 200), an error."""
    with OpenAIStandIn(key=KEY, reply=REPLY, pieces=4, chunk_delay=0.05) as standin:
        policy = guard_policy("""    promptGuard:
      response:
        regex: {action: REJECT, builtins: [EMAIL]}""")
        sdk = serve(lychgate, llm(openai_provider(standin.port, 6)), policy)
        answer = sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])
        assert answer.choices[0].message.content == REPLY
        assert answer.usage is not None and answer.usage.completion_tokens == count_tokens(REPLY)

        standin.reply = "Write to jane.doe@example.com for help."
        with pytest.raises(openai.PermissionDeniedError) as refused:  # 403, kgateway's default
            sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])
        assert "The response was rejected" in str(refused.value)

        standin.fail(429)
        with pytest.raises(openai.RateLimitError) as limited:
            sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])
        assert limited.value.status_code == 429 and "told to fail" in str(limited.value)
        assert standin.last.status == 429


def test_missing_secret_fails_closed(lychgate: Lychgate, openai_standin: OpenAIStandIn) -> None:
    lychgate.write("gateway.yaml", gateway_yaml())
    lychgate.write("ai.yaml", backend("llm", llm(openai_provider(openai_standin.port, 6)))
                   + "---" + route("chat", "llm"))
    lychgate.start()
    wait_for(lambda: "openai-key" in str(lychgate.status("Backend", "llm")), 20, "the Backend to name the Secret")
    r = httpx.post(f"http://{lychgate.address('gw')}:8080/v1/chat/completions", timeout=10,
                   json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]})
    assert r.status_code == 500
    assert openai_standin.requests == []


def guard_policy(body: str) -> str:
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: chat-ai, namespace: default}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: chat}}]
  ai:
{body}
"""


def test_traffic_policy_ai_guards_enriches_and_sets_defaults(lychgate: Lychgate) -> None:
    """TrafficPolicy `ai` on the route: a credit card in the prompt is refused before any
    provider call; e-mail addresses in answers are masked, whole and streamed; the
    system prompt is prepended and the temperature default set, as the provider sees."""
    with OpenAIStandIn(key=KEY, reply="Write to jane.doe@example.com for help.") as standin:
        policy = guard_policy("""    promptEnrichment:
      prepend: [{role: SYSTEM, content: "Answer briefly."}]
    defaults: [{field: temperature, value: "0.2"}]
    promptGuard:
      request:
        regex: {action: REJECT, builtins: [CREDIT_CARD]}
        customResponse: {message: "no card numbers here", statusCode: 422}
      response:
        regex: {action: MASK, builtins: [EMAIL]}""")
        sdk = serve(lychgate, llm(openai_provider(standin.port, 6)), policy)
        wait_for(lambda: "<EMAIL_ADDRESS>" in (sdk.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]).choices[0].message.content or ""),
            20, "the policy to apply")
        sent = standin.last
        assert sent is not None
        assert sent.json()["messages"][0] == {"role": "system", "content": "Answer briefly."}
        assert sent.json()["temperature"] == 0.2

        streamed = "".join(c.choices[0].delta.content or "" for c in sdk.chat.completions.create(
            model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "Hi"}]) if c.choices)
        assert streamed == "Write to <EMAIL_ADDRESS> for help."

        calls = len(standin.requests)
        with pytest.raises(openai.UnprocessableEntityError) as refused:
            sdk.chat.completions.create(model="gpt-4o-mini",
                                        messages=[{"role": "user", "content": "My card is 4111 1111 1111 1111"}])
        assert "no card numbers here" in str(refused.value)
        assert len(standin.requests) == calls


def test_tokens_are_counted_per_gateway_route_backend_provider_and_model(
        lychgate: Lychgate, openai_standin: OpenAIStandIn) -> None:
    sdk = serve(lychgate, llm(openai_provider(openai_standin.port, 6)))
    usage = sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi there"}]).usage
    assert usage is not None
    for _ in sdk.chat.completions.create(model="gpt-4o-mini", stream=True,  # counted without the usage chunk
                                         messages=[{"role": "user", "content": "Hi there"}]):
        pass
    where = json.loads((lychgate.state / "ai" / "extension.json").read_text())["metrics"]
    labels = {"gateway": "default/gw", "route": "default/chat", "backend": "default/llm", "provider": "llm",
              "model": "gpt-4o-mini"}

    def tokens(kind: str) -> float:
        text = httpx.get(f"http://{where}/metrics", timeout=5).text
        return sum(sample.value for family in text_string_to_metric_families(text)
                   if family.name == "lychgate_ai_tokens" for sample in family.samples
                   if sample.name == "lychgate_ai_tokens_total" and sample.labels == {**labels, "type": kind})

    # ready()'s one answered "ping" (1 token) and the two above; every reply is the same.
    wait_for(lambda: tokens("output") == 3 * usage.completion_tokens, 10, "three answers counted")
    assert tokens("input") == 2 * usage.prompt_tokens + count_tokens("ping")
    assert tokens("total") == tokens("input") + tokens("output")
    text = httpx.get(f"http://{where}/metrics", timeout=5).text
    answered = {s.labels["status"]: s.value for family in text_string_to_metric_families(text)
                if family.name == "lychgate_ai_requests" for s in family.samples
                if s.name == "lychgate_ai_requests_total" and s.labels["route"] == "default/chat"}
    assert answered == {"2xx": 3.0}


def test_token_counts_in_the_access_log(lychgate: Lychgate, openai_standin: OpenAIStandIn) -> None:
    """A ListenerPolicy's access log prints each answer's tokens (docs/ai.md), whole and streamed."""
    log = lychgate.state / "ai-access.log"
    tokens = {key: f"%DYNAMIC_METADATA(lychgate.ai:{key})%"
              for key in ("input_tokens", "output_tokens", "total_tokens", "model", "provider", "backend")}
    policy = f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: ListenerPolicy
metadata: {{name: logs, namespace: default}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}]
  default:
    httpSettings:
      accessLog: [{{fileSink: {{path: {log}, jsonFormat: {json.dumps({"user": "%REQ(X-USER)%", **tokens})}}}}}]
"""
    sdk = serve(lychgate, llm(openai_provider(openai_standin.port, 6)), policy)
    prompt = [{"role": "user", "content": "Hi there"}]
    whole = sdk.chat.completions.create(model="gpt-4o-mini", messages=prompt, extra_headers={"x-user": "whole"})
    for _ in sdk.chat.completions.create(model="gpt-4o-mini", messages=prompt, stream=True,
                                         extra_headers={"x-user": "stream"}):
        pass

    def logged() -> dict[str, dict[str, object]]:
        entries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return {e["user"]: e for e in entries if e["user"] in ("whole", "stream")}
    entries = wait_for(lambda: len(logged()) == 2 and logged(), 15, "both requests logged")
    assert whole.usage is not None
    expected = {"input_tokens": whole.usage.prompt_tokens, "output_tokens": whole.usage.completion_tokens,
                "total_tokens": whole.usage.total_tokens, "model": "gpt-4o-mini", "provider": "llm",
                "backend": "default/llm"}
    assert entries["whole"] == {"user": "whole", **expected}
    assert entries["stream"] == {"user": "stream", **expected}


def _azure(port: int) -> str:
    return (f"azureopenai: {{authToken: {{kind: Inline, inline: azure-test-key}}, endpoint: azure.example, "
            f"deploymentName: gpt-4o-mini, apiVersion: 2024-10-21}}\n      host: 127.0.0.1\n      port: {port}")


def _gemini(port: int) -> str:
    return (f"gemini: {{authToken: {{kind: Inline, inline: gemini-test-key}}, model: gemini-2.5-flash, "
            f"apiVersion: v1beta}}\n      host: 127.0.0.1\n      port: {port}")


def _vertex(port: int) -> str:
    return (f"vertexai: {{authToken: {{kind: Inline, inline: ya29.vertex-test-token}}, model: gemini-2.5-flash, "
            f"apiVersion: v1, projectId: my-project, location: us-central1, publisher: GOOGLE}}\n"
            f"      host: 127.0.0.1\n      port: {port}")


def _bedrock(port: int) -> str:
    return (f"bedrock: {{model: anthropic.claude-3-haiku-20240307-v1:0, region: us-east-1, "
            f"auth: {{type: Secret, secretRef: {{name: aws}}}}}}\n      host: 127.0.0.1\n      port: {port}")


AWS = """
apiVersion: v1
kind: Secret
metadata: {name: aws, namespace: default}
stringData: {accessKey: AKIDSTANDIN, secretKey: standin/secret/key}
"""


@pytest.mark.parametrize("kind", ["azureopenai", "gemini", "vertexai", "bedrock"])
def test_openai_sdk_against_each_provider(lychgate: Lychgate, kind: str) -> None:
    """The same OpenAI client code, whole and streamed, against each provider's own API."""
    standin: StandIn = (AzureOpenAIStandIn(reply=REPLY) if kind == "azureopenai" else
                        BedrockStandIn() if kind == "bedrock" else GoogleStandIn())
    provider = {"azureopenai": _azure, "gemini": _gemini, "vertexai": _vertex, "bedrock": _bedrock}[kind]
    with standin:
        sdk = serve(lychgate, llm(provider(standin.port)), secret=AWS)
        whole = sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hello"}])
        text = whole.choices[0].message.content
        assert text and whole.usage is not None and whole.usage.completion_tokens > 0
        streamed = "".join(c.choices[0].delta.content or "" for c in sdk.chat.completions.create(
            model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "Hello"}]) if c.choices)
        assert streamed == text
        assert all(not r.problems for r in standin.requests), [r.problems for r in standin.requests]


def token_budget(rls_port: int, fail_open: bool = True) -> str:
    """A RateLimit GatewayExtension at the service on `rls_port` and a TrafficPolicy giving
    each `x-user` a token budget through it."""
    return "\n" + service_yaml("rls", rls_port, rls_port) + f"""---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: rls, namespace: default}}
spec:
  type: RateLimit
  rateLimit:
    grpcService: {{backendRef: {{name: rls, port: {rls_port}}}}}
    domain: ai
    failOpen: {str(fail_open).lower()}
    xRateLimitHeaders: DraftVersion03
---""" + guard_policy("""    tokenRateLimit:
      extensionRef: {name: rls}
      descriptors: [{entries: [{type: Header, header: x-user}]}]""")


def charged(rls: RateLimitServer, key: tuple[str, tuple[tuple[str, str], ...]], tokens: int) -> bool:
    return rls.hits.get(key) == tokens


@pytest.fixture
def rls() -> Iterator[RateLimitServer]:
    servers = Servers()
    try:
        yield start_rls(servers)
    finally:
        servers.close()


def test_token_budget_per_user(lychgate: Lychgate, openai_standin: OpenAIStandIn, rls: RateLimitServer) -> None:
    """30 tokens a minute per x-user, through a real rate limit service: requests pass
    until their real token counts (whole answers and streams alike) spend the budget; then
    the SDK raises RateLimitError, the provider not called, while another user is served."""
    alice = ("ai", (("x-user", "alice"),))
    rls.limits[alice] = 30
    # serve()'s readiness probe has no x-user header: not counted under the descriptor, so not limited
    sdk = serve(lychgate, llm(openai_provider(openai_standin.port, 6)), token_budget(rls.port))
    ask: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Tell me about the gateway"}]
    wait_for(lambda: sdk.chat.completions.create(model="gpt-4o-mini", messages=ask,
                                                 extra_headers={"x-user": "probe"}) and rls.hits, 20,
             "the token budget to apply")
    as_alice = sdk.with_options(default_headers={"x-user": "alice"})

    tokens = count_tokens("Tell me about the gateway") + count_tokens(REPLY)  # what each answer costs
    served = 0
    for i in range(10):
        calls = len(openai_standin.requests)
        try:
            if i % 3 == 0:
                whole = as_alice.chat.completions.create(model="gpt-4o-mini", messages=ask)
                assert whole.usage is not None and whole.usage.total_tokens == tokens
            else:  # streamed, with and without the usage chunk: charged all the same
                for _ in as_alice.chat.completions.create(model="gpt-4o-mini", messages=ask, stream=True,
                                                          stream_options={"include_usage": i % 3 == 1}):
                    pass
        except openai.RateLimitError as refused:
            assert (refused.type, refused.code) == ("tokens", "rate_limit_exceeded")
            assert refused.response.headers["x-ratelimit-remaining"] == "0"
            assert len(openai_standin.requests) == calls  # the provider was not called
            break
        served += 1
        # Charged after the answer, in the background: the service sees every token.
        wait_for(functools.partial(charged, rls, alice, served * tokens), 10, f"{served * tokens} tokens charged")
    # A request passes while the budget is not spent (the last one overruns it): 9 tokens
    # each, the 4th starts at 28 of 30 and ends at 36, the 5th is refused.
    assert served == (30 - 1) // tokens + 1 == 4
    assert sdk.chat.completions.create(model="gpt-4o-mini", messages=ask).choices  # no x-user: not limited

    # Bob's budget is his own; the service's count comes back as x-ratelimit-* headers.
    rls.limits[("ai", (("x-user", "bob"),))] = 1000
    bob = sdk.with_options(default_headers={"x-user": "bob"}).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=ask)
    assert bob.parse().choices[0].message.content == REPLY
    assert (bob.headers["x-ratelimit-limit"], bob.headers["x-ratelimit-remaining"]) == ("1000, 1000;w=60", "999")


@pytest.mark.parametrize("fail_open", [True, False])
def test_token_budget_service_down(lychgate: Lychgate, openai_standin: OpenAIStandIn, fail_open: bool) -> None:
    """The rate limit service cannot be asked: served (failOpen, the default, as Envoy's
    ratelimit filter), or refused in OpenAI's shape without calling the provider."""
    nothing_there = free_port()
    sdk = serve(lychgate, llm(openai_provider(openai_standin.port, 6)), token_budget(nothing_there, fail_open))
    sdk = sdk.with_options(default_headers={"x-user": "alice"})
    ask: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hi"}]
    log = lychgate.state / "ai" / "extension.log"
    if fail_open:  # served once the budget applies (the extension says it could not ask)
        wait_for(lambda: sdk.chat.completions.create(model="gpt-4o-mini", messages=ask).choices[0].message.content
                 == REPLY and "default/rls could not be asked" in log.read_text(), 20, "the route to fail open")
        return

    def refused() -> openai.InternalServerError | None:
        try:
            sdk.chat.completions.create(model="gpt-4o-mini", messages=ask)
        except openai.InternalServerError as err:
            return err
        return None

    err = wait_for(refused, 20, "the route to fail closed")
    assert err.status_code == 503 and err.code == "rate_limit_unavailable"
    calls = len(openai_standin.requests)
    with pytest.raises(openai.InternalServerError):
        sdk.chat.completions.create(model="gpt-4o-mini", messages=ask, stream=True)
    assert len(openai_standin.requests) == calls


def test_a_dead_extension_is_started_again(lychgate: Lychgate, openai_standin: OpenAIStandIn) -> None:
    """The AI extension crashing must not leave AI routes answering 500 until some unrelated
    change: `lychgate run` starts it again on its own."""
    sdk = serve(lychgate, llm(openai_provider(openai_standin.port, 6)))
    info = lychgate.state / "ai" / "extension.json"
    first = json.loads(info.read_text())["pid"]
    os.kill(first, signal.SIGKILL)

    def answers_again() -> bool:
        try:
            return sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
                                               ).choices[0].message.content == REPLY
        except openai.APIError:
            return False
    wait_for(answers_again, 20, "the extension to be started again")
    assert json.loads(info.read_text())["pid"] != first
