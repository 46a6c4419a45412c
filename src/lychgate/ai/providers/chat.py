"""OpenAI's Chat Completions as the clients speak it, for the codecs of providers with an
API of their own (gemini, vertexai, bedrock): the request's fields read and checked the
same way for each (bad input names the field), and the answer's shapes built the same
way (chat.completion, chat.completion.chunk, server-sent events, errors)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lychgate.ai.config import Provider
from lychgate.ai.providers.base import ProviderError, Usage, openai_error

DONE = b"data: [DONE]\n\n"


def bad(param: str, message: str) -> ProviderError:
    return ProviderError(400, f"{param}: {message}", param=param)


# ---- the request -----------------------------------------------------------------------

@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Message:
    """One message of the conversation, reduced to what the native APIs carry."""

    role: str  # system (developer too), user, assistant, tool
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""  # role tool: the call it answers (checked: an earlier assistant made it)
    tool_name: str = ""  # role tool: that call's function (Gemini names the response by it)


@dataclass
class Function:
    name: str
    description: str
    parameters: dict[str, Any]


def model_of(chat: dict[str, Any], provider: Provider) -> str:
    """The provider's model when the Backend sets one, else the request's."""
    model = provider.model or chat.get("model")
    if not isinstance(model, str) or not model:
        raise bad("model", "missing (the request names none and the Backend sets none)")
    return model


def credential(provider: Provider, client_headers: dict[str, str]) -> str:
    """The provider's token; with Passthrough the client's own `Authorization: Bearer`."""
    if not provider.passthrough:
        if not provider.token:
            raise ProviderError(500, f"provider {provider.id} has no credentials", "server_error")
        return provider.token
    value = next((v for k, v in client_headers.items() if k.lower() == "authorization"), "")
    scheme, _, token = value.strip().partition(" ")
    token = token.strip() if scheme.lower() == "bearer" else value.strip()
    if not token:
        raise ProviderError(401, "missing bearer token (the Backend passes the client's own through)",
                            "authentication_error", "missing_api_key")
    return token


def auth_headers(provider: Provider, token: str, name: str, prefix: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """The credential header (authHeader's headerName and prefix replace the provider's) and
    the client headers to remove: the client's Authorization never reaches a provider,
    unless it is the header set here (then it is replaced, not removed)."""
    name = (provider.auth_header or name).lower()
    prefix = (provider.auth_prefix if provider.auth_prefix is not None else prefix).strip()
    value = f"{prefix} {token}" if prefix else token
    return {name: value}, (() if name == "authorization" else ("authorization",))


def messages(chat: dict[str, Any]) -> list[Message]:
    raw = chat.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad("messages", "a non-empty array of messages is required")
    names: dict[str, str] = {}  # tool call id -> function name
    out: list[Message] = []
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise bad(where, "must be an object")
        role = m.get("role")
        if role == "developer":
            role = "system"
        if role not in ("system", "user", "assistant", "tool"):
            raise bad(f"{where}.role", f"{role!r} is not one of system, developer, user, assistant, tool")
        msg = Message(role, text(m.get("content"), f"{where}.content"))
        if role == "assistant":
            msg.tool_calls = _tool_calls(m.get("tool_calls"), f"{where}.tool_calls")
            names.update((c.id, c.name) for c in msg.tool_calls)
        elif role == "tool":
            call = m.get("tool_call_id")
            if not isinstance(call, str) or call not in names:
                raise bad(f"{where}.tool_call_id", f"{call!r} is the id of no tool call of an earlier "
                                                   "assistant message")
            msg.tool_call_id, msg.tool_name = call, names[call]
        out.append(msg)
    return out


def json_object(text_: str) -> dict[str, Any] | None:
    """A tool's result when it is a JSON object (Gemini and Bedrock take it as such)."""
    try:
        value = json.loads(text_)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def text(content: Any, where: str) -> str:
    """A message's content as text: a string, or the text parts of an array."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise bad(where, "must be a string or an array of content parts")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text" or not isinstance(part.get("text"), str):
            raise bad(f"{where}[{j}]", f"content part type {kind!r} is not supported (text only)")
        texts.append(part["text"])
    return "".join(texts)


def _tool_calls(raw: Any, where: str) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise bad(where, "must be an array")
    calls = []
    for j, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise bad(f"{where}[{j}].function", "a function with a name is required")
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except (TypeError, ValueError):
            raise bad(f"{where}[{j}].function.arguments", "must be a JSON object") from None
        if not isinstance(args, dict):
            raise bad(f"{where}[{j}].function.arguments", "must be a JSON object")
        calls.append(ToolCall(str(call.get("id") or ""), fn["name"], args))
    return calls


def functions(chat: dict[str, Any]) -> list[Function]:
    raw = chat.get("tools")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise bad("tools", "must be an array")
    out = []
    for i, tool in enumerate(raw):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            raise bad(f"tools[{i}]", "only tools of type function are supported")
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise bad(f"tools[{i}].function.name", "required")
        params = fn.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise bad(f"tools[{i}].function.parameters", "must be a JSON schema object")
        out.append(Function(fn["name"], str(fn.get("description") or ""),
                            params or {"type": "object", "properties": {}}))
    return out


def tool_choice(chat: dict[str, Any]) -> str | None:
    """None (provider's default), "auto", "none", "required", or a function's name."""
    choice = chat.get("tool_choice")
    if choice is None or choice in ("auto", "none", "required"):
        return str(choice) if choice is not None else None
    fn = choice.get("function") if isinstance(choice, dict) else None
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        return str(fn["name"])
    raise bad("tool_choice", 'must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}')


def stop_sequences(chat: dict[str, Any]) -> list[str]:
    stop = chat.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return stop
    raise bad("stop", "must be a string or an array of strings")


def max_tokens(chat: dict[str, Any]) -> int | None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = chat.get(name)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise bad(name, "must be a positive integer")
            return value
    return None


def number(chat: dict[str, Any], name: str) -> float | None:
    value = chat.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(name, "must be a number")
    return value


def choices(chat: dict[str, Any]) -> int:
    n = chat.get("n", 1)
    if n is None:
        return 1
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise bad("n", "must be a positive integer")
    return n


def include_usage(chat: dict[str, Any]) -> bool:
    options = chat.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def merged(turns: list[tuple[str, list[dict[str, Any]]]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Consecutive turns of the same role as one (Gemini and Bedrock want the roles to
    alternate; OpenAI clients send a user message after tool results, several system
    messages, ...). Turns without parts are left out (both refuse empty ones)."""
    role, parts = "", list[dict[str, Any]]()
    for r, p in turns:
        if not p:
            continue
        if r != role and parts:
            yield role, parts
            parts = []
        role = r
        parts = parts + p
    if parts:
        yield role, parts


# ---- the answer ------------------------------------------------------------------------

def completion_id(provider_id: str | None = None) -> str:
    return f"chatcmpl-{provider_id or uuid.uuid4().hex}"


def usage_body(usage: Usage, reasoning: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {"prompt_tokens": usage.input, "completion_tokens": usage.output,
                            "total_tokens": usage.total}
    if reasoning:
        body["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return body


def tool_call_body(call: ToolCall, index: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": call.id, "type": "function",
                            "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
    if index is not None:
        body["index"] = index
    return body


def choice_body(index: int, content: str | None, tool_calls: list[ToolCall], finish: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [tool_call_body(c) for c in tool_calls]
    return {"index": index, "message": message, "finish_reason": finish, "logprobs": None}


def completion(id_: str, model: str, choices_: list[dict[str, Any]], usage: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": id_, "object": "chat.completion", "created": int(time.time()),
                            "model": model, "choices": choices_}
    if usage is not None:
        body["usage"] = usage
    return body


def error_type(status: int) -> str:
    """The OpenAI error `type` for a provider's HTTP status (the openai SDK picks its
    exception class by status; the type tells a reader of the body)."""
    if status >= 500 or status == 424:  # 424: the model behind the provider failed (Bedrock)
        return "server_error"
    return {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
            429: "rate_limit_error"}.get(status, "invalid_request_error")


def provider_error(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    return openai_error(message, error_type(status), code)


def short(body: bytes) -> str:
    """A body that is not the provider's error shape, as a message (a proxy's HTML page...)."""
    return body[:300].decode("utf-8", "replace").strip() or "(empty body)"


class Chunks:
    """The chat.completion.chunk events of one streamed answer: one id, one created
    time; the role is said in each choice's first chunk, as OpenAI does."""

    def __init__(self, model: str, include_usage: bool) -> None:
        self.id = completion_id()
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        self.started: set[int] = set()
        self.finished: set[int] = set()

    def event(self, choices_: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> bytes:
        body: dict[str, Any] = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                                "model": self.model, "choices": choices_}
        if usage is not None:
            body["usage"] = usage
        return sse(body)

    def delta(self, index: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
        if index not in self.started:
            self.started.add(index)
            delta = {"role": "assistant", **delta}
        if finish is not None:
            self.finished.add(index)
        return self.event([{"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}])

    def usage(self, usage: Usage | None, reasoning: int = 0) -> bytes:
        """The usage chunk (empty choices) when the client asked for it."""
        if not self.include_usage or usage is None:
            return b""
        return self.event([], usage_body(usage, reasoning))


def sse(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"
