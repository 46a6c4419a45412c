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
from dataclasses import dataclass
from typing import Any

from lychgate.ai.config import Provider
from lychgate.ai.providers import chat as chat_request
from lychgate.ai.providers.base import (
    Answer,
    ProviderCodec,
    StreamTranslator,
    UpstreamRequest,
    Usage,
    error_answer,
    error_type,
    json_object,
    json_request,
    openai_error,
    register,
)
from lychgate.ai.providers.chat import Image, Message, invalid
from lychgate.ai.providers.credentials import credential_headers
from lychgate.ai.providers.sse import Event

DEFAULT_VERSION = "2023-06-01"
NO_SAMPLING_VERSION = "2026-10-21"  # API versions are dates: from this one on, no temperature or top_p
DEFAULT_MAX_TOKENS = 4096
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")

FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
                  "model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter"}


def _image(image: Image) -> dict[str, Any]:
    if image.url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": image.url}}
    header, comma, data = image.url.partition(",")
    media_type = header.removeprefix("data:").removesuffix(";base64")
    if not (image.url.startswith("data:") and header.endswith(";base64") and comma and media_type in IMAGE_TYPES):
        raise invalid(image.param, f"expected an http(s) URL or a base64 data: URL of {', '.join(IMAGE_TYPES)}.")
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def _blocks(message: Message) -> list[dict[str, Any]]:
    """A user or assistant message's content blocks (its texts, images and tool calls)."""
    blocks = [{"type": "text", "text": p} if isinstance(p, str) else _image(p) for p in message.parts]
    return blocks + [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                     for c in message.tool_calls]


