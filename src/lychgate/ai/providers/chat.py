"""OpenAI's Chat Completions as the clients speak it, for every provider codec.

The request: its fields read and checked the same way for every provider, with OpenAI's
own error words ("Missing required parameter: 'messages'.", "Invalid 'messages[1].role':
..."), the field named in `param`, so the gateway answers a request that cannot be valid
without calling the provider. `messages()` checks what every provider needs (the openai
codec passes the rest on); `conversation()` reads the messages into `Message`s for the
codecs of providers with an API of their own.

The answer: chat.completion bodies and the chat.completion.chunk events of a stream
(`Chunks`, and `EventTranslator` for providers that stream server-sent events). OpenAI's
error bodies, from whatever error a provider sent, are base.py's.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from lychgate.ai.config import Provider
from lychgate.ai.providers.base import Answer, ProviderError, Usage, openai_error
from lychgate.ai.providers.sse import DONE, Event, EventReader, encode


def missing(param: str) -> ProviderError:
    return ProviderError(400, f"Missing required parameter: '{param}'.", param=param,
                         code="missing_required_parameter")


def invalid(param: str, message: str) -> ProviderError:
    return ProviderError(400, f"Invalid '{param}': {message}", param=param, code="invalid_value")


# ---- the request -----------------------------------------------------------------------

def messages(chat: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages, each an object with a role."""
    value = chat.get("messages")
    if value is None:
        raise missing("messages")
    if not isinstance(value, list) or not value:
        raise invalid("messages", "expected a non-empty array of messages.")
    for i, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise invalid(f"messages[{i}]", "expected an object with a 'role'.")
    return value


def model(chat: dict[str, Any], provider: Provider) -> str:
    """The model to ask for: the provider's `model` override, else the request's."""
    value = provider.model or chat.get("model")
    if not value or not isinstance(value, str):
        raise missing("model")
    return value


def wants_usage(chat: dict[str, Any]) -> bool:
    """The client asked for the usage chunk at the end of a stream."""
    options = chat.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def wants_stream(chat: dict[str, Any]) -> bool:
    return bool(chat.get("stream"))


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Image:
    """An `image_url` part (for the codecs that take images)."""

    url: str
    param: str  # where it is in the request, for the codec's own checks


@dataclass
class Message:
    """One message of the conversation, reduced to what the native APIs carry."""

    role: str  # system (developer too), user, assistant, tool
    parts: list[str | Image] = field(default_factory=list)  # the content: texts, and images (user)
    tool_calls: list[ToolCall] = field(default_factory=list)  # assistant
    tool_call_id: str = ""  # tool: the call it answers (checked: an earlier assistant made it)
    tool_name: str = ""  # tool: that call's function (Gemini names the response by it)

    @property
    def text(self) -> str:
        return "".join(p for p in self.parts if isinstance(p, str))


ROLES = ("system", "developer", "user", "assistant", "tool")


def conversation(chat: dict[str, Any], images: bool = False) -> list[Message]:
    """The messages as `Message`s: roles OpenAI's (developer read as system), content as
    text (and, with `images`, the images of user messages), tool calls with JSON object
    arguments, tool results answering a call an earlier assistant message made."""
    out: list[Message] = []
    names: dict[str, str] = {}  # tool call id -> function name
    for i, m in enumerate(messages(chat)):
        where, role = f"messages[{i}]", m["role"]
        if role not in ROLES:
            raise invalid(f"{where}.role", f"{role!r} is not supported by this provider ({', '.join(ROLES)} are).")
        msg = Message("system" if role == "developer" else role,
                      content(m.get("content"), f"{where}.content", images and role == "user"))
        if role == "assistant":
            msg.tool_calls = tool_calls(m.get("tool_calls"), f"{where}.tool_calls")
            names.update((c.id, c.name) for c in msg.tool_calls)
        elif role == "tool":
            call = m.get("tool_call_id")
            if call is None:
                raise missing(f"{where}.tool_call_id")
            if not isinstance(call, str) or call not in names:
                raise invalid(f"{where}.tool_call_id", f"{call!r} is the id of no tool call of an earlier "
                                                       "assistant message.")
            msg.tool_call_id, msg.tool_name = call, names[call]
        out.append(msg)
    return out


