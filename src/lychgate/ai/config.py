"""What the AI extension needs to know, as the control plane hands it over.

One `AIConfig` per Gateway: every provider endpoint of the AI Backends its routes
use (by id: the value of the endpoint metadata `lychgate.ai/id` Envoy sends with
each attempt) and the AI settings of each route (by the id in the route's
metadata). Credentials are resolved here (Secrets read by the control plane), so
Envoy's configuration never holds them; the extension reads the config from a
file the control plane writes (local mode: the state directory, mode 0600;
Kubernetes: a Secret mounted into the extension's container).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

ProviderKind = Literal["openai", "azureopenai", "anthropic", "gemini", "vertexai", "bedrock"]
RouteType = Literal["CHAT", "CHAT_STREAMING"]


@dataclass(frozen=True)
class Provider:
    """One LLM provider endpoint of an AI Backend (kgateway's LLMProvider)."""

    id: str  # "<namespace>/<backend>/<provider name>"
    kind: ProviderKind
    host: str  # where Envoy sends the request (the provider's API host, or the `host` override)
    port: int
    tls: bool
    model: str | None = None  # replaces the request's model (openai, anthropic); the model (gemini, ...)
    # Credentials: a token (Inline or SecretRef, resolved), or the client's own (Passthrough).
    token: str | None = field(default=None, repr=False)  # out of the repr, as every key below
    passthrough: bool = False
    auth_header: str | None = None  # authHeader.headerName: replaces the provider's header name
    auth_prefix: str | None = None  # authHeader.prefix: replaces the provider's prefix ("Bearer")
    path: str | None = None  # path.full: replaces the provider's default path
    # routes: path suffix ("/v1/chat/completions", or "*" for any) -> how its requests are
    # handled ("completions", "messages", "models", "passthrough", ...); empty: all completions
    routes: dict[str, str] = field(default_factory=dict)
    # azureopenai
    endpoint: str | None = None
    deployment_name: str | None = None
    # azureopenai, gemini, vertexai, anthropic ("anthropic-version")
    api_version: str | None = None
    # vertexai
    project_id: str | None = None
    location: str | None = None
    publisher: str | None = None
    model_path: str | None = None
    # bedrock
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    guardrail_identifier: str | None = None
    guardrail_version: str | None = None

    def redacted(self) -> dict[str, Any]:
        """The provider as logs and snapshots may show it: credentials replaced."""
        out = asdict(self)
        for key in ("token", "secret_access_key", "session_token"):
            if out[key] is not None:
                out[key] = "<redacted>"
        return out


# A rate limit descriptor entry: ("generic", key, value), ("header", name, ""),
# ("remote_address", "", "") or ("path", "", ""), as lychgate.ir.DescriptorEntry.
DescriptorEntry = tuple[str, str, str]


@dataclass(frozen=True)
class LimitService:
    """A RateLimit GatewayExtension as the extension calls it (envoy.service.ratelimit.v3)."""

    name: str  # "namespace/name" of the GatewayExtension, for the log
    addresses: tuple[str, ...]  # "host:port" of its ready endpoints (none: unreachable)
    domain: str
    fail_open: bool = True  # unreachable: serve (True) or refuse (False), as Envoy's ratelimit filter
    timeout_ms: int = 100
    authority: str | None = None
    x_ratelimit_headers: bool = False  # DraftVersion03: x-ratelimit-limit/-remaining/-reset

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LimitService:
        return cls(**{**data, "addresses": tuple(data["addresses"])})


@dataclass(frozen=True)
class TokenRateLimit:
    """TrafficPolicy `ai.tokenRateLimit`: the descriptors each request is counted under."""

    service: LimitService
    descriptors: tuple[tuple[DescriptorEntry, ...], ...]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenRateLimit:
        return cls(LimitService.from_dict(data["service"]),
                   tuple(tuple((kind, key, value) for kind, key, value in d) for d in data["descriptors"]))


@dataclass(frozen=True)
class RouteSettings:
    """A route's TrafficPolicy `ai` (kgateway's AIPolicy), as plain data the extension's
    guard, enrichment and defaults modules read (their field names are kgateway's)."""

    id: str
    route_type: RouteType = "CHAT"
    prompt_enrichment: dict[str, Any] | None = None
    prompt_guard: dict[str, Any] | None = None
    defaults: tuple[dict[str, Any], ...] = ()
    token_rate_limit: TokenRateLimit | None = None


@dataclass
class AIConfig:
    providers: dict[str, Provider] = field(default_factory=dict)
    routes: dict[str, RouteSettings] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"providers": [asdict(p) for p in self.providers.values()],
                           "routes": [asdict(r) for r in self.routes.values()]}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AIConfig:
        data = json.loads(text)
        providers = {p["id"]: Provider(**p) for p in data.get("providers", [])}
        routes = {r["id"]: RouteSettings(**{**r, "defaults": tuple(r.get("defaults", ())), "token_rate_limit": (
                      TokenRateLimit.from_dict(r["token_rate_limit"]) if r.get("token_rate_limit") else None)})
                  for r in data.get("routes", [])}
        return cls(providers, routes)
