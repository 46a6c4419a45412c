"""Google's Gemini API: OpenAI's Chat Completions to `generateContent` (streamed:
`streamGenerateContent?alt=sse`) and the answer back. Vertex AI (vertexai.py) takes the
same bodies at another URL with another credential.

The key goes in the `x-goog-api-key` header. Google accepts it there or in the `key`
query parameter; kgateway's Envoy transformation put it in the query (`?key=`, plus a
header named `key` Google ignores), but a query string lands in Envoy's access logs
(%REQ(:PATH)%), in traces and in the extension's own logs, and keys must never be logged.
The header is also what Google's own SDKs send. `authHeader` replaces the header's name
and prefix, as for every provider.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from lychgate.ai.config import Provider
from lychgate.ai.providers import chat as oai
from lychgate.ai.providers.base import (
    Answer,
    ProviderCodec,
    UpstreamRequest,
    Usage,
    error_answer,
    json_object,
    json_request,
    provider_error,
    register,
)
from lychgate.ai.providers.chat import invalid
from lychgate.ai.providers.credentials import credential_headers
from lychgate.ai.providers.sse import Event

# Gemini's finishReason -> OpenAI's finish_reason (a choice that calls tools finishes with tool_calls).
FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
          "BLOCKLIST": "content_filter", "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
          "IMAGE_SAFETY": "content_filter", "IMAGE_PROHIBITED_CONTENT": "content_filter"}


@dataclass
class GeminiCodec(ProviderCodec):
    kind: str = "gemini"
    default_host: str = "generativelanguage.googleapis.com"

    def path(self, provider: Provider, model: str) -> str:
        if "/" in model:  # a resource name: models/x, tunedModels/x
            return f"/{provider.api_version or 'v1beta'}/{model}:generateContent"
        return f"/{provider.api_version or 'v1beta'}/models/{model}:generateContent"

    def credentials(self, provider: Provider, client_headers: dict[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
        return credential_headers(provider, client_headers, "x-goog-api-key")

    def request(self, chat: dict[str, Any], provider: Provider, client_headers: dict[str, str]) -> UpstreamRequest:
        model = oai.model(chat, provider).removeprefix("models/")
        body = generate_content(chat)
        stream = oai.wants_stream(chat)
        headers, remove = self.credentials(provider, client_headers)
        return json_request(streaming_path(provider.path or self.path(provider, model), stream), headers, body,
                            remove, stream)

    def error(self, status: int, headers: dict[str, str], body: bytes) -> Answer:
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        return google_error(status, data) or error_answer(status, body)

    def answer(self, data: dict[str, Any], headers: dict[str, str], model: str) -> Answer:
        return google_error(200, data) or answer(data, model)

    def stream(self, provider: Provider, model: str, *, include_usage: bool = False) -> GeminiStream:
        return GeminiStream(model, include_usage)


def streaming_path(path: str, stream: bool) -> str:
    """The streamed method with server-sent events (without alt=sse Google streams one JSON
    array, readable only at its end)."""
    if not stream:
        return path
    path = path.replace(":generateContent", ":streamGenerateContent")
    if ":streamGenerateContent" in path and "alt=" not in path:
        path += ("&" if "?" in path else "?") + "alt=sse"
    return path


# ---- the request -----------------------------------------------------------------------

def generate_content(chat: dict[str, Any]) -> dict[str, Any]:
    msgs = oai.conversation(chat)
    system = [{"text": m.text} for m in msgs if m.role == "system" and m.text]
    body: dict[str, Any] = {"contents": [{"role": role, "parts": parts}
                                         for role, parts in oai.merged(list(map(_turn, msgs)))]}
    if system:
        body["systemInstruction"] = {"parts": system}
    config = generation_config(chat)
    if config:
        body["generationConfig"] = config
    functions = oai.functions(chat)
    if functions:
        body["tools"] = [{"functionDeclarations": [
            {"name": f.name, "description": f.description, "parametersJsonSchema": f.parameters}
            for f in functions]}]
    choice = oai.tool_choice(chat)
    if choice is not None and functions:
        mode = {"auto": "AUTO", "none": "NONE"}.get(choice, "ANY")
        calling: dict[str, Any] = {"mode": mode}
        if choice not in ("auto", "none", "required"):
            calling["allowedFunctionNames"] = [choice]
        body["toolConfig"] = {"functionCallingConfig": calling}
    return body


def _turn(m: oai.Message) -> tuple[str, list[dict[str, Any]]]:
    if m.role == "system":
        return "system", []  # in systemInstruction; merged() leaves empty turns out
    if m.role == "tool":
        result = json_object(m.text)
        response = result if result is not None else {"result": m.text}
        return "user", [{"functionResponse": {"name": m.tool_name, "response": response}}]
    parts: list[dict[str, Any]] = [{"text": m.text}] if m.text else []
    parts += [{"functionCall": {"name": c.name, "args": c.arguments}} for c in m.tool_calls]
    return ("model" if m.role == "assistant" else "user"), parts


def generation_config(chat: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for openai_name, name in (("temperature", "temperature"), ("top_p", "topP"),
                              ("presence_penalty", "presencePenalty"),
                              ("frequency_penalty", "frequencyPenalty")):
        value = oai.number(chat, openai_name)
        if value is not None:
            config[name] = value
    if (tokens := oai.max_tokens(chat)) is not None:
        config["maxOutputTokens"] = tokens
    if stops := oai.stop_sequences(chat):
        config["stopSequences"] = stops
    if (n := oai.choices(chat)) > 1:
        config["candidateCount"] = n
    seed = chat.get("seed")
    if seed is not None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise invalid("seed", "expected an integer.")
        config["seed"] = seed
    config.update(_response_format(chat.get("response_format")))
    return config


def _response_format(fmt: Any) -> dict[str, Any]:
    if fmt is None:
        return {}
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return {}
    if kind == "json_object":
        return {"responseMimeType": "application/json"}
    if kind == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        if not isinstance(schema, dict):
            raise invalid("response_format.json_schema.schema", "expected a JSON schema object.")
        return {"responseMimeType": "application/json", "responseJsonSchema": schema}
    raise invalid("response_format.type", f"{kind!r} is not one of text, json_object, json_schema.")


# ---- the answer ------------------------------------------------------------------------

def google_error(status: int, data: Any) -> Answer | None:
    """Google's error ({"error": {"code", "message", "status"}}; Vertex AI sometimes wraps
    it in a one-element array) in OpenAI's shape with Google's status as the code, or None.
    With a 2xx status (an error inside an answer or a stream), the error's code is the
    status, else 502."""
    if isinstance(data, list) and data:
        data = data[0]
    err = data.get("error") if isinstance(data, dict) else None
    if not isinstance(err, dict) or not isinstance(err.get("message"), str):
        return None
    if status < 400:
        code = err.get("code")
        status = code if isinstance(code, int) and code >= 400 else 502
    return Answer(status, provider_error(status, err["message"], err.get("status")))


def parts_of(candidate: dict[str, Any]) -> tuple[str | None, list[oai.ToolCall]]:
    """A candidate's answer text (None without a text part) and function calls (thought
    summaries left out)."""
    texts, calls = [], []
    for part in (candidate.get("content") or {}).get("parts") or []:
        if part.get("thought"):
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            calls.append(oai.ToolCall(call.get("id") or f"call_{uuid.uuid4().hex[:24]}",
                                      str(call.get("name", "")), call.get("args") or {}))
    return ("".join(texts) if texts else None), calls


def finish_reason(reason: str | None, calls: bool) -> str:
    if calls and reason in (None, "STOP"):
        return "tool_calls"
    return FINISH.get(reason or "STOP", "stop")


def usage_of(data: dict[str, Any]) -> Usage | None:
    """Tokens from usageMetadata: thinking counts as output (it is billed so), the
    prompt of tool use as input."""
    meta = data.get("usageMetadata")
    if not isinstance(meta, dict):
        return None
    thoughts = int(meta.get("thoughtsTokenCount") or 0)
    return Usage(int(meta.get("promptTokenCount") or 0) + int(meta.get("toolUsePromptTokenCount") or 0),
                 int(meta.get("candidatesTokenCount") or 0) + thoughts, thoughts)


def answer(data: dict[str, Any], model: str) -> Answer:
    choices = []
    for pos, cand in enumerate(data.get("candidates") or []):
        text, calls = parts_of(cand)
        reason = finish_reason(cand.get("finishReason"), bool(calls))
        choices.append(oai.choice_body(int(cand.get("index", pos)), text, calls, reason))
    if not choices:  # the prompt was blocked (promptFeedback.blockReason): nothing generated
        choices.append(oai.choice_body(0, None, [], "content_filter"))
    return oai.completion(oai.completion_id(data.get("responseId")), model, choices, usage_of(data))


class GeminiStream(oai.EventTranslator):
    """streamGenerateContent?alt=sse: every event a GenerateContentResponse with the new
    text of each candidate; usageMetadata (running totals) in the last ones."""

    def __init__(self, model: str, include_usage: bool) -> None:
        super().__init__(model, include_usage)
        self._usage: Usage | None = None
        self.calls: dict[int, int] = {}  # choice -> tool calls so far

    @property
    def usage(self) -> Usage | None:
        return self._usage

    def event(self, event: Event) -> bytes:
        try:
            obj = json.loads(event.data)
        except ValueError:
            return self.chunks.error(provider_error(502, f"The provider sent an event that is not JSON: "
                                                         f"{event.data[:200]}"))
        error = google_error(200, obj)
        if error is not None or not isinstance(obj, dict):
            return self.chunks.error(error.body if error else provider_error(502, "The provider sent an event "
                                                                                  "that is not an object."))
        self._usage = usage_of(obj) or self._usage
        out = []
        for pos, cand in enumerate(obj.get("candidates") or []):
            index = int(cand.get("index", pos))
            text, calls = parts_of(cand)
            delta: dict[str, Any] = {"content": text} if text else {}
            if calls:
                first = self.calls.get(index, 0)
                self.calls[index] = first + len(calls)
                delta["tool_calls"] = [oai.tool_call_body(c, first + k) for k, c in enumerate(calls)]
            if delta or index not in self.chunks.started:
                out.append(self.chunks.delta(index, delta or {"content": ""}))
            if cand.get("finishReason"):
                reason = finish_reason(cand["finishReason"], bool(self.calls.get(index)))
                out.append(self.chunks.delta(index, {}, reason))
        if not obj.get("candidates") and (obj.get("promptFeedback") or {}).get("blockReason"):
            out.append(self.chunks.delta(0, {}, "content_filter"))
        return b"".join(out)


register(GeminiCodec())