def content(value: Any, where: str, images: bool = False) -> list[str | Image]:
    """A message's content: a string, or an array of text (and, with `images`, image_url)
    parts. Empty texts are left out (providers refuse them)."""
    if value is None or isinstance(value, str):
        return [value] if value else []
    if not isinstance(value, list):
        raise invalid(where, "expected a string or an array of content parts.")
    out: list[str | Image] = []
    for j, part in enumerate(value):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            if part["text"]:
                out.append(part["text"])
        elif images and kind == "image_url" and isinstance(part.get("image_url"), dict):
            url = part["image_url"].get("url")
            if not isinstance(url, str):
                raise invalid(f"{where}[{j}].image_url.url", "expected a string.")
            out.append(Image(url, f"{where}[{j}].image_url.url"))
        else:
            allowed = "text and image_url are" if images else "text is"
            raise invalid(f"{where}[{j}]", f"content parts of type {kind!r} are not supported here ({allowed}).")
    return out


def tool_calls(raw: Any, where: str) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise invalid(where, "expected an array.")
    calls = []
    for j, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not call.get("id"):
            raise invalid(f"{where}[{j}]", "expected an id and a function with a name.")
        try:
            arguments = json.loads(fn.get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = None
        if not isinstance(arguments, dict):
            raise invalid(f"{where}[{j}].function.arguments", "expected a JSON object.")
        calls.append(ToolCall(str(call["id"]), fn["name"], arguments))
    return calls


def merged(turns: list[tuple[str, list[dict[str, Any]]]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Consecutive turns of the same role as one (Anthropic, Gemini and Bedrock want the
    roles to alternate; OpenAI clients send a user message after tool results, ...).
    Turns without parts are left out (the providers refuse empty ones); none left: a 400."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for role, parts in turns:
        if not parts:
            continue
        if out and out[-1][0] == role:
            out[-1][1].extend(parts)
        else:
            out.append((role, list(parts)))
    if not out:
        raise invalid("messages", "no user or assistant message has content.")
    return out


@dataclass
class Function:
    name: str
    description: str
    parameters: dict[str, Any]


def functions(chat: dict[str, Any]) -> list[Function]:
    """The request's `tools` (functions only)."""
    raw = chat.get("tools")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise invalid("tools", "expected an array.")
    out = []
    for i, tool in enumerate(raw):
        fn = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise invalid(f"tools[{i}]", "expected a function tool with a name.")
        params = fn.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise invalid(f"tools[{i}].function.parameters", "expected a JSON schema object.")
        out.append(Function(fn["name"], str(fn.get("description") or ""),
                            params or {"type": "object", "properties": {}}))
    return out


def tool_choice(chat: dict[str, Any]) -> str | None:
    """None (the provider's default), "auto", "none", "required", or a function's name."""
    choice = chat.get("tool_choice")
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    fn = choice.get("function") if isinstance(choice, dict) else None
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        return str(fn["name"])
    raise invalid("tool_choice", 'expected "auto", "none", "required" or a function by name.')


def stop_sequences(chat: dict[str, Any]) -> list[str]:
    stop = chat.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return stop
    raise invalid("stop", "expected a string or an array of strings.")


def max_tokens(chat: dict[str, Any]) -> int | None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = chat.get(name)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise invalid(name, "expected a positive integer.")
            return value
    return None


def number(chat: dict[str, Any], name: str, low: float | None = None, high: float | None = None) -> float | None:
    """A numeric field, within [low, high] where the provider says so."""
    value = chat.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(name, "expected a number.")
    if (low is not None and value < low) or (high is not None and value > high):
        raise invalid(name, f"this provider accepts {low} to {high}.")
    return value


def choices(chat: dict[str, Any]) -> int:
    n = chat.get("n", 1)
    if n is None:
        return 1
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise invalid("n", "expected a positive integer.")
    return n


# ---- the answer ------------------------------------------------------------------------

def completion_id(provider_id: str | None = None) -> str:
    """OpenAI's id of an answer: the provider's own id in it, when it gave one."""
    return f"chatcmpl-{provider_id or uuid.uuid4().hex}"


def usage_body(usage: Usage) -> dict[str, Any]:
    body: dict[str, Any] = {"prompt_tokens": usage.input, "completion_tokens": usage.output,
                            "total_tokens": usage.total}
    if usage.reasoning:
        body["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning}
    return body


def tool_call_body(call: ToolCall, index: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": call.id, "type": "function",
                            "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
    if index is not None:
        body["index"] = index
    return body


def choice_body(index: int, text: str | None, calls: list[ToolCall], finish: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if calls:
        message["tool_calls"] = [tool_call_body(c) for c in calls]
    return {"index": index, "message": message, "finish_reason": finish, "logprobs": None}


def completion(id_: str, model_: str, choices_: list[dict[str, Any]], usage: Usage | None) -> Answer:
    """A whole answer: OpenAI's chat.completion."""
    body: dict[str, Any] = {"id": id_, "object": "chat.completion", "created": int(time.time()),
                            "model": model_, "choices": choices_}
    if usage is not None:
        body["usage"] = usage_body(usage)
    return Answer(200, body, usage)


class Chunks:
    """The chat.completion.chunk events of one streamed answer: one id, one created time;
    the role said in each choice's first chunk, as OpenAI does; the usage chunk (empty
    choices) only to a client that asked for it; an error event, as OpenAI sends one
    mid-stream, when the provider failed or its stream ended before its last event."""

    def __init__(self, model_: str, include_usage: bool, id_: str | None = None) -> None:
        self.id = id_ or completion_id()
        self.created = int(time.time())
        self.model = model_
        self.include_usage = include_usage
        self.started: set[int] = set()
        self.finished: set[int] = set()
        self.failed = False  # an error event was sent: nothing but [DONE] follows
        self.ended = False

    def delta(self, index: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
        if index not in self.started:
            self.started.add(index)
            delta = {"role": "assistant", **delta}
        if finish is not None:
            self.finished.add(index)
        return encode({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                       "model": self.model,
                       "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}]})

    def error(self, body: dict[str, Any]) -> bytes:
        """An error inside the stream (the openai SDK raises APIError on it)."""
        self.failed = True
        return encode(body)

    def end(self, usage: Usage | None) -> bytes:
        """The end of the stream: an error if it ended early (no choice finished, or one
        started and never finished), the usage chunk when asked for, [DONE]. Once."""
        if self.ended:
            return b""
        self.ended = True
        out = b""
        if not self.failed and (not self.started or self.started - self.finished):
            out = self.error(openai_error("The provider's stream ended before its last event.", "server_error"))
        if self.include_usage and usage is not None and not self.failed:
            out += encode({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                           "model": self.model, "choices": [], "usage": usage_body(usage)})
        return out + DONE


class EventTranslator:
    """Base of the stream translators of providers that stream server-sent events: each
    event translated (`event()`) as soon as its blank line arrives, none after the stream
    ended or failed; `usage` the tokens so far (the subclass's)."""

    def __init__(self, model_: str, include_usage: bool) -> None:
        self.events = EventReader()
        self.chunks = Chunks(model_, include_usage)

    @property
    def usage(self) -> Usage | None:
        raise NotImplementedError

    def event(self, event: Event) -> bytes:
        raise NotImplementedError

    def feed(self, chunk: bytes) -> bytes:
        return self._translate(self.events.feed(chunk))

    def finish(self) -> bytes:
        return self._translate(self.events.end()) + self.chunks.end(self.usage)

    def _translate(self, events: list[Event]) -> bytes:
        out = []
        for event in events:
            if self.chunks.failed or self.chunks.ended:
                break
            out.append(self.event(event))
        return b"".join(out)
