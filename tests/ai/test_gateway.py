"""The AI gateway end to end: the official openai SDK pointed at a Gateway (`base_url`),
a real `lychgate run` with its Envoy and its AI extension process, and provider stand-ins
speaking the providers' real APIs (tests/ai/standin_*.py) behind an AI Backend."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.ai.standin_anthropic import AnthropicStandIn
from tests.ai.standin_bedrock import BedrockStandIn
from tests.ai.standin_google import GoogleStandIn
from tests.ai.standin_openai import AzureOpenAIStandIn, OpenAIStandIn
from tests.ai.standins import StandIn, count_tokens
from tests.harness import Lychgate, gateway_yaml, wait_for

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


def test_openai_sdk_through_the_gateway(lychgate: Lychgate, openai_standin: OpenAIStandIn) -> None:
    lychgate.write("gateway.yaml", gateway_yaml())
    lychgate.write("ai.yaml", SECRET + "---" + backend("llm", "    llm:\n      " + openai_provider(openai_standin.port, 6))
                   + "---" + route("chat", "llm"))
    lychgate.start()
    ready(lychgate)
    sdk = client(lychgate)

    answer = sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])
    assert answer.choices[0].message.content == REPLY
    assert answer.usage is not None and answer.usage.total_tokens > 0
    sent = openai_standin.last
    assert sent is not None and sent.headers["authorization"] == f"Bearer {KEY}"  # the gateway's key, not the client's

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
        lychgate.write("gateway.yaml", gateway_yaml())
        lychgate.write("ai.yaml", SECRET + "---" + backend("llm", providers) + "---" + route("chat", "llm"))
        lychgate.start()
        ready(lychgate)
        sdk = client(lychgate)
        openai_standin.fail(503)  # the first group is down: the second answers, in OpenAI's shape
        answer = sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])
        assert answer.choices[0].message.content == "Claude answered."
        assert claude.last is not None and claude.last.headers["x-api-key"] == KEY
        openai_standin.recover()


def test_missing_secret_fails_closed(lychgate: Lychgate, openai_standin: OpenAIStandIn) -> None:
    lychgate.write("gateway.yaml", gateway_yaml())
    lychgate.write("ai.yaml", backend("llm", "    llm:\n      " + openai_provider(openai_standin.port, 6))
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
        lychgate.write("gateway.yaml", gateway_yaml())
        lychgate.write("ai.yaml", SECRET + "---" + backend("llm", "    llm:\n      " + openai_provider(standin.port, 6))
                       + "---" + route("chat", "llm") + "---" + policy)
        lychgate.start()
        ready(lychgate)
        sdk = client(lychgate)
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
    lychgate.write("gateway.yaml", gateway_yaml())
    lychgate.write("ai.yaml", SECRET + "---" + backend("llm", "    llm:\n      " + openai_provider(openai_standin.port, 6))
                   + "---" + route("chat", "llm"))
    lychgate.start()
    ready(lychgate)
    sdk = client(lychgate)
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
        lychgate.write("gateway.yaml", gateway_yaml())
        lychgate.write("ai.yaml", AWS + "---" + backend("llm", "    llm:\n      " + provider(standin.port))
                       + "---" + route("chat", "llm"))
        lychgate.start()
        ready(lychgate)
        sdk = client(lychgate)
        whole = sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hello"}])
        text = whole.choices[0].message.content
        assert text and whole.usage is not None and whole.usage.completion_tokens > 0
        streamed = "".join(c.choices[0].delta.content or "" for c in sdk.chat.completions.create(
            model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "Hello"}]) if c.choices)
        assert streamed == text
        assert all(not r.problems for r in standin.requests), [r.problems for r in standin.requests]
