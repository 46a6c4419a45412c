"""The AI gateway's API: Backend `spec.ai` and TrafficPolicy `spec.ai`, field for
field kgateway's (api/v1alpha1/ai_backend.go, ai_policy.go).

A Backend of type AI names one LLM provider (`llm`) or ordered groups of named
providers (`priorityGroups`, the next group serving when the first fails). Each
provider is one of openai, azureopenai, anthropic, gemini, vertexai, bedrock, with
its credentials (`authToken`: Inline, SecretRef or Passthrough; Bedrock: AWS
credentials from a Secret) and optional `host`/`port`, `path` and `authHeader`
overrides. kgateway's older shape (`llm.provider.<kind>`, `hostOverride`,
`pathOverride.fullPath`, `authHeaderOverride`, `multipool.priorities[].pool[]`) is
accepted and moved to the newer one on load; translation reads only the newer.

An Inline token is a SecretStr: neither a repr nor a JSON dump of the model shows
it (the admin snapshots dump objects as JSON), only `get_secret_value()` does.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, SecretStr, WithJsonSchema, field_validator, model_validator

from lychgate.api.backend_common import AwsAuth, Host
from lychgate.api.base import Model, flattened, renamed
from lychgate.api.gateway import HeaderMatch
from lychgate.api.headers import HTTPHeaderName
from lychgate.api.lychgate import LocalObjectReference
from lychgate.api.rate_limit import GlobalRateLimitPolicy
from lychgate.api.rules import at_least_one_of, at_most_one_of, exactly_one_of

ProviderKind = Literal["openai", "azureopenai", "anthropic", "gemini", "vertexai", "bedrock"]
KINDS: tuple[ProviderKind, ...] = ("openai", "azureopenai", "anthropic", "gemini", "vertexai", "bedrock")

# A request header name (RFC 9110 token).
HeaderName = HTTPHeaderName
# The CRD says string: a SecretStr's JSON schema would carry format: password.
Token = Annotated[SecretStr, Field(min_length=1), WithJsonSchema({"type": "string", "minLength": 1})]
# gwv1.SectionName: what policies' targetRefs[].sectionName name a provider by.
SectionName = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")]


# --- credentials -------------------------------------------------------------------------


class SingleAuthToken(Model):
    """The key the gateway sends to the provider: written here (Inline), read from the
    Secret's `Authorization` key in the Backend's namespace (SecretRef), or the client's
    own `Authorization` header passed on (Passthrough)."""

    kind: Literal["Inline", "SecretRef", "Passthrough"]
    inline: Token | None = None
    secret_ref: LocalObjectReference | None = None

    @field_validator("inline")
    @classmethod
    def _one_line(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and any(ord(c) < 0x20 or ord(c) == 0x7F for c in value.get_secret_value()):
            raise ValueError("the token must not contain control characters such as line breaks")
        return value

    RULES = (at_most_one_of("inline", "secret_ref"),)

    @model_validator(mode="after")
    def _source(self) -> SingleAuthToken:
        # Which one the kind asks for (RULES has refused both).
        wanted = {"Inline": "inline", "SecretRef": "secretRef"}.get(self.kind)
        given = "inline" if self.inline is not None else "secretRef" if self.secret_ref is not None else None
        if given != wanted:
            raise ValueError(f"{wanted} must be set when kind is {self.kind}" if wanted else
                             f"{given} must not be set when kind is Passthrough (the client's Authorization "
                             "header is sent on)")
        return self


# --- providers ---------------------------------------------------------------------------


class OpenAIConfig(Model):
    auth_token: SingleAuthToken
    model: str | None = Field(None, description="Replaces the request's model (unset: the request's).")


class AzureOpenAIConfig(Model):
    auth_token: SingleAuthToken
    endpoint: str = Field(min_length=1, description="Such as my-endpoint.openai.azure.com; a scheme is stripped.")
    deployment_name: str = Field(min_length=1)
    api_version: str = Field(min_length=1)


class GeminiConfig(Model):
    auth_token: SingleAuthToken
    model: str = Field(min_length=1)
    api_version: str = Field(min_length=1)


class VertexAIConfig(Model):
    auth_token: SingleAuthToken
    model: str = Field(min_length=1)
    api_version: str = Field(min_length=1)
    project_id: str = Field(min_length=1)
    location: str = Field(min_length=1)
    model_path: str | None = Field(None, description="The model's method (default generateContent).")
    publisher: Literal["GOOGLE"]


class AnthropicConfig(Model):
    auth_token: SingleAuthToken
    api_version: str | None = Field(None, description="Sent as the anthropic-version header.")
    model: str | None = Field(None, description="Replaces the request's model (unset: the request's).")


class AWSGuardrailConfig(Model):
    identifier: str = Field(min_length=1)
    version: str = Field(min_length=1)


class BedrockConfig(Model):
    auth: AwsAuth | None = Field(
        None, description="Unset: the AI extension's own AWS credentials (environment, web identity, Pod identity).")
    model: str | None = Field(None, min_length=1, description="The model id (unset: the request's model).")
    region: str = Field("us-east-1", min_length=1, max_length=63, pattern=r"^[a-z0-9-]+$")
    guardrail: AWSGuardrailConfig | None = None


ProviderConfig = OpenAIConfig | AzureOpenAIConfig | AnthropicConfig | GeminiConfig | VertexAIConfig | BedrockConfig


class SupportedLLMProvider(Model):
    """The provider's kind and its settings (kgateway's older `llm.provider` holds just these)."""

    openai: OpenAIConfig | None = None
    azureopenai: AzureOpenAIConfig | None = None
    anthropic: AnthropicConfig | None = None
    gemini: GeminiConfig | None = None
    vertexai: VertexAIConfig | None = None
    bedrock: BedrockConfig | None = None


class PathOverride(Model):
    full: str | None = Field(None, min_length=1, description="Replaces the provider's API path.")
    full_path: str | None = Field(None, min_length=1)  # kgateway's older name of full

    @model_validator(mode="after")
    def _older_name(self) -> PathOverride:
        return renamed(self, "full", "full_path")


class AuthHeader(Model):
    """The header the key is sent in, and its prefix (each provider has its own defaults:
    `Authorization: Bearer` for OpenAI, `x-api-key` for Anthropic, `api-key` for Azure)."""

    prefix: str | None = Field(None, min_length=1)
    header_name: HeaderName | None = None

    RULES = (at_least_one_of("prefix", "header_name"),)


# How the extension treats requests by path (kgateway's RouteType of a provider's `routes`).
BackendRouteType = Literal["completions", "messages", "models", "passthrough", "responses", "anthropic_token_count"]


class LLMProvider(SupportedLLMProvider):
    """One LLM provider: its kind and settings, and where and how requests reach it."""

    host: str | None = Field(None, min_length=1, description="Send requests here instead (with port).")
    port: int | None = Field(None, ge=1, le=65535, description="With host; 443 is TLS, any other port plain HTTP.")
    path: PathOverride | None = None
    auth_header: AuthHeader | None = None
    routes: dict[Annotated[str, Field(min_length=1)], BackendRouteType] = Field(
        default_factory=dict, description="Path suffix (or *) -> how requests to it are handled (default: "
                                          "completions).")
    # kgateway's older shape of the same settings, moved to the fields above on load.
    provider: SupportedLLMProvider | None = None
    host_override: Host | None = None
    path_override: PathOverride | None = None
    auth_header_override: AuthHeader | None = None

    @model_validator(mode="after")
    def _shape(self) -> LLMProvider:
        p = flattened(flattened(self, "provider", KINDS), "host_override", ("host", "port"))
        p = renamed(renamed(p, "path", "path_override"), "auth_header", "auth_header_override")
        if sum(getattr(p, k) is not None for k in KINDS) != 1:
            raise ValueError(f"exactly one of {', '.join(KINDS)} must be set")
        if (p.host is None) != (p.port is None):
            raise ValueError("both host and port must be set together")
        return p

    @property
    def kind(self) -> ProviderKind:
        return next(k for k in KINDS if getattr(self, k) is not None)

    @property
    def config(self) -> ProviderConfig:
        config: ProviderConfig = getattr(self, self.kind)
        return config


class NamedLLMProvider(LLMProvider):
    name: SectionName = Field(description="Unique across the Backend's groups; policies target it by sectionName.")


class PriorityGroup(Model):
    """Providers that share load; the next group serves when none of them can."""

    providers: list[NamedLLMProvider] = Field(min_length=1, max_length=32)


class Priority(Model):
    """kgateway's older `multipool.priorities[]`: a group of unnamed providers."""

    pool: list[LLMProvider] = Field(min_length=1, max_length=32)


