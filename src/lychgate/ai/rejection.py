"""What the AI policy modules hand back instead of a request or an answer.

A `Rejection` is an answer the extension gives the client itself (Envoy's
immediate response), the provider never called or its answer withheld. Its body
is OpenAI's error shape, so the openai SDK raises its usual APIStatusError with
the message; for a stream already under way the same body goes out as the last
server-sent event, which the SDK also raises as an APIError.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lychgate.ai.providers.base import openai_error

# kgateway's CustomResponse defaults (ai_policy.go).
REQUEST_REJECTED = "The request was rejected due to inappropriate content"
RESPONSE_REJECTED = "The response was rejected due to inappropriate content"
REJECTED_STATUS = 403


@dataclass(frozen=True)
class Rejection:
    status: int
    message: str  # what the client reads: never internals, never credentials
    type: str = "invalid_request_error"
    code: str | None = "content_policy_violation"
    detail: str = ""  # why, for the extension's log only
    headers: tuple[tuple[str, str], ...] = ()  # sent with it (a rate limit's x-ratelimit-*)

    def body(self) -> dict[str, Any]:
        return openai_error(self.message, self.type, self.code)

    def encode(self) -> bytes:
        return json.dumps(self.body(), separators=(",", ":")).encode()


def guard_unavailable(what: str, detail: str, subject: str = "request") -> Rejection:
    """Fail closed: a guard that cannot be asked rejects, saying which guard, not why."""
    return Rejection(503, f"The {subject} could not be checked: the {what} is unavailable",
                     type="server_error", code="guard_unavailable", detail=detail)


class PolicyError(ValueError):
    """A route's `ai` settings that cannot be applied; the message names the field."""


class GuardUnavailable(Exception):
    """A webhook or moderation service that could not be asked or gave no usable answer.
    The message is for the log: the client gets `guard_unavailable`'s words."""
