"""promptGuard request `moderation.openAIModeration`: OpenAI's moderation endpoint.

The prompt's text goes to `POST /v1/moderations` ({"model", "input"}) with
`Authorization: Bearer <token>`; the request is rejected when any result comes
back `flagged`. As kgateway: the model defaults to `omni-moderation-latest`, and
`authToken` is Inline (the control plane resolves a SecretRef into it before the
extension sees the settings, so a bare SecretRef here is an error) or
Passthrough (the client's own bearer token).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from lychgate.ai.guard_http import post_json
from lychgate.ai.rejection import GuardUnavailable, PolicyError

OPENAI_MODERATION_URL = "https://api.openai.com/v1/moderations"
DEFAULT_MODEL = "omni-moderation-latest"


@dataclass(frozen=True)
class Moderation:
    model: str = DEFAULT_MODEL
    token: str | None = field(default=None, repr=False)  # None: the client's (Passthrough)


def parse_moderation(raw: Mapping[str, Any], where: str) -> Moderation:
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{where}: must be an object with authToken and model")
    model = raw.get("model") or DEFAULT_MODEL
    if not isinstance(model, str):
        raise PolicyError(f"{where}.model: must be a string")
    auth = raw.get("authToken")
    if not isinstance(auth, Mapping):
        raise PolicyError(f"{where}.authToken: required")
    kind = auth.get("kind") or ("Inline" if "inline" in auth else "")
    if kind == "Passthrough":
        return Moderation(model)
    if kind == "Inline" and isinstance(auth.get("inline"), str) and auth["inline"]:
        return Moderation(model, auth["inline"])
    if kind == "SecretRef":
        raise PolicyError(f"{where}.authToken.secretRef: the Secret's token was not resolved")
    raise PolicyError(f"{where}.authToken: kind Inline (with inline), SecretRef or Passthrough")


def client_token(headers: Mapping[str, str]) -> str | None:
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    token = value[7:] if value[:7].lower() == "bearer " else value
    return token.strip() or None


async def flagged(session: aiohttp.ClientSession, mod: Moderation, text: str,
                  client_headers: Mapping[str, str], url: str, timeout: float) -> bool:
    """Whether OpenAI's moderation flags the text."""
    token = mod.token or client_token(client_headers)
    if token is None:
        raise GuardUnavailable("moderation: Passthrough, and the client sent no bearer token")
    answer = await post_json(session, url, {"model": mod.model, "input": text},
                             {"Authorization": f"Bearer {token}"}, timeout, "moderation")
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list) or not results or not all(isinstance(r, dict) for r in results):
        raise GuardUnavailable("moderation answered without results")
    return any(r.get("flagged") is True for r in results)
