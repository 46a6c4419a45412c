"""Anthropic: OpenAI's Chat Completions to the Messages API (`POST /v1/messages`, the key in
`x-api-key`, `anthropic-version` from the provider's apiVersion, 2023-06-01 by default)
and the answer back, whole or streamed event by event.

The request: system and developer messages become `system`; user, assistant and tool
messages become user/assistant turns (tool results are user turns of `tool_result` blocks,
consecutive turns of one role merged as Anthropic expects); `tool_calls` become `tool_use`
blocks, `image_url` parts `image` blocks (data: URLs as base64, http(s) URLs as url
sources); `max_completion_tokens` or `max_tokens` become `max_tokens`, which Anthropic
requires: when the client sends neither, DEFAULT_MAX_TOKENS (4096, the most every Claude
model accepts); `stop` becomes `stop_sequences`, `user` `metadata.user_id`, `tools` and
`tool_choice` (with `parallel_tool_calls: false`) Anthropic's. Fields Anthropic has no
counterpart for and that only tune sampling (frequency_penalty, presence_penalty, seed,
logit_bias, ...) are left out; ones a client relies on for the answer's shape (n > 1,
a JSON response_format) are refused with a 400 naming them.

Sampling: `temperature` goes on (0 to 1, above is refused), `top_p` only without it (current models refuse
the two together); from API version 2026-10-21 on, Anthropic refuses every sampling
parameter, so neither is sent to a provider configured with that version or a later one.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from lychgate.ai.config import Provider
from lychgate.ai.providers import chat as chat_request
from lychgate.ai.providers import register
from lychgate.ai.providers.base import (
    Answer,
    ProviderCodec,
    ProviderError,
    StreamTranslator,
    UpstreamRequest,
    Usage,
    openai_error,
)
from lychgate.ai.providers.credentials import credential_headers
from lychgate.ai.providers.sse import DONE, ChunkWriter, Event, EventReader, openai_usage

DEFAULT_VERSION = "2023-06-01"
NO_SAMPLING_VERSION = "2026-10-21"  # API versions are dates: from this one on, no temperature or top_p
DEFAULT_MAX_TOKENS = 4096
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")

FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
                  "model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter"}


def _bad(message: str, param: str) -> ProviderError:
    return ProviderError(400, message, param=param, code="invalid_value")


def _image(url: Any, where: str) -> dict[str, Any]:
    if not isinstance(url, str):
        raise _bad(f"Invalid '{where}.image_url.url': expected a string.", f"{where}.image_url.url")
    if url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    header, comma, data = url.partition(",")
    media_type = header.removeprefix("data:").removesuffix(";base64")
    if not (url.startswith("data:") and header.endswith(";base64") and comma and media_type in IMAGE_TYPES):
        raise _bad(f"Invalid '{where}.image_url.url': expected an http(s) URL or a base64 data: URL of "
                   f"{', '.join(IMAGE_TYPES)}.", f"{where}.image_url.url")
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def _user_blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise _bad(f"Invalid '{where}': expected a string or an array of content parts.", where)
    blocks = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "image_url" and isinstance(part.get("image_url"), dict):
            blocks.append(_image(part["image_url"].get("url"), f"{where}[{i}]"))
        else:
            raise _bad(f"Invalid '{where}[{i}]': content parts of type {kind!r} are not supported by this "
                       "provider (text and image_url are).", f"{where}[{i}]")
    return blocks


def _assistant_blocks(message: dict[str, Any], where: str) -> list[dict[str, Any]]:
    text = chat_request.text(message.get("content"), f"{where}.content")
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for j, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not call.get("id"):
            raise _bad(f"Invalid '{where}.tool_calls[{j}]': expected an id and a function with a name.",
                       f"{where}.tool_calls[{j}]")
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            raise _bad(f"Invalid '{where}.tool_calls[{j}].function.arguments': expected a JSON object.",
                       f"{where}.tool_calls[{j}].function.arguments")
        blocks.append({"type": "tool_use", "id": call["id"], "name": function["name"], "input": arguments})
    return blocks


def convert_messages(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """OpenAI's messages -> (Anthropic's system text blocks, its user/assistant turns)."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        role, where = message["role"], f"messages[{i}]"
        if role in ("system", "developer"):
            text = chat_request.text(message.get("content"), f"{where}.content")
            if text:
                system.append({"type": "text", "text": text})
            continue
        if role == "user":
            blocks = _user_blocks(message.get("content"), f"{where}.content")
        elif role == "assistant":
            blocks = _assistant_blocks(message, where)
            if not blocks:  # Anthropic refuses empty turns; an empty assistant message says nothing
                continue
        elif role == "tool":
            if not isinstance(message.get("tool_call_id"), str):
                raise ProviderError(400, f"Missing required parameter: '{where}.tool_call_id'.",
                                    param=f"{where}.tool_call_id", code="missing_required_parameter")
            role, blocks = "user", [{"type": "tool_result", "tool_use_id": message["tool_call_id"],
                                     "content": chat_request.text(message.get("content"), f"{where}.content")}]
        else:
            raise _bad(f"Invalid '{where}.role': {role!r} is not supported by this provider (system, developer, "
                       "user, assistant and tool are).", f"{where}.role")
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return system, turns


