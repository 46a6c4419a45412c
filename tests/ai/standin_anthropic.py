"""A stand-in for Anthropic's Messages API (`POST /v1/messages`).

It checks what Anthropic checks: the key in `x-api-key` (or `Authorization: Bearer`, as
the anthropic SDK sends it since API version 2026-10-21), an `anthropic-version` header it
knows, a JSON body with only the Messages API's fields, a known `model`, `max_tokens` (an
integer of at least 1), `messages` of user and assistant turns (consecutive turns of one
role are combined into one; system text goes in `system`, or, from 2026-10-21, system
turns), content blocks of known types (non-empty text, images with a supported media type,
tool_use only from the assistant, tool_result only from the user and answering a tool_use
of the turn before), tools with an object input_schema, and sampling as current models
take it: temperature 0..1, not with top_p; from 2026-10-21 no temperature, top_p or top_k.

It answers a Message with `reply` (cut at a stop sequence or at max_tokens words, with
the matching stop_reason; a tool_use block when tool_choice requires a tool) and usage
(one token per word), or streams it as Anthropic does: message_start, content_block_start,
ping, content_block_delta per word, content_block_stop, message_delta (stop_reason, output
tokens), message_stop. `stream_error_after = n` sends an `error` event (overloaded) after
n text deltas instead of finishing.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from tests.ai.standins import StandIn, count_tokens, words

FIELDS = {"model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream", "temperature",
          "top_p", "top_k", "tools", "tool_choice", "thinking", "service_tier", "container", "mcp_servers",
          "context_management", "cache_control", "diagnostics", "inference_geo", "output_config", "speed",
          "user_profile_id", "workspace_id"}
VERSIONS = {"2023-06-01", "2023-01-01", "2026-10-21"}
SAMPLING = ("temperature", "top_p", "top_k")
IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
               529: "overloaded_error"}


def block_text(block: dict[str, Any]) -> str:
    if block.get("type") == "text":
        return str(block.get("text", ""))
    if block.get("type") == "tool_result":
        content = block.get("content")
        return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or ())
    return ""


def prompt_tokens(body: dict[str, Any]) -> int:
    """The stand-in's input token count: the words of the system text and every turn's text."""
    system = body.get("system") or ""
    text = [system] if isinstance(system, str) else [b.get("text", "") for b in system]
    for message in body["messages"]:
        content = message["content"]
        text += [content] if isinstance(content, str) else [block_text(b) for b in content]
    return sum(map(count_tokens, text))


class AnthropicStandIn(StandIn):
    models = {"claude-sonnet-4-6", "claude-haiku-4-5", "claude-opus-4-7", "claude-sonnet-4-5"}

    def __init__(self, key: str = "sk-ant-test", reply: str = "Hello! I am Claude, how can I help?",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key, self.reply = key, reply
        self.tool_input: dict[str, Any] = {"location": "Paris"}
        self.stream_error_after: int | None = None
        self.route("POST", "/v1/messages", self.messages)

    def error(self, status: int, message: str) -> web.Response:
        return web.json_response({"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"),
                                                             "message": message}},
                                 status=status, headers={"request-id": "req_standin"})

    # -- checks ---------------------------------------------------------------------------

    def check(self, request: web.Request, body: Any) -> web.Response | None:
        bearer = request.headers.get("authorization", "")
        key = request.headers.get("x-api-key") or (bearer[len("Bearer "):] if bearer.startswith("Bearer ") else None)
        if key is None:
            return self.refuse(request, 401, "x-api-key header is required")
        if key != self.key:
            return self.refuse(request, 401, "invalid x-api-key")
        version = request.headers.get("anthropic-version")
        if version is None:
            return self.refuse(request, 400, "anthropic-version: header is required")
        if version not in VERSIONS:
            return self.refuse(request, 400, f"anthropic-version: invalid version: {version}")
        if not isinstance(body, dict):
            return self.refuse(request, 400, "Request body is not valid JSON")
        problem = self.body_problem(body, version)
        if problem:
            return self.refuse(request, 400, problem)
        if body["model"] not in self.models:
            return self.refuse(request, 404, f"model: {body['model']}")
        return None

    def body_problem(self, body: dict[str, Any], version: str) -> str | None:
        for name in body:
            if name not in FIELDS:
                return f"{name}: Extra inputs are not permitted"
            if name in SAMPLING and version >= "2026-10-21":
                return f"{name}: sampling parameters are not supported from API version 2026-10-21"
        if "temperature" in body and "top_p" in body:
            return "temperature and top_p cannot both be specified for this model. Please use only one."
        for name in ("model", "max_tokens", "messages"):
            if name not in body:
                return f"{name}: Field required"
        if not isinstance(body["model"], str):
            return "model: Input should be a valid string"
        if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
            return "max_tokens: Input should be greater than or equal to 1"
        temperature = body.get("temperature")
        if temperature is not None and not (isinstance(temperature, int | float) and 0 <= temperature <= 1):
            return "temperature: Input should be less than or equal to 1"
        system = body.get("system")
        if system is not None and not isinstance(system, str) and not (
                isinstance(system, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in system)):
            return "system: Input should be a valid string or a list of text blocks"
        stop = body.get("stop_sequences")
        if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
            return "stop_sequences: Input should be a valid list of strings"
        return self.messages_problem(body["messages"], version) or self.tools_problem(body)

    def messages_problem(self, messages: Any, version: str) -> str | None:
        if not isinstance(messages, list) or not messages:
            return "messages: at least one message is required"
        roles = ("user", "assistant", "system") if version >= "2026-10-21" else ("user", "assistant")
        previous_tool_uses: set[str] = set()
        tool_uses: set[str] = set()
        for i, message in enumerate(messages):
            role = message.get("role") if isinstance(message, dict) else None
            if not isinstance(role, str) or role not in roles:
                return f"messages.{i}.role: Input should be {' or '.join(map(repr, roles))}"
            if not i or messages[i - 1]["role"] != role:  # consecutive turns of one role make one turn
                previous_tool_uses, tool_uses = tool_uses, set()
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            if not isinstance(content, list):
                return f"messages.{i}.content: Input should be a valid string or list"
            for j, block in enumerate(content):
                problem = self.block_problem(block, role, previous_tool_uses, f"messages.{i}.content.{j}")
                if problem:
                    return problem
                if block["type"] == "tool_use":
                    tool_uses.add(block["id"])
        return None

    @staticmethod
    def block_problem(block: Any, role: str, tool_uses: set[str], where: str) -> str | None:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            if not isinstance(block.get("text"), str) or not block["text"]:
                return "messages: text content blocks must be non-empty"
        elif kind == "image":
            source = block.get("source") or {}
            if source.get("type") == "base64":
                if source.get("media_type") not in IMAGE_TYPES or not source.get("data"):
                    return f"{where}.source.base64.media_type: Input should be 'image/jpeg', 'image/png', " \
                           "'image/gif' or 'image/webp'"
            elif source.get("type") != "url" or not str(source.get("url", "")).startswith(("http://", "https://")):
                return f"{where}.source: Input tag does not match any of the expected tags: 'base64', 'url'"
        elif kind == "tool_use":
            if role != "assistant":
                return f"{where}: tool_use blocks are only allowed in assistant messages"
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str) \
                    or not isinstance(block.get("input"), dict):
                return f"{where}: tool_use blocks need an id, a name and an object input"
        elif kind == "tool_result":
            if role != "user":
                return f"{where}: tool_result blocks are only allowed in user messages"
            if block.get("tool_use_id") not in tool_uses:
                return f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {block.get('tool_use_id')}." \
                       " Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
        else:
            return f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected tags"
        return None

    @staticmethod
    def tools_problem(body: dict[str, Any]) -> str | None:
        names = set()
        for i, tool in enumerate(body.get("tools") or ()):
            schema = tool.get("input_schema") if isinstance(tool, dict) else None
            if not isinstance(tool.get("name"), str) or not isinstance(schema, dict) or schema.get("type") != "object":
                return f"tools.{i}: a tool needs a name and an input_schema of type object"
            names.add(tool["name"])
        choice = body.get("tool_choice")
        if choice is not None:
            if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
                return "tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'"
            if choice["type"] == "tool" and choice.get("name") not in names:
                return f"tool_choice: tool {choice.get('name')!r} not found in tools"
        return None

    # -- answers --------------------------------------------------------------------------

    def text_and_stop(self, body: dict[str, Any]) -> tuple[str, str, str | None]:
        """(the reply's text, stop_reason, the stop sequence met)."""
        text = self.reply
        for stop in body.get("stop_sequences") or ():
            if stop in text:
                return text[:text.index(stop)], "stop_sequence", stop
        pieces = words(text)
        if len(pieces) > body["max_tokens"]:
            return "".join(pieces[:body["max_tokens"]]), "max_tokens", None
        return text, "end_turn", None

    def tool_use(self, body: dict[str, Any]) -> dict[str, Any] | None:
        choice = body.get("tool_choice") or {}
        if not body.get("tools") or choice.get("type") not in ("any", "tool"):
            return None
        name = choice.get("name") or body["tools"][0]["name"]
        return {"type": "tool_use", "id": f"toolu_standin{len(self.requests)}", "name": name,
                "input": self.tool_input}

    async def messages(self, request: web.Request) -> web.StreamResponse:
        body = self.json_body(request)
        refused = self.check(request, body)
        if refused:
            return refused
        tool = self.tool_use(body)
        text, stop_reason, stop_sequence = ("", "tool_use", None) if tool else self.text_and_stop(body)
        usage = {"input_tokens": prompt_tokens(body), "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                 "output_tokens": count_tokens(json.dumps(tool["input"]) if tool else text),
                 "service_tier": "standard"}
        message = {"id": f"msg_standin{len(self.requests)}", "type": "message", "role": "assistant",
                   "model": body["model"], "content": [], "stop_reason": None, "stop_sequence": None,
                   "usage": usage}
        if body.get("stream"):
            return await self.send_stream(request, self.events(message, text, tool, stop_reason, stop_sequence),
                                          "text/event-stream; charset=utf-8", {"request-id": "req_standin"})
        content = ([{"type": "text", "text": text}] if text else []) + ([tool] if tool else [])
        return web.json_response({**message, "content": content, "stop_reason": stop_reason,
                                  "stop_sequence": stop_sequence}, headers={"request-id": "req_standin"})

    def events(self, message: dict[str, Any], text: str, tool: dict[str, Any] | None, stop_reason: str,
               stop_sequence: str | None) -> list[bytes]:
        def event(name: str, data: dict[str, Any]) -> bytes:
            return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

        start_usage = {**message["usage"], "output_tokens": 1}
        out = [event("message_start", {"message": {**message, "usage": start_usage}})]
        index = 0
        if text or not tool:
            out += [event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
                    event("ping", {})]
            for n, piece in enumerate(words(text)):
                if n == self.stream_error_after:
                    return [*out, event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}})]
                out.append(event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}}))
            out.append(event("content_block_stop", {"index": 0}))
            index = 1
        if tool:
            out.append(event("content_block_start", {"index": index, "content_block": {**tool, "input": {}}}))
            out += [event("content_block_delta", {"index": index, "delta": {"type": "input_json_delta",
                                                                            "partial_json": piece}})
                    for piece in words(json.dumps(tool["input"]))]
            out.append(event("content_block_stop", {"index": index}))
        out.append(event("message_delta", {"delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                                           "usage": {"output_tokens": message["usage"]["output_tokens"]}}))
        return [*out, event("message_stop", {})]
