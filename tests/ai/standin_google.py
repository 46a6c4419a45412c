"""A stand-in for Google's Gemini API and Vertex AI's Gemini models, on loopback.

It checks what Google checks before a model runs: the credential (Gemini: an API key in
`x-goog-api-key` or the `key` query parameter; Vertex AI: an OAuth token in
`Authorization: Bearer`), the URL (API version, model, method; Vertex AI's project and
location), and the GenerateContentRequest as Google's proto-JSON parser reads it
(unknown fields refused by name, roles user and model, no empty parts or texts). It
answers like Gemini: candidates with parts, finishReason, usageMetadata, and for
`streamGenerateContent?alt=sse` several server-sent events ending in CRLF CRLF, with
small delays between them. Errors have Google's shape: {"error": {"code", "message", "status"}},
also when it is told to fail (`fail(429)`: RESOURCE_EXHAUSTED, as before a failover).

What it says is made from the request, so tests know it in advance: "You said: <the last
user text>" (see `reply`); words are tokens. Triggers in the user's text: a declared
function's name -> a functionCall; "forbidden" -> finishReason SAFETY; "blocked-prompt" ->
promptFeedback.blockReason. Model names: "gemini-busy" -> 429, "gemini-down" -> 503,
"...thinking..." -> a thought part and thoughtsTokenCount; not "gemini-..." -> 404.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.ai.standins import StandIn, count_tokens

REQUEST_FIELDS = {"contents", "systemInstruction", "generationConfig", "tools", "toolConfig",
                  "safetySettings", "cachedContent", "labels"}
CONFIG_FIELDS = {"temperature", "topP", "topK", "candidateCount", "maxOutputTokens", "stopSequences",
                 "presencePenalty", "frequencyPenalty", "seed", "responseMimeType", "responseSchema",
                 "responseJsonSchema", "responseModalities", "thinkingConfig", "responseLogprobs", "logprobs"}
PART_DATA = {"text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode",
             "codeExecutionResult"}
PART_FIELDS = PART_DATA | {"thought", "thoughtSignature"}
# Google's canonical error code of each HTTP status (google.rpc.Code), the error's `status`.
STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
          429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


class GoogleError(Exception):
    """A check failed: the stand-in answers with Google's error."""

    def __init__(self, code: int, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.reason = code, message, reason


def invalid(message: str) -> GoogleError:
    return GoogleError(400, message)


class GoogleStandIn(StandIn):
    api_key = "gemini-test-key"
    token = "ya29.vertex-test-token"
    project = "my-project"
    location = "us-central1"

    def __init__(self, chunk_delay: float = 0.005, **kwargs: Any) -> None:
        super().__init__(chunk_delay=chunk_delay, **kwargs)
        self.route("POST", "/{version}/models/{call}", self.gemini)
        self.route("POST", "/{version}/projects/{project}/locations/{location}/publishers/{publisher}/models/{call}",
                   self.vertex)

    def error(self, status: int, message: str, reason: str | None = None) -> web.Response:
        error: dict[str, Any] = {"code": status, "message": message, "status": STATUS.get(status, "UNKNOWN")}
        if reason:
            error["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                                 "domain": "googleapis.com"}]
        return web.json_response({"error": error}, status=status)

    async def gemini(self, request: web.Request) -> web.StreamResponse:
        def auth() -> None:
            key = request.headers.get("x-goog-api-key") or request.query.get("key")
            if not key:
                raise GoogleError(403, "Method doesn't allow unregistered callers (callers without established "
                                  "identity). Please use API Key or other form of API consumer identity to call "
                                  "this API.")
            if key != self.api_key:
                raise GoogleError(400, "API key not valid. Please pass a valid API key.", "API_KEY_INVALID")
            if request.match_info["version"] not in ("v1", "v1beta", "v1alpha"):
                raise GoogleError(404, f"API version {request.match_info['version']} not found")

        return await self.answer(request, auth)

    async def vertex(self, request: web.Request) -> web.StreamResponse:
        def auth() -> None:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            if scheme != "Bearer" or not token:
                raise GoogleError(401, "Request is missing required authentication credential. Expected OAuth 2 "
                                  "access token, login cookie or other valid authentication credential.")
            if token != self.token:
                raise GoogleError(401, "Request had invalid authentication credentials. Expected OAuth 2 access "
                                  "token, login cookie or other valid authentication credential.",
                                  "ACCESS_TOKEN_TYPE_UNSUPPORTED")
            info = request.match_info
            if info["version"] not in ("v1", "v1beta1"):
                raise GoogleError(404, f"API version {info['version']} not found")
            if info["project"] != self.project or info["location"] != self.location:
                raise GoogleError(403, f"Permission denied on resource project {info['project']} (location "
                                  f"{info['location']}).")
            if info["publisher"] != "google":
                raise GoogleError(404, f"Publisher {info['publisher']} has no Gemini models.")

        return await self.answer(request, auth)

    async def answer(self, request: web.Request, auth: Callable[[], None]) -> web.StreamResponse:
        try:
            auth()
            model, _, method = request.match_info["call"].partition(":")
            if method not in ("generateContent", "streamGenerateContent"):
                raise GoogleError(404, f"Method {method!r} not found.")
            body = self.json_body(request)
            if body is None:
                raise invalid("Invalid JSON payload received.")
            check_request(body)
            if not model.startswith("gemini"):
                raise GoogleError(404, f"models/{model} is not found for API version {request.match_info['version']}"
                                  f", or is not supported for {method}. Call ListModels to see the list of "
                                  "available models and their supported methods.")
            if model == "gemini-busy":
                raise GoogleError(429, "Resource has been exhausted (e.g. check quota).")
            if model == "gemini-down":
                raise GoogleError(503, "The model is overloaded. Please try again later.")
        except GoogleError as e:
            return self.refuse(request, e.code, e.message, reason=e.reason)
        events, whole = generate(body, model)
        if method == "generateContent":
            return web.json_response(whole)
        if request.query.get("alt") != "sse":  # without alt=sse: one JSON array of the events
            return web.json_response(events)
        return await self.send_stream(request, [b"data: " + json.dumps(e, ensure_ascii=False).encode() + b"\r\n\r\n"
                                                for e in events], "text/event-stream")


# ---- the request, as Google's parser reads it ------------------------------------------

def check_request(body: Any) -> None:
    if not isinstance(body, dict):
        raise invalid("Invalid JSON payload received. Expected an object.")
    for name in body:
        if name not in REQUEST_FIELDS:
            raise invalid(f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.')
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise invalid("* GenerateContentRequest.contents: contents is not specified")
    for i, content in enumerate(contents):
        if content.get("role") not in ("user", "model"):
            raise invalid("Please use a valid role: user, model.")
        check_parts(content.get("parts"), f"contents[{i}]")
    if "systemInstruction" in body:
        check_parts(body["systemInstruction"].get("parts"), "system_instruction")
    config = body.get("generationConfig", {})
    for name, value in config.items():
        if name not in CONFIG_FIELDS:
            raise invalid(f'Invalid JSON payload received. Unknown name "{name}" at \'generation_config\': '
                          "Cannot find field.")
        if name in ("maxOutputTokens", "candidateCount", "seed") and not isinstance(value, int):
            raise invalid(f"Invalid value at 'generation_config.{name}', expected an integer: {value!r}")
    if not 0 <= config.get("temperature", 1) <= 2:
        raise invalid("* GenerateContentRequest.generation_config.temperature: must be in [0.0, 2.0]")
    if len(config.get("stopSequences", [])) > 5:
        raise invalid("* GenerateContentRequest.generation_config.stop_sequences: at most 5")
    for tool in body.get("tools", []):
        for decl in tool.get("functionDeclarations", []):
            if not decl.get("name") or set(decl) - {"name", "description", "parameters", "parametersJsonSchema"}:
                raise invalid(f"* GenerateContentRequest.tools: bad function declaration {decl}")
    mode = body.get("toolConfig", {}).get("functionCallingConfig", {}).get("mode", "AUTO")
    if mode not in ("AUTO", "ANY", "NONE", "VALIDATED"):
        raise invalid(f"Invalid value at 'tool_config.function_calling_config.mode': {mode!r}")


def check_parts(parts: Any, where: str) -> None:
    if not isinstance(parts, list) or not parts:
        raise invalid(f"* GenerateContentRequest.{where}.parts: contents.parts must not be empty.")
    for part in parts:
        if set(part) - PART_FIELDS or len(set(part) & PART_DATA) != 1:
            raise invalid(f"* GenerateContentRequest.{where}.parts: a part holds exactly one kind of data")
        if "text" in part and not part["text"]:
            raise invalid("Unable to submit request because it has an empty text parameter. Add a value to "
                          "the parameter and try again.")
        call = part.get("functionResponse")
        if call is not None and (not call.get("name") or not isinstance(call.get("response"), dict)):
            raise invalid(f"* GenerateContentRequest.{where}.parts.function_response: name and response "
                          "are required")


# ---- the answer ------------------------------------------------------------------------

def texts(content: dict[str, Any]) -> list[str]:
    return [p["text"] for p in content.get("parts", []) if "text" in p]


def reply(body: dict[str, Any]) -> str:
    """What the stand-in says: to the user's last text, or about the last tool result."""
    last = body["contents"][-1]
    results = [p["functionResponse"] for p in last["parts"] if "functionResponse" in p]
    if results:
        return "The tool said: " + json.dumps(results[0]["response"], sort_keys=True)
    user = next((t for c in reversed(body["contents"]) if c["role"] == "user" for t in texts(c)), "")
    return f"You said: {user}"


def generate(body: dict[str, Any], model: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The answer as streamed events, and whole."""
    config = body.get("generationConfig", {})
    n = config.get("candidateCount", 1)
    prompt = sum(count_tokens(t) for c in body["contents"] for t in texts(c))
    prompt += sum(count_tokens(t) for t in texts(body.get("systemInstruction", {})))
    base = {"modelVersion": f"{model}-001", "responseId": uuid.uuid4().hex[:22]}
    last_user = " ".join(texts(body["contents"][-1]))
    if "blocked-prompt" in last_user:
        blocked = {"promptFeedback": {"blockReason": "SAFETY"},
                   "usageMetadata": {"promptTokenCount": prompt, "totalTokenCount": prompt}, **base}
        return [blocked], blocked
    thoughts = 7 if "thinking" in model else 0
    call = function_call(body, last_user)
    steps: list[list[list[dict[str, Any]]]] = []  # per candidate, per event: its parts
    finishes = []
    for i in range(n):
        finish = "STOP"
        events: list[list[dict[str, Any]]]  # per streamed event: its parts
        if call:
            events = [[{"functionCall": call}]]
        elif "forbidden" in last_user:
            events, finish = [[]], "SAFETY"
        else:
            text = reply(body) + (f" ({i + 1})" if n > 1 else "")
            for stop in config.get("stopSequences", []):
                text = text.split(stop)[0].rstrip()
            words = text.split()
            if len(words) > config.get("maxOutputTokens", len(words)):
                words, finish = words[:config["maxOutputTokens"]], "MAX_TOKENS"
            events = [[{"text": " ".join(words[k:k + 2]) + (" " if k + 2 < len(words) else "")}]
                      for k in range(0, len(words), 2)] or [[]]
            if thoughts:
                events[0].insert(0, {"text": "Let me think about it.", "thought": True})
        steps.append(events)
        finishes.append(finish)
    output = sum(count_tokens(p.get("text", "")) + (3 if "functionCall" in p else 0)
                 for events in steps for parts in events for p in parts if not p.get("thought"))
    final_usage = {"promptTokenCount": prompt, "candidatesTokenCount": output,
                   "totalTokenCount": prompt + output + thoughts}
    if thoughts:
        final_usage["thoughtsTokenCount"] = thoughts
    count = max(len(e) for e in steps)
    streamed = []
    for k in range(count):
        final = k == count - 1
        cands = [candidate(i, events[k] if k < len(events) else [], finishes[i] if final else None)
                 for i, events in enumerate(steps) if k < len(events) or final]
        usage = final_usage if final else {"promptTokenCount": prompt, "totalTokenCount": prompt}
        streamed.append({"candidates": cands, "usageMetadata": usage, **base})
    whole_cands = []
    for i, events in enumerate(steps):
        parts = [p for step in events for p in step]
        text = "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))
        kept = [p for p in parts if "text" not in p or p.get("thought")] + ([{"text": text}] if text else [])
        whole_cands.append(candidate(i, kept, finishes[i]))
    return streamed, {"candidates": whole_cands, "usageMetadata": final_usage, **base}


def candidate(index: int, parts: list[dict[str, Any]], finish: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index}
    if parts:
        out["content"] = {"role": "model", "parts": parts}
    if finish:
        out["finishReason"] = finish
        out["safetyRatings"] = [{"category": "HARM_CATEGORY_HARASSMENT",
                                 "probability": "HIGH" if finish == "SAFETY" else "NEGLIGIBLE"}]
    return out


def function_call(body: dict[str, Any], text: str) -> dict[str, Any] | None:
    mode = body.get("toolConfig", {}).get("functionCallingConfig", {}).get("mode", "AUTO")
    if mode == "NONE":
        return None
    for tool in body.get("tools", []):
        for decl in tool.get("functionDeclarations", []):
            if decl["name"] in text or mode == "ANY":
                return {"name": decl["name"], "args": {"query": text}}
    return None
