"""The credential header a provider gets: its own name and prefix (`Authorization: Bearer`,
`api-key`, `x-api-key`), or the Backend's `authHeader` ones, carrying the configured token
or, with `authToken.kind: Passthrough`, the token the client sent in its `Authorization`
header (kgateway: "this token must exist in the Authorization header")."""

from __future__ import annotations

from lychgate.ai.config import Provider
from lychgate.ai.providers.base import ProviderError


def header_value(headers: dict[str, str], name: str) -> str | None:
    """A request header by name, whatever the case of the names in `headers`."""
    value = headers.get(name)
    if value is None:
        name = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    return value


def client_token(client_headers: dict[str, str]) -> str:
    """The client's own token (Passthrough), without its `Bearer` scheme."""
    value = (header_value(client_headers, "authorization") or "").strip()
    scheme, _, rest = value.partition(" ")
    token = rest.strip() if scheme.lower() == "bearer" else value
    if not token:
        raise ProviderError(401, "You didn't provide an API key. This route passes the client's own key to "
                                 "the provider: send it in an Authorization header (Authorization: Bearer KEY).",
                            code="missing_api_key")
    return token


def credential_headers(provider: Provider, client_headers: dict[str, str], name: str,
                       prefix: str = "") -> tuple[dict[str, str], tuple[str, ...]]:
    """(headers to set, client headers to remove) carrying the provider's credential in
    header `name` with `prefix` (or the Backend's authHeader overrides of both)."""
    header = (provider.auth_header or name).lower()
    prefix = provider.auth_prefix if provider.auth_prefix is not None else prefix
    if provider.passthrough and header == "authorization" and provider.auth_prefix is None \
            and header_value(client_headers, "authorization"):
        return {}, ()  # the client's Authorization header goes to the provider as it is
    if provider.passthrough:
        token = client_token(client_headers)
    elif provider.token:
        token = provider.token
    else:  # the control plane could not resolve the Backend's secret: fail closed
        raise ProviderError(500, "The AI Backend's provider has no credentials configured.",
                            type_="server_error", code="provider_credentials_missing")
    value = f"{prefix.rstrip()} {token}" if prefix.strip() else token
    # The client's credentials never reach a provider, unless they are what is sent.
    return {header: value}, (() if header == "authorization" else ("authorization",))
