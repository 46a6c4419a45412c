"""Stand-ins for OpenAI's Chat Completions API and Azure OpenAI's deployments.

`OpenAIStandIn(key)` serves `POST /v1/chat/completions` and checks what OpenAI checks:
`Authorization: Bearer <key>`, a JSON body with a known `model`, a non-empty `messages`
array of known roles (tool messages with their `tool_call_id`), no unrecognized argument,
`stream_options` only with `stream`, temperature 0..2. It answers a chat.completion with
`reply` (a tool call when the request requires one) and usage (one token per word), or
streams it word by word as OpenAI does: role chunk, content chunks, finish chunk, the usage
chunk when `stream_options.include_usage`, `data: [DONE]`.

`AzureOpenAIStandIn(key, deployments, api_versions)` serves
`POST /openai/deployments/{name}/chat/completions?api-version=...` with the key in `api-key`,
Azure's error bodies, the deployment's model in answers and Azure's first stream chunk of
`prompt_filter_results` with no choices.
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from tests.ai.standins import StandIn, count_tokens, words

PARAMETERS = {
    "model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
    "presence_penalty", "prompt_cache_key", "reasoning_effort", "response_format", "safety_identifier", "seed",
    "service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice", "tools",
    "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
}
ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
                429: "requests", 500: "server_error", 503: "server_error"}


def content_text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def prompt_tokens(body: dict[str, Any]) -> int:
    """The stand-ins' prompt token count: the words of every message's text."""
    return sum(count_tokens(content_text(m.get("content"))) for m in body["messages"])


class OpenAIStandIn(StandIn):
    models = {"gpt-4o-mini", "gpt-4o", "gpt-4.1-mini"}
    chat_path = "/v1/chat/completions"

    def __init__(self, key: str = "sk-test-openai", reply: str = "Hello! How can I help you today?",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key, self.reply = key, reply
        self.tool_arguments: dict[str, Any] = {"location": "Paris"}
        self.route("POST", self.chat_path, self.chat)

    def error(self, status: int, message: str, code: str | None = None, param: str | None = None) -> web.Response:
        return web.json_response({"error": {"message": message, "type": OPENAI_TYPES.get(status, "server_error"),
                                            "param": param, "code": code}}, status=status)

    def answer_model(self, requested: str) -> str:
        return requested

    # -- checks ---------------------------------------------------------------------------

    def check_auth(self, request: web.Request) -> web.Response | None:
        value = request.headers.get("Authorization")
        if not value:
            return self.refuse(request, 401, "You didn't provide an API key. You need to provide your API key in "
                                             "an Authorization header using Bearer auth (i.e. Authorization: Bearer "
                                             "YOUR_KEY).")
        if value != f"Bearer {self.key}":
            self.recorded(request).problems.append("wrong key")
            return self.error(401, "Incorrect API key provided.", code="invalid_api_key")
        return None

    def check_body(self, request: web.Request, body: Any, model_required: bool = True) -> web.Response | None:
        if not isinstance(body, dict):
            return self.refuse(request, 400, "We could not parse the JSON body of your request.")
        for name in body:
            if name not in PARAMETERS:
                return self.refuse(request, 400, f"Unrecognized request argument supplied: {name}")
        if model_required:
            if not isinstance(body.get("model"), str):
                return self.refuse(request, 400, "you must provide a model parameter")
            if body["model"] not in self.models:
                self.recorded(request).problems.append("unknown model")
                return self.error(404, f"The model `{body['model']}` does not exist or you do not have access to it.",
                                  code="model_not_found")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self.refuse(request, 400, "Missing required parameter: 'messages'." if messages is None
                               else "Invalid 'messages': empty array.")
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ROLES:
                return self.refuse(request, 400, f"Invalid value for 'messages[{i}].role'.")
            if message["role"] == "tool" and not isinstance(message.get("tool_call_id"), str):
                return self.refuse(request, 400, f"Missing required parameter: 'messages[{i}].tool_call_id'.")
            if message["role"] in ("user", "system", "developer", "tool") and "content" not in message:
                return self.refuse(request, 400, f"Missing required parameter: 'messages[{i}].content'.")
        if "stream_options" in body and not body.get("stream"):
            return self.refuse(request, 400, "The 'stream_options' parameter is only allowed when 'stream' is "
                                             "enabled.")
        temperature = body.get("temperature")
        if temperature is not None and not (isinstance(temperature, int | float) and 0 <= temperature <= 2):
            return self.refuse(request, 400, "Invalid 'temperature': decimal above maximum value.")
        return None

    # -- answers --------------------------------------------------------------------------

    def tool_call(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The tool call to answer with: when the request requires a tool call."""
        tools, choice = body.get("tools") or [], body.get("tool_choice")
        if not tools or not (choice == "required" or isinstance(choice, dict)):
            return None
        name = choice["function"]["name"] if isinstance(choice, dict) else tools[0]["function"]["name"]
        return {"id": "call_standin1", "type": "function",
                "function": {"name": name, "arguments": json.dumps(self.tool_arguments)}}

    async def chat(self, request: web.Request) -> web.StreamResponse:
        refused = self.check_auth(request)
        if refused:
            return refused
        body = self.json_body(request)
        refused = self.check_body(request, body)
        return refused or await self.answer(request, body, self.answer_model(body["model"]))

    async def answer(self, request: web.Request, body: dict[str, Any], model: str) -> web.StreamResponse:
        call = self.tool_call(body)
        usage = {"prompt_tokens": prompt_tokens(body),
                 "completion_tokens": count_tokens(call["function"]["arguments"] if call else self.reply)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        base = {"id": f"chatcmpl-standin{len(self.requests)}", "created": int(time.time()), "model": model,
                "system_fingerprint": "fp_standin"}
        finish = "tool_calls" if call else "stop"
        if body.get("stream"):
            with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await self.send_stream(request, self.events(base, call, finish, usage, with_usage),
                                          "text/event-stream; charset=utf-8")
        message: dict[str, Any] = {"role": "assistant", "content": None if call else self.reply, "refusal": None,
                                   "annotations": []}
        if call:
            message["tool_calls"] = [call]
        return web.json_response({**base, "object": "chat.completion", "service_tier": "default", "usage": usage,
                                  "choices": [{"index": 0, "message": message, "logprobs": None,
                                               "finish_reason": finish}]})

    def first_events(self, base: dict[str, Any]) -> list[dict[str, Any]]:
        return []

    def events(self, base: dict[str, Any], call: dict[str, Any] | None, finish: str, usage: dict[str, Any],
               with_usage: bool) -> list[bytes]:
        chunk = {**base, "object": "chat.completion.chunk", "service_tier": "default"}
        if with_usage:
            chunk["usage"] = None

        def choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {**chunk, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                          "finish_reason": finish_reason}]}

        out = [*self.first_events(base), choice({"role": "assistant", "content": "", "refusal": None})]
        if call:
            out.append(choice({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                               "function": {"name": call["function"]["name"], "arguments": ""}}]}))
            out += [choice({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
                    for piece in words(call["function"]["arguments"])]
        else:
            out += [choice({"content": piece}) for piece in words(self.reply)]
        out.append(choice({}, finish))
        if with_usage:
            out.append({**chunk, "choices": [], "usage": usage})
        return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in out] + [b"data: [DONE]\n\n"]


class AzureOpenAIStandIn(OpenAIStandIn):
    api_versions = {"2024-02-01", "2024-06-01", "2024-10-21", "2025-01-01-preview"}
    chat_path = "/openai/deployments/{deployment}/chat/completions"

    def __init__(self, key: str = "azure-test-key", deployments: dict[str, str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(key, **kwargs)
        self.deployments = deployments or {"gpt-4o-mini": "gpt-4o-mini-2024-07-18"}  # name -> model

    def error(self, status: int, message: str, code: str | None = None, param: str | None = None) -> web.Response:
        return web.json_response({"error": {"code": code or str(status), "message": message}}, status=status)

    def check_auth(self, request: web.Request) -> web.Response | None:
        key = request.headers.get("api-key")
        if key is None:
            return self.refuse(request, 401, "Access denied due to missing subscription key. Make sure to include "
                                             "subscription key when making requests to an API.")
        if key != self.key:
            return self.refuse(request, 401, "Access denied due to invalid subscription key or wrong API endpoint.")
        return None

    async def chat(self, request: web.Request) -> web.StreamResponse:
        version = request.query.get("api-version")
        if version is None:
            return self.refuse(request, 404, "Resource not found")
        if version not in self.api_versions:
            return self.refuse(request, 400, "API version not supported")
        refused = self.check_auth(request)
        if refused:
            return refused
        deployment = request.match_info["deployment"]
        if deployment not in self.deployments:
            return self.refuse(request, 404, "The API deployment for this resource does not exist.")
        body = self.json_body(request)
        refused = self.check_body(request, body, model_required=False)
        return refused or await self.answer(request, body, self.deployments[deployment])

    def first_events(self, base: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"id": "", "object": "", "created": 0, "model": "", "choices": [],
                 "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {
                     "hate": {"filtered": False, "severity": "safe"}}}]}]