class MultiPoolConfig(Model):
    priorities: list[Priority] = Field(min_length=1, max_length=32)


class AIBackend(Model):
    """Backend `spec.ai`: one provider (`llm`), or groups of providers in priority order."""

    llm: LLMProvider | None = None
    priority_groups: list[PriorityGroup] | None = Field(None, min_length=1, max_length=32)
    multipool: MultiPoolConfig | None = None  # kgateway's older shape of priorityGroups

    RULES = (exactly_one_of("llm", ("priority_groups", "multipool")),)

    @model_validator(mode="after")
    def _shape(self) -> AIBackend:
        ai = self
        if self.multipool is not None:
            if self.priority_groups is not None:
                raise ValueError("priorityGroups and multipool (its older shape) cannot both be set; "
                                 "use priorityGroups")
            ai = self.model_copy(update={"multipool": None, "priority_groups": [
                PriorityGroup(providers=[_named(p, f"pool-{i}-{j}") for j, p in enumerate(group.pool)])
                for i, group in enumerate(self.multipool.priorities)]})
        seen: set[str] = set()
        for group in ai.priority_groups or ():
            for provider in group.providers:
                if provider.name in seen:
                    raise ValueError(f"provider names must be unique across all priority groups; "
                                     f"{provider.name!r} is used more than once")
                seen.add(provider.name)
        return ai