def convert_tools(chat: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's tools, tool_choice and parallel_tool_calls -> Anthropic's tools and tool_choice."""
    tools = chat.get("tools")
    if not tools:
        return {}
    out = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise _bad(f"Invalid 'tools[{i}]': expected a function tool with a name.", f"tools[{i}]")
        spec = {"name": function["name"],
                "input_schema": function.get("parameters") or {"type": "object", "properties": {}}}
        if function.get("description"):
            spec["description"] = function["description"]
        out.append(spec)
    choice = chat.get("tool_choice")
    if choice in (None, "auto"):
        tool_choice: dict[str, Any] = {"type": "auto"}
    elif choice == "none":
        tool_choice = {"type": "none"}
    elif choice == "required":
        tool_choice = {"type": "any"}
    elif isinstance(choice, dict) and isinstance((choice.get("function") or {}).get("name"), str):
        tool_choice = {"type": "tool", "name": choice["function"]["name"]}
    else:
        raise _bad("Invalid 'tool_choice': expected none, auto, required or a function by name.", "tool_choice")
    if chat.get("parallel_tool_calls") is False and tool_choice["type"] != "none":
        tool_choice["disable_parallel_tool_use"] = True
    if choice is None and len(tool_choice) == 1:
        return {"tools": out}
    return {"tools": out, "tool_choice": tool_choice}


def sampling(chat: dict[str, Any], version: str) -> dict[str, Any]:
    """The client's temperature or top_p, as far as the API version takes them."""
    temperature, top_p = chat.get("temperature"), chat.get("top_p")
    if version >= NO_SAMPLING_VERSION:
        return {}
    if temperature is not None:
        if not (isinstance(temperature, int | float) and 0 <= temperature <= 1):
            raise _bad("Invalid 'temperature': this provider accepts 0 to 1.", "temperature")
        return {"temperature": temperature}
    return {} if top_p is None else {"top_p": top_p}


def convert_request(chat: dict[str, Any], provider: Provider) -> dict[str, Any]:
    """OpenAI's chat request -> the body of Anthropic's `POST /v1/messages`."""
    system, turns = convert_messages(chat_request.messages(chat))
    if chat.get("n") not in (None, 1):
        raise _bad("Invalid 'n': this provider answers with one choice only.", "n")
    response_format = chat.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") not in (None, "text"):
        raise _bad("Invalid 'response_format': this provider does not support JSON response formats.",
                   "response_format")
    body: dict[str, Any] = {
        "model": chat_request.model(chat, provider),
        "max_tokens": chat.get("max_completion_tokens") or chat.get("max_tokens") or DEFAULT_MAX_TOKENS,
        "messages": turns,
    }
    if system:
        body["system"] = system
    body.update(sampling(chat, provider.api_version or DEFAULT_VERSION))
    stop = chat.get("stop")
    if stop:
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if chat.get("stream"):
        body["stream"] = True
    if isinstance(chat.get("user"), str):
        body["metadata"] = {"user_id": chat["user"]}
    body.update(convert_tools(chat))
    return body


class _Tokens:
    """Anthropic's usage fields as they come (a stream updates some of them at a time);
    the prompt is OpenAI's: cached and cache-writing tokens included."""

    FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def read(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.counts.update({k: int(usage[k]) for k in self.FIELDS if isinstance(usage.get(k), int)})

    @property
    def usage(self) -> Usage | None:
        if not self.counts:
            return None
        c = self.counts
        prompt = c.get("input_tokens", 0) + c.get("cache_creation_input_tokens", 0) + c.get("cache_read_input_tokens", 0)
        return Usage(prompt, c.get("output_tokens", 0))


def convert_answer(message: dict[str, Any], model: str) -> Answer:
    """Anthropic's Message -> OpenAI's chat.completion."""
    text, tool_calls = [], []
    for block in message.get("content") or ():
        if block.get("type") == "text":
            text.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            tool_calls.append({"id": block.get("id"), "type": "function",
                               "function": {"name": block.get("name"),
                                            "arguments": json.dumps(block.get("input") or {})}})
    reply: dict[str, Any] = {"role": "assistant", "content": "".join(text) if text else None, "refusal": None}
    if tool_calls:
        reply["tool_calls"] = tool_calls
    tokens = _Tokens()
    tokens.read(message.get("usage"))
    usage = tokens.usage or Usage()
    body = {"id": message.get("id") or "", "object": "chat.completion", "created": int(time.time()),
            "model": message.get("model") or model,
            "choices": [{"index": 0, "message": reply, "logprobs": None,
                         "finish_reason": FINISH_REASONS.get(message.get("stop_reason") or "", "stop")}],
            "usage": openai_usage(usage)}
    return Answer(200, body, usage)


def convert_error(status: int, body: bytes) -> Answer:
    """Anthropic's `{"type": "error", "error": {"type", "message"}}` -> OpenAI's error, same status."""
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return Answer(status, openai_error(error["message"], str(error.get("type") or chat_request.error_type(status))))
    return chat_request.error_answer(status, body)


@dataclass
class AnthropicCodec(ProviderCodec):
    kind: str = "anthropic"
    default_host: str = "api.anthropic.com"

    def request(self, chat: dict[str, Any], provider: Provider, client_headers: dict[str, str]) -> UpstreamRequest:
        body = convert_request(chat, provider)
        headers, remove = credential_headers(provider, client_headers, "x-api-key")
        headers["anthropic-version"] = provider.api_version or DEFAULT_VERSION
        headers["content-type"] = "application/json"
        return UpstreamRequest(provider.path or "/v1/messages", headers,
                               json.dumps(body, separators=(",", ":")).encode(), remove_headers=remove,
                               stream=bool(body.get("stream")))

    def response(self, status: int, headers: dict[str, str], body: bytes, provider: Provider,
                 model: str) -> Answer:
        if not 200 <= status < 300:
            return convert_error(status, body)
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            return Answer(502, openai_error("The provider's answer is not a JSON object.", "server_error"))
        return convert_answer(message, model)

    def stream(self, provider: Provider, model: str, *, include_usage: bool = False) -> StreamTranslator:
        return AnthropicStream(model, include_usage)


class AnthropicStream:
    """Anthropic's stream events -> OpenAI's chunks, each event as soon as it is complete:
    message_start -> the role chunk; text and tool-argument deltas -> content and tool_calls
    chunks; message_delta -> the finish_reason chunk (and the output tokens); message_stop ->
    the usage chunk (when asked for) and [DONE]; error -> OpenAI's in-stream error."""

    def __init__(self, model: str, include_usage: bool) -> None:
        self._reader = EventReader()
        self._out = ChunkWriter("", model, int(time.time()))
        self._include_usage = include_usage
        self._tokens = _Tokens()
        self._tool_index: dict[int, int] = {}  # Anthropic's content block index -> OpenAI's tool_calls index
        self._done = False

    @property
    def usage(self) -> Usage | None:
        return self._tokens.usage

    def feed(self, chunk: bytes) -> bytes:
        return b"".join(map(self._translate, self._reader.feed(chunk)))

    def finish(self) -> bytes:
        out = b"".join(map(self._translate, self._reader.end()))
        if self._done:
            return out
        self._done = True
        return out + ChunkWriter.error(openai_error("The provider's stream ended before its last event.",
                                                    "server_error")) + DONE

    def _translate(self, event: Event) -> bytes:
        if self._done:
            return b""
        try:
            data = json.loads(event.data)
        except ValueError:
            return b""
        if not isinstance(data, dict):
            return b""
        kind = data.get("type") or event.name
        if kind == "content_block_delta":  # the most frequent first
            return self._delta(data)
        if kind == "message_start":
            message = data.get("message") or {}
            self._out.id = message.get("id") or self._out.id
            self._out.model = message.get("model") or self._out.model
            self._tokens.read(message.get("usage"))
            return self._out.chunk({"role": "assistant", "content": ""})
        if kind == "content_block_start":
            return self._block_start(data)
        if kind == "message_delta":
            self._tokens.read(data.get("usage"))
            reason = (data.get("delta") or {}).get("stop_reason")
            return self._out.chunk({}, FINISH_REASONS.get(reason or "", "stop"))
        if kind == "message_stop":
            self._done = True
            usage = self._tokens.usage
            return (self._out.usage(usage) if self._include_usage and usage else b"") + DONE
        if kind == "error":
            self._done = True
            error = data.get("error") or {}
            return ChunkWriter.error(openai_error(str(error.get("message") or "The provider failed."),
                                                  str(error.get("type") or "api_error"))) + DONE
        return b""  # ping, content_block_stop, and events Anthropic may add

    def _block_start(self, data: dict[str, Any]) -> bytes:
        block = data.get("content_block") or {}
        if block.get("type") == "tool_use":
            index = self._tool_index[data.get("index", 0)] = len(self._tool_index)
            return self._out.chunk({"tool_calls": [{"index": index, "id": block.get("id"), "type": "function",
                                                    "function": {"name": block.get("name"), "arguments": ""}}]})
        if block.get("type") == "text" and block.get("text"):
            return self._out.chunk({"content": block["text"]})
        return b""

    def _delta(self, data: dict[str, Any]) -> bytes:
        delta = data.get("delta") or {}
        if delta.get("type") == "text_delta":
            return self._out.chunk({"content": delta.get("text", "")})
        if delta.get("type") == "input_json_delta":
            index = self._tool_index.get(data.get("index", 0))
            if index is not None:
                return self._out.chunk({"tool_calls": [{"index": index,
                                                        "function": {"arguments": delta.get("partial_json", "")}}]})
        return b""  # thinking and signature deltas: not part of OpenAI's chat answer


register(AnthropicCodec())
