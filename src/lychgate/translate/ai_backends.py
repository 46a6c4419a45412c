"""AI Backends as the AI extension reads them (lychgate.ai.config): every provider with
its credentials read and its address filled in (a TrafficPolicy's `ai` settings are
policies/ai.py's, its moderation guard's token read here as a provider's). No Envoy here.

Where a provider is reached: its API's host on port 443 (api.openai.com, the Azure
`endpoint`, api.anthropic.com, generativelanguage.googleapis.com,
`<location>`-aiplatform.googleapis.com, bedrock-runtime.`<region>`.amazonaws.com), or
`host` and `port` when both are given. TLS is kgateway's rule: exactly when the port
is 443 (verified against the system CAs with the host as SNI); any other port is
plain HTTP, for a local model server or a test stand-in.

Credentials: an Inline token as written; a SecretRef's from the key `Authorization`
of the Secret in the Backend's (or policy's) namespace, where kgateway reads it,
with a leading `Bearer ` dropped (the provider's own prefix is added when sent) and
surrounding whitespace (a trailing newline from a file) dropped; Passthrough sends
the client's own. Bedrock's AWS credentials come from the `auth` Secret's
`accessKey`, `secretKey` and optional `sessionToken`, as a Lambda Backend's do;
without `auth` the extension uses the AWS credentials of its own environment.

A Secret that is missing or unusable is Unresolved: the routes to the Backend fail
closed instead of reaching a provider without its key. Messages name the object
and the field, never a credential.
"""

from __future__ import annotations

import re
from dataclasses import replace

from lychgate.ai.config import Provider
from lychgate.api.ai import (
    AnthropicConfig,
    AzureOpenAIConfig,
    BedrockConfig,
    GeminiConfig,
    LLMProvider,
    OpenAIConfig,
    ProviderConfig,
    SingleAuthToken,
)
from lychgate.api.backend import Backend
from lychgate.api.core import Secret
from lychgate.store import Store
from lychgate.translate.secrets import secret_field
from lychgate.translate.values import Invalid, Unresolved

ASSUME_ROLE_REFUSED = ("lychgate does not assume IAM roles: that needs AWS STS, which lychgate does not call, and the "
                       "AI extension signs Bedrock requests only with a Secret's keys or its own default credential "
                       "chain; use type: Secret, or give the extension the role's credentials (web identity, Pod "
                       "Identity)")

TLS_PORT = 443
AUTH_KEY = "Authorization"  # the Secret key kgateway reads a SecretRef token from
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def providers_of(store: Store, backend: Backend) -> list[tuple[int, Provider]]:
    """(priority group index, provider) of every provider of an AI Backend, in order;
    `llm` is group 0, named "llm". Raises Invalid or Unresolved."""
    ai = backend.spec.ai
    assert ai is not None
    where = f"Backend {backend.namespace}/{backend.name} spec.ai"
    if ai.llm is not None:
        return [(0, _provider(store, backend, ai.llm, "llm", f"{where}.llm"))]
    return [(i, _provider(store, backend, p, p.name, f"{where}.priorityGroups[{i}].providers[{j}]"))
            for i, group in enumerate(ai.priority_groups or ()) for j, p in enumerate(group.providers)]


def _provider(store: Store, backend: Backend, llm: LLMProvider, name: str, path: str) -> Provider:
    config, at = llm.config, f"{path}.{llm.kind}"
    for suffix, kind in llm.routes.items():
        if kind != "completions":  # clients speak OpenAI's Chat Completions to the gateway, nothing else yet
            raise Invalid(f"{path}.routes[{suffix!r}]", f"{kind!r} is not served by lychgate yet; requests are "
                                                        "OpenAI chat completions (completions)")
    host, port = (llm.host, llm.port) if llm.host is not None and llm.port is not None else \
        (_default_host(llm.kind, config, at), TLS_PORT)
    base = Provider(id=f"{backend.namespace}/{backend.name}/{name}", kind=llm.kind, host=host, port=port,
                    tls=port == TLS_PORT, path=llm.path.full if llm.path else None, routes=dict(llm.routes),
                    auth_header=llm.auth_header.header_name if llm.auth_header else None,
                    auth_prefix=llm.auth_header.prefix if llm.auth_header else None)
    if isinstance(config, BedrockConfig):
        access, secret, session = _aws_credentials(store, backend.namespace, config, at)
        guardrail = config.guardrail
        return replace(base, model=config.model, region=config.region, access_key_id=access,
                       secret_access_key=secret, session_token=session,
                       guardrail_identifier=guardrail.identifier if guardrail else None,
                       guardrail_version=guardrail.version if guardrail else None)
    token = auth_token(store, backend.namespace, config.auth_token, f"{at}.authToken")
    base = replace(base, token=token, passthrough=token is None)
    if isinstance(config, OpenAIConfig):
        return replace(base, model=config.model or None)
    if isinstance(config, AnthropicConfig):
        return replace(base, model=config.model or None, api_version=config.api_version or None)
    if isinstance(config, AzureOpenAIConfig):
        return replace(base, endpoint=_azure_host(config, at), deployment_name=config.deployment_name,
                       api_version=config.api_version)
    if isinstance(config, GeminiConfig):
        return replace(base, model=config.model, api_version=config.api_version)
    # Vertex AI; publisher as its URL segment (.../publishers/google/models/...)
    return replace(base, model=config.model, api_version=config.api_version, project_id=config.project_id,
                   location=config.location, publisher=config.publisher.lower(), model_path=config.model_path)


