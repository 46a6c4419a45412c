"""apiKeyAuth (older name apiKeyAuthentication): API keys from Secrets (Envoy api_key_auth).

kgateway's shape: `secretRef` (one Secret) or `secretSelector` (Secrets in the
policy's namespace by labels), each entry of a Secret being `client id: key`;
`keySources` (header, query, cookie; default header `api-key`),
`forwardCredential` (older: `hideAPIKey`, its opposite) and `clientIdHeader`. No Secret found, or none with a key,
fails the route closed; two clients with one key make the policy invalid.
"""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.api.core import Secret
from lychgate.api.policy import TrafficPolicy
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.policies.secret_refs import entries, secret
from lychgate.translate.values import CompileContext, Invalid, Unresolved, header_name

DEFAULT_SOURCE = ir.ApiKeySource(header="api-key")


class ApiKeyAuthField(PolicyField):
    name, attr, security = "apiKeyAuth", "api_key_auth", True

    def normalize(self, policy: TrafficPolicy, value: dict[str, Any]) -> dict[str, Any]:
        value["fromNamespace"] = policy.namespace
        if "hideAPIKey" in value:  # the older spelling says the opposite
            value["forwardCredential"] = not value.pop("hideAPIKey")
        return value

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if sum(k in value for k in ("secretRef", "secretSelector", "disable")) != 1:
            raise Invalid(path, "exactly one of secretRef, secretSelector or disable must be set")
        if "disable" in value:
            return {"api_key_auth": None}
        sources = []
        for i, src in enumerate(value.get("keySources") or []):
            if not src:
                raise Invalid(f"{path}.keySources[{i}]", "at least one of header, query or cookie must be set")
            if src.get("header"):
                header_name(src["header"], f"{path}.keySources[{i}].header")
            sources.append(ir.ApiKeySource(src.get("header"), src.get("query"), src.get("cookie")))
        client_header = value.get("clientIdHeader")
        if client_header is not None:
            header_name(client_header, f"{path}.clientIdHeader")
        ns = value["fromNamespace"]
        if "secretRef" in value:
            ref = value["secretRef"]
            if ref.get("group", "") not in ("", "core") or ref.get("kind", "Secret") != "Secret":
                raise Invalid(f"{path}.secretRef", "only core Secrets hold API keys")
            secrets = [secret(ctx.store, ns, ref.get("namespace") or ns, ref["name"], f"{path}.secretRef")]
            what = f"Secret {ref.get('namespace') or ns}/{ref['name']}"
        else:
            labels = value["secretSelector"].get("matchLabels") or {}
            if not labels:
                raise Invalid(f"{path}.secretSelector.matchLabels", "at least one label is required")
            secrets = sorted((s for s in ctx.store.list(Secret, ns)
                              if all(s.metadata.labels.get(k) == v for k, v in labels.items())),
                             key=lambda s: s.name)
            what = f"Secrets with labels {','.join(f'{k}={v}' for k, v in sorted(labels.items()))} in {ns}"
            if not secrets:
                raise Unresolved("SecretNotFound", f"{path}.secretSelector: no {what}")
        credentials = unique_credentials(secrets, path)
        if not credentials:
            raise Unresolved("InvalidSecret", f"{path}: {what} hold no API keys")
        return {"api_key_auth": ir.ApiKeyAuth(
            credentials=tuple(sorted(credentials.items(), key=lambda kv: kv[1])),
            sources=tuple(sources) or (DEFAULT_SOURCE,),
            client_id_header=client_header, forward_credential=bool(value.get("forwardCredential")),
        )}


def unique_credentials(secrets: list[Secret], path: str) -> dict[str, str]:
    """key -> client over every Secret. Envoy refuses a key listed twice (the whole route
    table with it), so the same client and key in two Secrets collapse into one; two clients
    sharing a key cannot say who the caller is, so the policy is invalid (as kgateway does).
    The message names the clients and Secrets, never the key."""
    found = sorted((client, key, f"{s.namespace}/{s.name}") for s in secrets for client, key in entries(s).items() if key)
    credentials: dict[str, tuple[str, str]] = {}
    clashes = []
    for client, key, source in found:
        first = credentials.setdefault(key, (client, source))
        if first[0] != client:
            clashes.append(f"client {first[0]!r} in Secret {first[1]} and client {client!r} in Secret {source}")
    if clashes:
        raise Invalid(path, "duplicate API key value shared by " + "; ".join(clashes))
    return {key: client for key, (client, _) in credentials.items()}


register(ApiKeyAuthField())
