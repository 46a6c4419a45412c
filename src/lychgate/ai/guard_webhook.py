"""promptGuard `webhook`: kgateway's guardrail webhook API, asked over HTTP.

The webhook is a service of the user's (plain HTTP: kgateway did not do TLS to
it either) at `endpoint: {host, port}` (older releases: `host: {host, port}`):

- prompts: `POST /request` with `{"body": {"messages": [{"role", "content"}...]}}`,
  answered `{"action": A}` where A is a pass (`{"reason"?}`), a mask
  (`{"body": {"messages": [...]}, "reason"?}`: the same messages, contents
  changed) or a reject (`{"body": "message", "status_code": 403, "reason"?}`);
- answers: `POST /response` with `{"body": {"choices": [{"message": {"role",
  "content"}}...]}}`, answered pass or mask (`{"body": {"choices": [...]}}`);
  a reject is honoured there too.

`forwardHeaderMatches` (older: `forwardHeaders`) picks the client's request
headers (for /request) or the provider's response headers (for /response) sent
along, by name as kgateway did: `type: Exact` (the default) compares the name,
`type: RegularExpression` matches the name from its start.

Whatever cannot be used as an answer (no connection, a timeout, a status other
than 200, JSON that is not one of the actions, a mask with a different number of
messages) raises GuardUnavailable: the guard then fails closed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from lychgate.ai.guard_http import post_json
from lychgate.ai.rejection import GuardUnavailable, PolicyError, Rejection

WEBHOOK_REJECTED = "Rejected by guardrails webhook"  # kgateway's words when the webhook gives none


@dataclass(frozen=True)
class Webhook:
    host: str
    port: int
    forward: tuple[tuple[str, re.Pattern[str] | None], ...] = ()  # (lower-case name, or name regex)

    def url(self, kind: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/{kind}"

    def headers(self, source: Mapping[str, str]) -> dict[str, str]:
        out = {}
        for name, value in source.items():
            key = name.lower()
            if key.startswith(":"):
                continue
            if any(rx.match(key) if rx else key == exact for exact, rx in self.forward):
                out[key] = value
        return out


def parse_webhook(raw: Mapping[str, Any], where: str) -> Webhook:
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{where}: must be an object with endpoint")
    key = "endpoint" if "endpoint" in raw else "host"
    endpoint = raw.get(key)
    if not isinstance(endpoint, Mapping):
        raise PolicyError(f"{where}.endpoint: required, {{host, port}} of the webhook")
    host, port = endpoint.get("host"), endpoint.get("port")
    if not isinstance(host, str) or not host:
        raise PolicyError(f"{where}.{key}.host: required")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise PolicyError(f"{where}.{key}.port: required, 1 to 65535")
    hkey = "forwardHeaderMatches" if "forwardHeaderMatches" in raw else "forwardHeaders"
    forward: list[tuple[str, re.Pattern[str] | None]] = []
    for i, m in enumerate(raw.get(hkey) or ()):
        name = m.get("name") if isinstance(m, Mapping) else None
        if not isinstance(name, str) or not name:
            raise PolicyError(f"{where}.{hkey}[{i}].name: required, a header name")
        kind = m.get("type") or "Exact"
        if kind == "Exact":
            forward.append((name.lower(), None))
        elif kind == "RegularExpression":
            try:
                forward.append((name, re.compile(name, re.IGNORECASE)))
            except re.error as err:
                raise PolicyError(f"{where}.{hkey}[{i}].name: invalid regular expression: {err}") from None
        else:
            raise PolicyError(f"{where}.{hkey}[{i}].type: must be Exact or RegularExpression")
    return Webhook(host, port, tuple(forward))


async def ask(session: aiohttp.ClientSession, hook: Webhook, kind: str, texts: Sequence[tuple[str, str]],
              headers: Mapping[str, str], timeout: float) -> list[str] | Rejection | None:
    """Ask the webhook about texts ((role, content) pairs): kind "request" for prompt
    messages, "response" for answer choices. None: pass; a list: the new contents, one
    per text (mask); a Rejection: reject."""
    if kind == "request":
        payload: dict[str, Any] = {"messages": [{"role": r, "content": c} for r, c in texts]}
    else:
        payload = {"choices": [{"message": {"role": r, "content": c}} for r, c in texts]}
    answer = await post_json(session, hook.url(kind), {"body": payload}, hook.headers(headers), timeout,
                             f"{kind} webhook {hook.host}:{hook.port}")
    return _action(answer, kind, len(texts), hook)


def _action(answer: Any, kind: str, count: int, hook: Webhook) -> list[str] | Rejection | None:
    action = answer.get("action") if isinstance(answer, dict) else None
    if not isinstance(action, dict):
        raise GuardUnavailable(f"{kind} webhook {hook.host}:{hook.port} answered without an action")
    reason = action.get("reason") or ""
    if "status_code" in action:
        status = action["status_code"]
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            status = 403
        message = action.get("body")
        return Rejection(status, message if isinstance(message, str) and message else WEBHOOK_REJECTED,
                         detail=f"{kind} webhook rejected: {reason}")
    if "body" not in action:
        return None
    body = action["body"]
    items = body.get("messages" if kind == "request" else "choices") if isinstance(body, dict) else None
    contents = [_content(item, kind) for item in items] if isinstance(items, list) else []
    if len(contents) != count or not all(isinstance(c, str) for c in contents):
        raise GuardUnavailable(f"{kind} webhook {hook.host}:{hook.port} masked with "
                               f"{len(contents)} texts for {count}, or without their contents")
    return [c for c in contents if isinstance(c, str)]


def _content(item: Any, kind: str) -> Any:
    if kind == "response" and isinstance(item, dict):
        item = item.get("message")
    return item.get("content") if isinstance(item, dict) else None
