"""kgateway's AI API (Backend `spec.ai`, TrafficPolicy `spec.ai`, GatewayParameters
`kube.aiExtension`): both of kgateway's shapes load to one model, what its CRD (or
common sense) refuses is refused naming the field, and the providers reach the AI
extension's config with their credentials read and their addresses filled in,
without a key ever showing in a message or a repr."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from lychgate.ai.config import AIConfig, LimitService, TokenRateLimit
from lychgate.api.backend import Backend
from lychgate.api.base import Resource
from lychgate.api.lychgate import GatewayParameters
from lychgate.api.policy import TrafficPolicy
from lychgate.api.registry import ManifestError, parse
from lychgate.store import Store
from lychgate.translate import backends
from lychgate.translate.ai_backends import providers_of
from lychgate.translate.policies.ai import route_settings
from lychgate.translate.values import Invalid, Unresolved
from tests.harness import service_yaml

KEY = "sk-test-0123456789abcdef"
OPENAI = {"openai": {"authToken": {"kind": "Inline", "inline": KEY}, "model": "gpt-4o-mini"}}


def backend(ai: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "Backend",
            "metadata": {"name": "llm", "namespace": "team"}, "spec": {"ai": ai, **spec}}


def load(ai: dict[str, Any], **spec: Any) -> Backend:
    obj = parse(backend(ai, **spec))
    assert isinstance(obj, Backend)
    return obj


def refused(doc: dict[str, Any]) -> str:
    with pytest.raises(ManifestError) as err:
        parse(doc)
    return str(err.value)


def secret(name: str, data: dict[str, str], namespace: str = "team") -> Resource:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return parse({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
                  "data": encoded})


def store_with(*objects: Resource) -> Store:
    store = Store()
    for obj in objects:
        store.upsert(obj)
    return store


# --- both shapes, one model ----------------------------------------------------------------


@pytest.mark.parametrize(("newer", "older"), [
    ({"llm": {**OPENAI, "host": "proxy.internal", "port": 8080, "path": {"full": "/api/chat"},
              "authHeader": {"headerName": "X-Key", "prefix": "Token"}}},
     {"llm": {"provider": OPENAI, "hostOverride": {"host": "proxy.internal", "port": 8080},
              "pathOverride": {"fullPath": "/api/chat"},
              "authHeaderOverride": {"headerName": "X-Key", "prefix": "Token"}}}),
    ({"priorityGroups": [{"providers": [{"name": "pool-0-0", **OPENAI}]},
                         {"providers": [{"name": "pool-1-0", "anthropic": {"authToken": {"kind": "Passthrough"}}},
                                        {"name": "pool-1-1", "host": "h", "port": 443, **OPENAI}]}]},
     {"multipool": {"priorities": [{"pool": [{"provider": OPENAI}]},
                                   {"pool": [{"provider": {"anthropic": {"authToken": {"kind": "Passthrough"}}}},
                                             {"provider": OPENAI, "hostOverride": {"host": "h", "port": 443}}]}]}}),
])
def test_older_names_load_as_the_newer(newer: dict[str, Any], older: dict[str, Any]) -> None:
    assert load(older, type="AI").spec == load(newer, type="AI").spec
    assert load(newer).spec.kind == "AI"


def test_older_policy_names_load_as_the_newer() -> None:
    def policy(webhook: dict[str, Any]) -> TrafficPolicy:
        tp = parse({"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
                    "metadata": {"name": "p", "namespace": "team"},
                    "spec": {"ai": {"promptGuard": {"request": {"webhook": webhook}}}}})
        assert isinstance(tp, TrafficPolicy)
        return tp

    header = [{"name": "x-user", "type": "RegularExpression", "value": ".*"}]
    newer = policy({"endpoint": {"host": "guard", "port": 8000}, "forwardHeaderMatches": header})
    assert policy({"host": {"host": "guard", "port": 8000}, "forwardHeaders": header}).spec == newer.spec


@pytest.mark.parametrize(("ai", "message"), [
    ({"llm": {**OPENAI, "provider": OPENAI}}, "provider is the older shape of openai, azureopenai"),
    ({"llm": {**OPENAI, "host": "a", "port": 1, "hostOverride": {"host": "b", "port": 2}}},
     "hostOverride is the older shape of host, port"),
    ({"llm": {**OPENAI, "path": {"full": "/a"}, "pathOverride": {"fullPath": "/b"}}},
     "path and pathOverride are two names of one field"),
    ({"priorityGroups": [{"providers": [{"name": "a", **OPENAI}]}],
      "multipool": {"priorities": [{"pool": [OPENAI]}]}}, "priorityGroups and multipool (its older shape)"),
])
def test_both_shapes_at_once_are_refused(ai: dict[str, Any], message: str) -> None:
    assert message in refused(backend(ai))


# --- what is refused --------------------------------------------------------------------------


@pytest.mark.parametrize(("ai", "where", "message"), [
    ({}, "spec.ai", "exactly one of llm, priorityGroups must be set"),
    ({"llm": {}}, "spec.ai.llm", "exactly one of openai, azureopenai, anthropic, gemini, vertexai, bedrock"),
    ({"llm": {**OPENAI, "anthropic": {"authToken": {"kind": "Passthrough"}}}}, "spec.ai.llm", "exactly one of"),
    ({"llm": {**OPENAI, "host": "h"}}, "spec.ai.llm", "both host and port must be set together"),
    ({"llm": {**OPENAI, "port": 70000, "host": "h"}}, "spec.ai.llm.port", "less than or equal to 65535"),
    ({"llm": {**OPENAI, "authHeader": {}}}, "spec.ai.llm.authHeader", "at least one of prefix, headerName"),
    ({"llm": {**OPENAI, "authHeader": {"headerName": "x key"}}}, "spec.ai.llm.authHeader.headerName", "pattern"),
    ({"llm": {**OPENAI, "routes": {"/v1/chat/completions": "chat"}}}, "spec.ai.llm.routes./v1/chat/completions",
     "completions"),
    ({"llm": {"openai": {"authToken": {"kind": "Inline"}}}}, "spec.ai.llm.openai.authToken",
     "inline must be set when kind is Inline"),
    ({"llm": {"openai": {"authToken": {"kind": "SecretRef", "inline": KEY}}}}, "spec.ai.llm.openai.authToken",
     "secretRef must be set when kind is SecretRef"),
    ({"llm": {"openai": {"authToken": {"kind": "Passthrough", "secretRef": {"name": "s"}}}}},
     "spec.ai.llm.openai.authToken", "secretRef must not be set when kind is Passthrough"),
    ({"llm": {"openai": {"authToken": {"kind": "Inline", "inline": KEY + "\n"}}}},
     "spec.ai.llm.openai.authToken.inline", "control characters"),
    ({"llm": {"openai": {}}}, "spec.ai.llm.openai.authToken", "Field required"),
    ({"llm": {"azureopenai": {"authToken": {"kind": "Passthrough"}, "endpoint": "e", "deploymentName": "d"}}},
     "spec.ai.llm.azureopenai.apiVersion", "Field required"),
    ({"llm": {"vertexai": {"authToken": {"kind": "Passthrough"}, "model": "m", "apiVersion": "v1",
                           "projectId": "p", "location": "l", "publisher": "OPENAI"}}},
     "spec.ai.llm.vertexai.publisher", "GOOGLE"),
    ({"llm": {"bedrock": {"region": "US East"}}}, "spec.ai.llm.bedrock.region", "pattern"),
    ({"llm": {"bedrock": {"guardrail": {"identifier": "g"}}}}, "spec.ai.llm.bedrock.guardrail.version",
     "Field required"),
    ({"llm": {"bedrock": {"auth": {"type": "Secret"}}}}, "spec.ai.llm.bedrock.auth", "secretRef must be specified"),
    ({"llm": {"gemini": {"authToken": {"kind": "Passthrough"}, "model": "gemini-2.0-flash"}}},
     "spec.ai.llm.gemini.apiVersion", "Field required"),
    ({"priorityGroups": []}, "spec.ai.priorityGroups", "at least 1 item"),
    ({"priorityGroups": [{"providers": [OPENAI]}]}, "spec.ai.priorityGroups[0].providers[0].name", "Field required"),
    ({"priorityGroups": [{"providers": [{"name": "Primary", **OPENAI}]}]},
     "spec.ai.priorityGroups[0].providers[0].name", "pattern"),
    ({"priorityGroups": [{"providers": [{"name": "a", **OPENAI}]}, {"providers": [{"name": "a", **OPENAI}]}]},
     "spec.ai", "provider names must be unique across all priority groups; 'a' is used more than once"),
    ({"llm": {**OPENAI, "hostOverride": {"host": "h"}}}, "spec.ai.llm.hostOverride.port", "Field required"),
])
def test_what_is_refused_names_the_field(ai: dict[str, Any], where: str, message: str) -> None:
    problem = refused(backend(ai))
    assert problem.startswith("Backend team/llm: ") and f"{where}: " in problem and message in problem
    assert KEY not in problem


def test_an_ai_backend_is_one_kind_among_the_others() -> None:
    problem = refused(backend({"llm": OPENAI}, static={"hosts": [{"host": "h", "port": 80}]}))
    assert "exactly one of ai, aws, static, dynamicForwardProxy, gcp, mcp, priorityGroups must be set" in problem
    assert "must match the specified type" in refused(backend({"llm": OPENAI}, type="Static"))


def policy(ai: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
            "metadata": {"name": "p", "namespace": "team"}, "spec": {"ai": ai}}


@pytest.mark.parametrize(("ai", "where", "message"), [
    ({"routeType": "COMPLETIONS"}, "spec.ai.routeType", "CHAT"),
    ({"promptGuard": {"request": {"regex": {"matches": [{"pattern": "(unclosed"}]}}}},
     "spec.ai.promptGuard.request.regex.matches[0].pattern", "not a valid regular expression"),
    ({"promptGuard": {"request": {"regex": {"matches": [{"name": "no pattern"}]}}}},
     "spec.ai.promptGuard.request.regex.matches[0].pattern", "Field required"),
    ({"promptGuard": {"request": {"regex": {"builtins": ["IBAN"]}}}},
     "spec.ai.promptGuard.request.regex.builtins[0]", "CREDIT_CARD"),
    ({"promptGuard": {"request": {"regex": {"action": "DROP"}}}}, "spec.ai.promptGuard.request.regex.action", "MASK"),
    ({"promptGuard": {"request": {"customResponse": {"statusCode": 700}}}},
     "spec.ai.promptGuard.request.customResponse.statusCode", "less than or equal to 599"),
    ({"promptGuard": {"response": {"webhook": {}}}}, "spec.ai.promptGuard.response.webhook", "endpoint must be set"),
    ({"promptGuard": {"response": {"moderation": {}}}}, "spec.ai.promptGuard.response.moderation", "Extra inputs"),
    ({"promptGuard": {"request": {"moderation": {"openAIModeration": {"authToken": {"kind": "Inline"}}}}}},
     "spec.ai.promptGuard.request.moderation.openAIModeration.authToken", "inline must be set"),
    ({"defaults": [{"field": "temperature", "value": 0.5}]}, "spec.ai.defaults[0].value", "valid string"),
    ({"defaults": [{"field": "", "value": "1"}]}, "spec.ai.defaults[0].field", "at least 1 character"),
    ({"promptEnrichment": {"prepend": [{"role": "SYSTEM"}]}}, "spec.ai.promptEnrichment.prepend[0].content",
     "Field required"),
    # tokenRateLimit: rateLimit.global's shape and checks
    ({"tokenRateLimit": {"extensionRef": {"name": "rls"}, "descriptors": []}}, "spec.ai.tokenRateLimit.descriptors",
     "at least 1 item"),
    ({"tokenRateLimit": {"descriptors": [{"entries": [{"type": "RemoteAddress"}]}]}},
     "spec.ai.tokenRateLimit.extensionRef", "Field required"),
    ({"tokenRateLimit": {"extensionRef": {"name": "rls"}, "descriptors": [{"entries": [{"type": "Header"}]}]}},
     "spec.ai.tokenRateLimit.descriptors[0].entries[0]", "exactly one entry type must be specified"),
])
def test_what_the_policy_refuses_names_the_field(ai: dict[str, Any], where: str, message: str) -> None:
    problem = refused(policy(ai))
    assert f"{where}: " in problem and message in problem


def gateway_parameters(ai_extension: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "GatewayParameters",
            "metadata": {"name": "gp", "namespace": "team"}, "spec": {"kube": {"aiExtension": ai_extension}}}


def test_ai_extension_parameters_are_typed() -> None:
    gp = parse(gateway_parameters({
        "enabled": True, "image": {"registry": "ghcr.io/me", "tag": "1.2"},
        "securityContext": {"runAsNonRoot": True}, "resources": {"limits": {"cpu": "500m"}},
        "env": [{"name": "LOG_LEVEL", "value": "debug"}], "ports": [{"name": "grpc", "containerPort": 18080}],
        "stats": {"customLabels": [{"name": "subject", "metadataKey": "principal:sub"}]},
        "tracing": {"endpoint": "http://otel.monitoring:4317", "sampler": {"type": "traceidratio", "arg": "0.25"},
                    "timeout": "5s", "protocol": "grpc", "transportSecurity": "insecure"}}))
    assert isinstance(gp, GatewayParameters)
    ext = gp.spec.kube.ai_extension
    assert ext is not None and ext.enabled and ext.ports == [{"name": "grpc", "containerPort": 18080}]
    assert ext.tracing is not None and ext.tracing.sampler is not None and ext.tracing.sampler.arg == "0.25"
    assert ext.stats is not None and ext.stats.custom_labels[0].metadata_key == "principal:sub"


@pytest.mark.parametrize(("ai_extension", "where"), [
    ({"ports": [{"containerPort": "grpc"}]}, "spec.kube.aiExtension.ports[0]"),
    ({"securityContext": {"runAsUser": "root"}}, "spec.kube.aiExtension.securityContext"),
    ({"tracing": {"endpoint": "otel:4317"}}, "spec.kube.aiExtension.tracing.endpoint"),
    ({"tracing": {"endpoint": "http://otel:4317", "sampler": {"arg": "1.5"}}},
     "spec.kube.aiExtension.tracing.sampler.arg"),
    ({"tracing": {"endpoint": "http://otel:4317", "protocol": "thrift"}}, "spec.kube.aiExtension.tracing.protocol"),
    ({"stats": {"customLabels": [{"name": "n", "metadataKey": "k", "metadataNamespace": "mine"}]}},
     "spec.kube.aiExtension.stats.customLabels[0].metadataNamespace"),
    ({"replicas": 2}, "spec.kube.aiExtension.replicas"),
])
def test_ai_extension_parameters_refused_name_the_field(ai_extension: dict[str, Any], where: str) -> None:
    assert f"{where}: " in refused(gateway_parameters(ai_extension))


# --- keys stay hidden ---------------------------------------------------------------------------


def test_an_inline_key_never_shows() -> None:
    b = load({"llm": OPENAI})
    assert KEY not in repr(b) and KEY not in str(b)
    assert KEY not in str(b.model_dump(mode="json"))  # what the admin snapshots show
    tp = parse(policy({"promptGuard": {"request": {"moderation": {"openAIModeration": OPENAI["openai"]}}}}))
    assert KEY not in repr(tp) and KEY not in str(tp.model_dump(mode="json"))
    # a manifest refused for another reason does not echo the key it carries either
    assert KEY not in refused(backend({"llm": {**OPENAI, "host": "h"}}))


# --- providers_of -------------------------------------------------------------------------------


def test_inline_secret_and_passthrough_tokens() -> None:
    b = load({"priorityGroups": [
        {"providers": [{"name": "inline", **OPENAI},
                       {"name": "secret", "openai": {"authToken": {"kind": "SecretRef", "secretRef": {"name": "k"}}}}]},
        {"providers": [{"name": "client", "anthropic": {"authToken": {"kind": "Passthrough"}, "apiVersion": "2023-06-01",
                                                        "model": "claude-sonnet-4-5"}}]}]})
    store = store_with(b, secret("k", {"Authorization": "Bearer sk-from-secret\n"}))
    got = providers_of(store, b)
    assert [(i, p.id) for i, p in got] == [(0, "team/llm/inline"), (0, "team/llm/secret"), (1, "team/llm/client")]
    inline, from_secret, client = (p for _, p in got)
    assert (inline.token, inline.passthrough, inline.model) == (KEY, False, "gpt-4o-mini")
    assert from_secret.token == "sk-from-secret"  # kgateway's `Bearer ` dropped, and the file's newline
    assert (client.token, client.passthrough, client.kind) == (None, True, "anthropic")
    assert (client.api_version, client.model, client.host, client.port, client.tls) == (
        "2023-06-01", "claude-sonnet-4-5", "api.anthropic.com", 443, True)
    # what the extension gets back from the file the control plane writes
    config = AIConfig(providers={p.id: p for _, p in got})
    assert AIConfig.from_json(config.to_json()).providers == config.providers
    assert "sk-from-secret" not in str(from_secret.redacted()) and KEY not in str(inline.redacted())


@pytest.mark.parametrize(("provider", "host"), [
    (OPENAI, "api.openai.com"),
    ({"azureopenai": {"authToken": {"kind": "Passthrough"}, "endpoint": "https://my-ai.openai.azure.com/",
                      "deploymentName": "gpt-4o", "apiVersion": "2024-02-15-preview"}}, "my-ai.openai.azure.com"),
    ({"gemini": {"authToken": {"kind": "Passthrough"}, "model": "gemini-2.0-flash", "apiVersion": "v1beta"}},
     "generativelanguage.googleapis.com"),
    ({"vertexai": {"authToken": {"kind": "Passthrough"}, "model": "gemini-2.0-flash", "apiVersion": "v1",
                   "projectId": "p", "location": "europe-west4", "publisher": "GOOGLE"}},
     "europe-west4-aiplatform.googleapis.com"),
    ({"bedrock": {"region": "eu-central-1", "model": "anthropic.claude-3-haiku-20240307-v1:0"}},
     "bedrock-runtime.eu-central-1.amazonaws.com"),
    ({"bedrock": {}}, "bedrock-runtime.us-east-1.amazonaws.com"),
])
def test_default_hosts_are_the_providers_apis_over_tls(provider: dict[str, Any], host: str) -> None:
    b = load({"llm": provider})
    ((group, p),) = providers_of(store_with(b), b)
    assert (group, p.id, p.host, p.port, p.tls) == (0, "team/llm/llm", host, 443, True)


def test_each_kind_carries_its_settings() -> None:
    azure = load({"llm": {"azureopenai": {"authToken": {"kind": "Inline", "inline": KEY}, "endpoint": "my-ai.openai.azure.com",
                                          "deploymentName": "gpt-4o", "apiVersion": "2024-02-15-preview"}}})
    ((_, a),) = providers_of(store_with(azure), azure)
    assert (a.endpoint, a.deployment_name, a.api_version, a.token) == (
        "my-ai.openai.azure.com", "gpt-4o", "2024-02-15-preview", KEY)
    vertex = load({"llm": {"vertexai": {"authToken": {"kind": "Passthrough"}, "model": "gemini-2.0-flash",
                                        "apiVersion": "v1", "projectId": "proj", "location": "us-central1",
                                        "publisher": "GOOGLE", "modelPath": "streamGenerateContent"}}})
    ((_, v),) = providers_of(store_with(vertex), vertex)
    assert (v.model, v.api_version, v.project_id, v.location, v.publisher, v.model_path) == (
        "gemini-2.0-flash", "v1", "proj", "us-central1", "google", "streamGenerateContent")
    gemini = load({"llm": {"gemini": {"authToken": {"kind": "Passthrough"}, "model": "gemini-2.0-flash",
                                      "apiVersion": "v1beta"}}})
    ((_, g),) = providers_of(store_with(gemini), gemini)
    assert (g.model, g.api_version, g.kind) == ("gemini-2.0-flash", "v1beta", "gemini")


@pytest.mark.parametrize(("port", "tls"), [(8080, False), (443, True)])
def test_host_and_port_override(port: int, tls: bool) -> None:
    b = load({"llm": {**OPENAI, "host": "stand-in.test", "port": port, "path": {"full": "/v1/chat"},
                      "authHeader": {"headerName": "api-key"}, "routes": {"*": "completions"}}})
    ((_, p),) = providers_of(store_with(b), b)
    assert (p.host, p.port, p.tls, p.path) == ("stand-in.test", port, tls, "/v1/chat")
    assert (p.auth_header, p.auth_prefix) == ("api-key", None)
    assert p.routes == {"*": "completions"}


def test_bedrock_credentials_from_the_secret() -> None:
    b = load({"llm": {"bedrock": {"auth": {"type": "Secret", "secretRef": {"name": "aws"}},
                                  "guardrail": {"identifier": "gr-1", "version": "2"}}}})
    store = store_with(b, secret("aws", {"accessKey": "AKIAEXAMPLE", "secretKey": "s3cr3t", "sessionToken": "tok"}))
    ((_, p),) = providers_of(store, b)
    assert (p.access_key_id, p.secret_access_key, p.session_token) == ("AKIAEXAMPLE", "s3cr3t", "tok")
    assert (p.region, p.guardrail_identifier, p.guardrail_version, p.token) == ("us-east-1", "gr-1", "2", None)
    no_auth = load({"llm": {"bedrock": {}}})
    ((_, q),) = providers_of(store_with(no_auth), no_auth)
    assert (q.access_key_id, q.secret_access_key, q.session_token) == (None, None, None)


@pytest.mark.parametrize(("ai", "secrets", "reason", "message"), [
    ({"llm": {"openai": {"authToken": {"kind": "SecretRef", "secretRef": {"name": "x"}}}}}, [], "SecretNotFound",
     "Backend team/llm spec.ai.llm.openai.authToken.secretRef: Secret team/x not found"),
    ({"llm": {"openai": {"authToken": {"kind": "SecretRef", "secretRef": {"name": "x"}}}}},
     [secret("x", {"authorization": "sk-wrong-key-name"})], "InvalidSecret",
     "Backend team/llm spec.ai.llm.openai.authToken.secretRef: Secret team/x needs the key under Authorization"),
    ({"llm": {"openai": {"authToken": {"kind": "SecretRef", "secretRef": {"name": "x"}}}}},
     [secret("x", {"Authorization": "sk-one\nsk-two"})], "InvalidSecret", "Secret team/x needs the key"),
    ({"llm": {"openai": {"authToken": {"kind": "SecretRef", "secretRef": {"name": "x"}}}}},
     [secret("x", {"Authorization": "sk-elsewhere"}, namespace="other")], "SecretNotFound", "Secret team/x not found"),
    ({"priorityGroups": [{"providers": [{"name": "a", **OPENAI}]}, {"providers": [
        {"name": "b", "bedrock": {"auth": {"type": "Secret", "secretRef": {"name": "aws"}}}}]}]},
     [secret("aws", {"accessKey": "AKIAEXAMPLE"})], "InvalidSecret",
     "Backend team/llm spec.ai.priorityGroups[1].providers[0].bedrock.auth.secretRef: Secret team/aws needs "
     "accessKey and secretKey"),
    ({"llm": {"bedrock": {"auth": {"type": "Secret", "secretRef": {"name": "aws"}}}}}, [], "SecretNotFound",
     "Backend team/llm spec.ai.llm.bedrock.auth.secretRef: Secret team/aws not found"),
])
def test_unusable_secrets_are_unresolved(ai: dict[str, Any], secrets: list[Resource], reason: str,
                                         message: str) -> None:
    b = load(ai)
    with pytest.raises(Unresolved) as err:
        providers_of(store_with(b, *secrets), b)
    assert err.value.reason == reason and message in str(err.value)
    for word in ("sk-wrong-key-name", "sk-one", "sk-elsewhere", "AKIAEXAMPLE", KEY):
        assert word not in str(err.value)


def test_an_azure_endpoint_with_a_path_is_invalid() -> None:
    b = load({"llm": {"azureopenai": {"authToken": {"kind": "Passthrough"}, "endpoint": "my-ai.openai.azure.com/openai",
                                      "deploymentName": "d", "apiVersion": "v"}}})
    with pytest.raises(Invalid) as err:
        providers_of(store_with(b), b)
    assert err.value.path == "Backend team/llm spec.ai.llm.azureopenai.endpoint"


def test_ai_backend_becomes_a_cluster_of_its_providers_without_their_keys() -> None:
    b = load({"priorityGroups": [{"providers": [{"name": "a", **OPENAI}, {"name": "b", **OPENAI}]},
                                 {"providers": [{"name": "c", **OPENAI}]}]})
    store = store_with(b)
    assert backends.problem(store, b) == ""
    cluster = backends.cluster(store, b)
    assert cluster.discovery == "ai"
    assert [(e.id, e.host, e.port, e.tls, e.priority) for e in cluster.ai_endpoints] == [
        ("team/llm/a", "api.openai.com", 443, True, 0), ("team/llm/b", "api.openai.com", 443, True, 0),
        ("team/llm/c", "api.openai.com", 443, True, 1)]
    assert KEY not in repr(cluster)


def test_ai_backend_with_a_missing_secret_cannot_be_served() -> None:
    b = load({"llm": {"openai": {"authToken": {"kind": "SecretRef", "secretRef": {"name": "gone"}}}}})
    assert "Secret team/gone not found" in backends.problem(store_with(b), b)


# --- route_settings --------------------------------------------------------------------------------


def test_route_settings_are_plain_data_with_kgateway_names() -> None:
    tp = parse(policy({
        "routeType": "CHAT_STREAMING",
        "promptEnrichment": {"prepend": [{"role": "SYSTEM", "content": "Answer in French."}]},
        "promptGuard": {
            "request": {"customResponse": {"message": "no"},
                        "regex": {"action": "REJECT", "builtins": ["CREDIT_CARD"],
                                  "matches": [{"pattern": "secret", "name": "word"}]},
                        "webhook": {"host": {"host": "guard", "port": 8000}},
                        "moderation": {"openAIModeration": {"model": "omni-moderation-latest", "authToken": {
                            "kind": "SecretRef", "secretRef": {"name": "mod"}}}}},
            "response": {"regex": {"builtins": ["EMAIL"]}}},
        "defaults": [{"field": "temperature", "value": "0.5"}, {"field": "max_tokens", "value": "100",
                                                               "override": True}]}))
    assert isinstance(tp, TrafficPolicy) and tp.spec.ai is not None
    store = store_with(tp, secret("mod", {"Authorization": "sk-moderation"}))
    rs = route_settings("team/p", tp.spec.ai, store=store, namespace="team")
    assert rs.id == "team/p" and rs.route_type == "CHAT_STREAMING"
    assert rs.prompt_enrichment == {"prepend": [{"role": "SYSTEM", "content": "Answer in French."}], "append": []}
    assert rs.defaults == ({"field": "temperature", "value": "0.5", "override": False},
                           {"field": "max_tokens", "value": "100", "override": True})
    assert rs.prompt_guard == {
        "request": {"customResponse": {"message": "no", "statusCode": 403},
                    "regex": {"action": "REJECT", "builtins": ["CREDIT_CARD"], "matches": [{"pattern": "secret",
                                                                                            "name": "word"}]},
                    "webhook": {"endpoint": {"host": "guard", "port": 8000}, "forwardHeaderMatches": []},
                    "moderation": {"openAIModeration": {"model": "omni-moderation-latest",
                                                        "authToken": {"kind": "Inline", "inline": "sk-moderation"}}}},
        "response": {"regex": {"matches": [], "builtins": ["EMAIL"], "action": "MASK"}}}
    AIConfig(routes={rs.id: rs}).to_json()  # plain data all through
    with pytest.raises(Unresolved, match=r"spec.ai.promptGuard.request.moderation.openAIModeration.authToken"
                                         r".secretRef: Secret team/mod not found"):
        route_settings("team/p", tp.spec.ai, store=store_with(tp), namespace="team")


RLS_PORT = 18081
TOKEN_LIMIT = {"extensionRef": {"name": "rls"}, "descriptors": [
    {"entries": [{"type": "Generic", "generic": {"key": "budget", "value": "chat"}}, {"type": "Header", "header": "X-User"}]},
    {"entries": [{"type": "RemoteAddress"}]}, {"entries": [{"type": "Path"}]}]}


def rate_limit_extension(**settings: Any) -> Resource:
    return parse({"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "GatewayExtension",
                  "metadata": {"name": "rls", "namespace": "team"},
                  "spec": {"rateLimit": {"grpcService": {"backendRef": {"name": "rls", "port": 8081}},
                                         "domain": "ai", **settings}}})


def rls_service() -> list[Resource]:
    return [parse(doc) for doc in yaml.safe_load_all(service_yaml("rls", 8081, RLS_PORT, namespace="team"))]


def test_token_rate_limit_reaches_the_extension_with_its_service_addresses() -> None:
    tp = parse(policy({"tokenRateLimit": TOKEN_LIMIT}))
    assert isinstance(tp, TrafficPolicy) and tp.spec.ai is not None
    ext = rate_limit_extension(failOpen=False, timeout="250ms", xRateLimitHeaders="DraftVersion03")
    rs = route_settings("team/p", tp.spec.ai, store=store_with(tp, ext, *rls_service()), namespace="team")
    assert rs.token_rate_limit == TokenRateLimit(
        LimitService("team/rls", (f"127.0.0.1:{RLS_PORT}",), "ai", fail_open=False, timeout_ms=250,
                     x_ratelimit_headers=True),
        ((("generic", "budget", "chat"), ("header", "x-user", "")), (("remote_address", "", ""),),
         (("path", "", ""),)))
    assert AIConfig.from_json(AIConfig(routes={rs.id: rs}).to_json()).routes[rs.id] == rs
    # Envoy's defaults: 100ms, fail open; no ready endpoint: no address (the extension's failOpen decides)
    no_endpoints = rls_service()[:1]  # the Service, no EndpointSlice
    rs = route_settings("team/p", tp.spec.ai, store=store_with(tp, rate_limit_extension(), *no_endpoints),
                        namespace="team")
    assert rs.token_rate_limit is not None
    assert rs.token_rate_limit.service == LimitService("team/rls", (), "ai", fail_open=True, timeout_ms=100)


def test_token_rate_limit_problems_name_the_field_or_the_extension() -> None:
    tp = parse(policy({"tokenRateLimit": TOKEN_LIMIT}))
    assert isinstance(tp, TrafficPolicy) and tp.spec.ai is not None
    with pytest.raises(Unresolved, match="GatewayExtension team/rls not found"):
        route_settings("team/p", tp.spec.ai, store=store_with(tp), namespace="team")
    auth = parse({"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "GatewayExtension",
                  "metadata": {"name": "rls", "namespace": "team"},
                  "spec": {"extAuth": {"grpcService": {"backendRef": {"name": "rls", "port": 8081}}}}})
    with pytest.raises(Unresolved, match="is of type ExtAuth, not RateLimit"):
        route_settings("team/p", tp.spec.ai, store=store_with(tp, auth), namespace="team")
    bad = parse(policy({"tokenRateLimit": {**TOKEN_LIMIT, "descriptors": [
        {"entries": [{"type": "Header", "header": "x user"}]}]}}))
    assert isinstance(bad, TrafficPolicy) and bad.spec.ai is not None
    with pytest.raises(Invalid, match=r"spec.ai.tokenRateLimit.descriptors\[0\].entries\[0\].header"):
        route_settings("team/p", bad.spec.ai, store=store_with(bad, rate_limit_extension()), namespace="team")


def test_route_settings_defaults() -> None:
    tp = parse(policy({"promptGuard": {}}))
    assert isinstance(tp, TrafficPolicy) and tp.spec.ai is not None
    rs = route_settings("team/p", tp.spec.ai, store=store_with(tp), namespace="team")
    assert (rs.route_type, rs.prompt_enrichment, rs.prompt_guard, rs.defaults) == ("CHAT", None, {}, ())


def test_routes_lychgate_cannot_serve_are_refused_by_name() -> None:
    b = load({"llm": {**OPENAI, "routes": {"/v1/chat/completions": "completions", "/v1/messages": "messages"}}})
    assert backends.problem(store_with(b), b) == (
        "Backend team/llm spec.ai.llm.routes['/v1/messages']: 'messages' is not served by lychgate yet; "
        "requests are OpenAI chat completions (completions)")
    ok = load({"llm": {**OPENAI, "routes": {"*": "completions"}}})
    assert backends.problem(store_with(ok), ok) == ""