def _default_host(kind: str, config: ProviderConfig, path: str) -> str:
    """The provider's API host (its codec knows it: Vertex AI's by location, Bedrock's by region)."""
    if isinstance(config, AzureOpenAIConfig):
        return _azure_host(config, path)
    # The codecs are the AI extension's (aiohttp, botocore: 25 MiB of modules): imported once a
    # Gateway routes to an AI Backend, not into every control plane.
    from lychgate.ai.providers import CODECS

    return CODECS[kind].upstream_host(location=getattr(config, "location", None),
                                      region=getattr(config, "region", None))


def _azure_host(config: AzureOpenAIConfig, path: str) -> str:
    """The `endpoint`'s host: kgateway strips a scheme; a path or port is refused
    (another port is the `host`/`port` override's job)."""
    host = _SCHEME.sub("", config.endpoint).rstrip("/")
    if not host or "/" in host or ":" in host:
        raise Invalid(f"{path}.endpoint", f"{config.endpoint!r} is not a host name such as "
                                          "my-endpoint.openai.azure.com (set host and port for another port)")
    return host


def _secret(store: Store, namespace: str, name: str, path: str) -> Secret:
    found = store.get(Secret, namespace, name)
    if found is None:
        raise Unresolved("SecretNotFound", f"{path}: Secret {namespace}/{name} not found")
    return found


def _text(secret: Secret, key: str) -> str | None:
    """A Secret's value under `key` as text, stripped; None when absent, empty, not UTF-8
    or holding control characters (nothing a header could carry)."""
    raw = secret_field(secret, key)
    try:
        text = raw.decode().strip() if raw is not None else ""
    except UnicodeDecodeError:
        return None
    return text if text and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in text) else None


def auth_token(store: Store, namespace: str, token: SingleAuthToken, path: str) -> str | None:
    """The key to send (None: Passthrough, the client's own)."""
    if token.kind == "Passthrough":
        return None
    if token.inline is not None:
        return token.inline.get_secret_value()
    assert token.secret_ref is not None
    where = f"{path}.secretRef"
    secret = _secret(store, namespace, token.secret_ref.name, where)
    value = _text(secret, AUTH_KEY)
    key = value.removeprefix("Bearer ").strip() if value is not None else ""
    if not key:
        raise Unresolved("InvalidSecret", f"{where}: Secret {namespace}/{token.secret_ref.name} needs the key under "
                                          f"{AUTH_KEY} (the key itself, or 'Bearer <key>'), one line of text")
    return key


def _aws_credentials(store: Store, namespace: str, config: BedrockConfig,
                     path: str) -> tuple[str | None, str | None, str | None]:
    """(access key id, secret access key, session token) from `auth`'s Secret; all None
    without `auth` (the extension's own AWS credentials)."""
    if config.auth is None:
        return None, None, None
    if config.auth.assume_role is not None:
        raise Invalid(f"{path}.auth.assumeRole", ASSUME_ROLE_REFUSED)
    assert config.auth.secret_ref is not None
    name, where = config.auth.secret_ref.name, f"{path}.auth.secretRef"
    secret = _secret(store, namespace, name, where)
    access, key, session = (_text(secret, k) for k in ("accessKey", "secretKey", "sessionToken"))
    if access is None or key is None or (session is None and secret_field(secret, "sessionToken") is not None):
        raise Unresolved("InvalidSecret", f"{where}: Secret {namespace}/{name} needs accessKey and secretKey "
                                          "(and optionally sessionToken), each one line of text")
    return access, key, session