def _named(provider: LLMProvider, name: str) -> NamedLLMProvider:
    """An older pool entry (unnamed) as a named provider of a priority group."""
    fields = {f: getattr(provider, f) for f in LLMProvider.model_fields if getattr(provider, f) is not None}
    return NamedLLMProvider.model_validate({**fields, "name": name})


# --- TrafficPolicy `ai` ------------------------------------------------------------------


RouteType = Literal["CHAT", "CHAT_STREAMING"]


class Message(Model):
    role: str = Field(description="Such as SYSTEM or USER.")
    content: str


class AIPromptEnrichment(Model):
    """Messages added before (prepend) and after (append) the client's."""

    prepend: list[Message] = Field(default_factory=list)
    append: list[Message] = Field(default_factory=list)


BuiltIn = Literal["SSN", "CREDIT_CARD", "PHONE_NUMBER", "EMAIL"]


class RegexMatch(Model):
    pattern: str = Field(min_length=1, description="A Python regular expression.")
    name: str | None = Field(None, description="Shown in logs when it matches.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as err:
            raise ValueError(f"not a valid regular expression: {err}") from None
        return value


class Regex(Model):
    matches: list[RegexMatch] = Field(default_factory=list)
    builtins: list[BuiltIn] = Field(default_factory=list)
    action: Literal["MASK", "REJECT"] = Field("MASK", description="For requests; responses are always masked.")


class Webhook(Model):
    """A service that sees each prompt (or answer) and may reject or change it."""

    endpoint: Host | None = None  # required; None only until the older name is moved here
    forward_header_matches: list[HeaderMatch] = Field(default_factory=list)
    # kgateway's older names of endpoint and forwardHeaderMatches
    host: Host | None = None
    forward_headers: list[HeaderMatch] | None = None

    @model_validator(mode="after")
    def _older_names(self) -> Webhook:
        hook = renamed(renamed(self, "endpoint", "host"), "forward_header_matches", "forward_headers")
        if hook.endpoint is None:
            raise ValueError("endpoint must be set")
        return hook


class CustomResponse(Model):
    message: str = "The request was rejected due to inappropriate content"
    status_code: int = Field(403, ge=200, le=599)


class Moderation(Model):
    open_ai_moderation: OpenAIConfig | None = Field(None, alias="openAIModeration")


class PromptguardRequest(Model):
    """Guards on the client's prompt, in order webhook, regex, moderation; each may reject."""

    custom_response: CustomResponse | None = None
    regex: Regex | None = None
    webhook: Webhook | None = None
    moderation: Moderation | None = None


class PromptguardResponse(Model):
    """Guards on the provider's answer, in order webhook, regex."""

    regex: Regex | None = None
    webhook: Webhook | None = None


class AIPromptGuard(Model):
    request: PromptguardRequest | None = None
    response: PromptguardResponse | None = None


class FieldDefault(Model):
    """A field of the request body set when the client left it out (or always, with override)."""

    field: str = Field(min_length=1, description="A key of the JSON request body, such as temperature.")
    value: str = Field(min_length=1, description="Its value as JSON (0.5, [1,2], \"text\"); else a string.")
    override: bool = False


class AIPolicy(Model):
    """TrafficPolicy `spec.ai`: what the gateway does to the LLM requests of the routes it targets."""

    prompt_enrichment: AIPromptEnrichment | None = None
    prompt_guard: AIPromptGuard | None = None
    defaults: list[FieldDefault] = Field(default_factory=list)
    route_type: RouteType = "CHAT"
    # lychgate's own (kgateway's Envoy had nothing to carry it): a token budget per
    # descriptor, counted by a RateLimit GatewayExtension's service. The AI extension
    # asks it before calling the provider and charges the answer's tokens after.
    token_rate_limit: GlobalRateLimitPolicy | None = None
