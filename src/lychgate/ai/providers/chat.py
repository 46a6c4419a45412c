"""OpenAI's Chat Completions request as the provider modules read it (the fields every
provider needs, checked with OpenAI's own error words so the gateway answers a request
that cannot be valid without calling the provider), and an OpenAI error answer from
whatever error body a provider sent."""

from __future__ import annotations

import json
from typing import Any

from lychgate.ai.config import Provider
from lychgate.ai.providers.base import Answer, ProviderError, openai_error


def messages(chat: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages, each an object with a role."""
    value = chat.get("messages")
    if value is None:
        raise ProviderError(400, "Missing required parameter: 'messages'.", param="messages",
                            code="missing_required_parameter")
    if not isinstance(value, list) or not value:
        raise ProviderError(400, "Invalid 'messages': expected a non-empty array of messages.", param="messages",
                            code="invalid_value")
    for i, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ProviderError(400, f"Invalid 'messages[{i}]': expected an object with a 'role'.",
                                param=f"messages[{i}]", code="invalid_value")
    return value


def model(chat: dict[str, Any], provider: Provider) -> str:
    """The model to ask for: the provider's `model` override, else the request's."""
    value = provider.model or chat.get("model")
    if not value or not isinstance(value, str):
        raise ProviderError(400, "Missing required parameter: 'model'.", param="model",
                            code="missing_required_parameter")
    return value


def wants_usage(chat: dict[str, Any]) -> bool:
    """The client asked for the usage chunk at the end of a stream."""
    options = chat.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def text(content: Any, where: str) -> str:
    """A message's content as text: a string, or the text of its `text` parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        out = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ProviderError(400, f"Invalid '{where}[{i}]': only text parts are supported here.",
                                    param=f"{where}[{i}]", code="invalid_value")
            out.append(part["text"])
        return "".join(out)
    raise ProviderError(400, f"Invalid '{where}': expected a string or an array of content parts.",
                        param=where, code="invalid_value")


# The error type OpenAI uses for each status (what a client may read besides the status).
_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 409: "conflict_error", 413: "invalid_request_error",
          422: "invalid_request_error", 429: "rate_limit_error"}


def error_type(status: int) -> str:
    return _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def error_answer(status: int, body: bytes) -> Answer:
    """An upstream error in OpenAI's shape: an OpenAI error body as it is, anything else
    (a proxy's HTML page, an empty body) wrapped with the status's error type."""
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        return Answer(status, parsed)
    detail = body.decode("utf-8", "replace").strip()[:500]
    message = f"The provider answered {status}" + (f": {detail}" if detail else ".")
    return Answer(status, openai_error(message, error_type(status)))