def _turn(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "system":
        return "system", []  # in the request's `system`; merged() leaves empty turns out
    if message.role == "tool":  # tool results are user turns
        return "user", [{"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.text}]
    return message.role, _blocks(message)


def convert_messages(chat: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """OpenAI's messages -> (Anthropic's system text blocks, its user/assistant turns)."""
    messages = chat_request.conversation(chat, images=True)
    system = [{"type": "text", "text": m.text} for m in messages if m.role == "system" and m.text]
    turns = [{"role": role, "content": blocks} for role, blocks in chat_request.merged(list(map(_turn, messages)))]
    return system, turns


def convert_tools(chat: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's tools, tool_choice and parallel_tool_calls -> Anthropic's tools and tool_choice."""
    functions = chat_request.functions(chat)
    if not functions:
        return {}
    tools = [{"name": f.name, "input_schema": f.parameters, **({"description": f.description} if f.description else {})}
             for f in functions]
    choice = chat_request.tool_choice(chat)
    kinds = {None: "auto", "auto": "auto", "none": "none", "required": "any"}
    tool_choice: dict[str, Any] = {"type": kinds[choice]} if choice in kinds else {"type": "tool", "name": choice}
    if chat.get("parallel_tool_calls") is False and tool_choice["type"] != "none":
        tool_choice["disable_parallel_tool_use"] = True
    if choice is None and len(tool_choice) == 1:
        return {"tools": tools}
    return {"tools": tools, "tool_choice": tool_choice}


def sampling(chat: dict[str, Any], version: str) -> dict[str, Any]:
    """The client's temperature or top_p, as far as the API version takes them."""
    if version >= NO_SAMPLING_VERSION:
        return {}
    temperature = chat_request.number(chat, "temperature", 0, 1)
    if temperature is not None:
        return {"temperature": temperature}
    top_p = chat_request.number(chat, "top_p", 0, 1)
    return {} if top_p is None else {"top_p": top_p}


def convert_request(chat: dict[str, Any], provider: Provider) -> dict[str, Any]:
    """OpenAI's chat request -> the body of Anthropic's `POST /v1/messages`."""
    system, turns = convert_messages(chat)
    if chat_request.choices(chat) > 1:
        raise invalid("n", "this provider answers with one choice only.")
    response_format = chat.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") not in (None, "text"):
        raise invalid("response_format", "this provider does not support JSON response formats.")
    body: dict[str, Any] = {
        "model": chat_request.model(chat, provider),
        "max_tokens": chat_request.max_tokens(chat) or DEFAULT_MAX_TOKENS,
        "messages": turns,
    }
    if system:
        body["system"] = system
    body.update(sampling(chat, provider.api_version or DEFAULT_VERSION))
    stop = chat_request.stop_sequences(chat)
    if stop:
        body["stop_sequences"] = stop
    if chat_request.wants_stream(chat):
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
    text, calls = [], []
    for block in message.get("content") or ():
        if block.get("type") == "text":
            text.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            calls.append(chat_request.ToolCall(str(block.get("id") or ""), str(block.get("name") or ""),
                                               block.get("input") or {}))
    tokens = _Tokens()
    tokens.read(message.get("usage"))
    choice = chat_request.choice_body(0, "".join(text) if text else None, calls,
                                      FINISH_REASONS.get(message.get("stop_reason") or "", "stop"))
    return chat_request.completion(chat_request.completion_id(message.get("id")), message.get("model") or model,
                                   [choice], tokens.usage or Usage())


def convert_error(status: int, body: bytes) -> Answer:
    """Anthropic's `{"type": "error", "error": {"type", "message"}}` -> OpenAI's error, same status."""
    parsed = json_object(body)
    error = parsed.get("error") if parsed is not None else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return Answer(status, openai_error(error["message"], str(error.get("type") or error_type(status))))
    return error_answer(status, body)


@dataclass
class AnthropicCodec(ProviderCodec):
    kind: str = "anthropic"
    default_host: str = "api.anthropic.com"

    def request(self, chat: dict[str, Any], provider: Provider, client_headers: dict[str, str]) -> UpstreamRequest:
        body = convert_request(chat, provider)
        headers, remove = credential_headers(provider, client_headers, "x-api-key")
        headers["anthropic-version"] = provider.api_version or DEFAULT_VERSION
        return json_request(provider.path or "/v1/messages", headers, body, remove, chat_request.wants_stream(body))

    def error(self, status: int, headers: dict[str, str], body: bytes) -> Answer:
        return convert_error(status, body)

    def answer(self, data: dict[str, Any], headers: dict[str, str], model: str) -> Answer:
        return convert_answer(data, model)

    def stream(self, provider: Provider, model: str, *, include_usage: bool = False) -> StreamTranslator:
        return AnthropicStream(model, include_usage)


class AnthropicStream(chat_request.EventTranslator):
    """Anthropic's stream events -> OpenAI's chunks, each event as soon as it is complete:
    message_start -> the role chunk; text and tool-argument deltas -> content and tool_calls
    chunks; message_delta -> the finish_reason chunk (and the output tokens); message_stop ->
    the usage chunk (when asked for) and [DONE]; error -> OpenAI's in-stream error."""

    def __init__(self, model: str, include_usage: bool) -> None:
        super().__init__(model, include_usage)
        self._tokens = _Tokens()
        self._tool_index: dict[int, int] = {}  # Anthropic's content block index -> OpenAI's tool_calls index

    @property
    def usage(self) -> Usage | None:
        return self._tokens.usage

    def event(self, event: Event) -> bytes:
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
            if message.get("id"):
                self.chunks.id = chat_request.completion_id(message["id"])
            self.chunks.model = message.get("model") or self.chunks.model
            self._tokens.read(message.get("usage"))
            return self.chunks.delta(0, {"content": ""})
        if kind == "content_block_start":
            return self._block_start(data)
        if kind == "message_delta":
            self._tokens.read(data.get("usage"))
            reason = (data.get("delta") or {}).get("stop_reason")
            return self.chunks.delta(0, {}, FINISH_REASONS.get(reason or "", "stop"))
        if kind == "message_stop":
            return self.chunks.end(self.usage)
        if kind == "error":
            error = data.get("error") or {}
            return self.chunks.error(openai_error(str(error.get("message") or "The provider failed."),
                                                  str(error.get("type") or "api_error")))
        return b""  # ping, content_block_stop, and events Anthropic may add

    def _block_start(self, data: dict[str, Any]) -> bytes:
        block = data.get("content_block") or {}
        if block.get("type") == "tool_use":
            index = self._tool_index[data.get("index", 0)] = len(self._tool_index)
            return self.chunks.delta(0, {"tool_calls": [{"index": index, "id": block.get("id"), "type": "function",
                                                         "function": {"name": block.get("name"), "arguments": ""}}]})
        if block.get("type") == "text" and block.get("text"):
            return self.chunks.delta(0, {"content": block["text"]})
        return b""

    def _delta(self, data: dict[str, Any]) -> bytes:
        delta = data.get("delta") or {}
        if delta.get("type") == "text_delta":
            return self.chunks.delta(0, {"content": delta.get("text", "")})
        if delta.get("type") == "input_json_delta":
            index = self._tool_index.get(data.get("index", 0))
            if index is not None:
                return self.chunks.delta(0, {"tool_calls": [
                    {"index": index, "function": {"arguments": delta.get("partial_json", "")}}]})
        return b""  # thinking and signature deltas: not part of OpenAI's chat answer


register(AnthropicCodec())
