"""A stand-in for Google's Gemini API and Vertex AI's Gemini models, on loopback.

It checks what Google checks before a model runs: the credential (Gemini: an API key in
`x-goog-api-key` or the `key` query parameter; Vertex AI: an OAuth token in
`Authorization: Bearer`), the URL (API version, model, method; Vertex AI's project and
location), and the GenerateContentRequest as Google's proto-JSON parser reads it
(unknown fields refused by name, roles user and model, no empty parts or texts). It
answers like Gemini: candidates with parts, finishReason, usageMetadata, and for
`streamGenerateContent?alt=sse` several server-sent events ending in CRLF CRLF, with
small delays between them. Errors have Google's shape: {"error": {"code", "message", "status"}}.

What it says is made from the request, so tests know it in advance: "You said: <the last
user text>" (see `reply`); words are tokens. Triggers in the user's text: a declared
function's name -> a functionCall; "forbidden" -> finishReason SAFETY; "blocked-prompt" ->
promptFeedback.blockReason. Model names: "gemini-busy" -> 429, "gemini-down" -> 503,
"...thinking..." -> a thought part and thoughtsTokenCount; not "gemini-..." -> 404.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

REQUEST_FIELDS = {"contents", "systemInstruction", "generationConfig", "tools", "toolConfig",
                  "safetySettings", "cachedContent", "labels"}
CONFIG_FIELDS = {"temperature", "topP", "topK", "candidateCount", "maxOutputTokens", "stopSequences",
                 "presencePenalty", "frequencyPenalty", "seed", "responseMimeType", "responseSchema",
                 "responseJsonSchema", "responseModalities", "thinkingConfig", "responseLogprobs", "logprobs"}
PART_DATA = {"text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode",
             "codeExecutionResult"}
PART_FIELDS = PART_DATA | {"thought", "thoughtSignature"}


class GoogleError(Exception):
    def __init__(self, code: int, status: str, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.code, self.status, self.message, self.reason = code, status, message, reason

    def response(self) -> web.Response:
        error: dict[str, Any] = {"code": self.code, "message": self.message, "status": self.status}
        if self.reason:
            error["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": self.reason,
                                 "domain": "googleapis.com"}]
        return web.json_response({"error": error}, status=self.code)


def invalid(message: str) -> GoogleError:
    return GoogleError(400, "INVALID_ARGUMENT", message)


@dataclass
class Seen:
    api: str  # gemini, vertexai
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class GoogleStandin:
    api_key: str = "gemini-test-key"
    token: str = "ya29.vertex-test-token"
    project: str = "my-project"
    location: str = "us-central1"
    delay: float = 0.005  # between streamed events
    seen: list[Seen] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{version}/models/{call}", self._gemini)
        app.router.add_post("/{version}/projects/{project}/locations/{location}/publishers/{publisher}/models/{call}",
                            self._vertex)
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        return app

    async def _gemini(self, request: web.Request) -> web.StreamResponse:
        def auth() -> None:
            key = request.headers.get("x-goog-api-key") or request.query.get("key")
            if not key:
                raise GoogleError(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers "
                                  "without established identity). Please use API Key or other form of API "
                                  "consumer identity to call this API.")
            if key != self.api_key:
                raise GoogleError(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
                                  "API_KEY_INVALID")
            if request.match_info["version"] not in ("v1", "v1beta", "v1alpha"):
                raise GoogleError(404, "NOT_FOUND", f"API version {request.match_info['version']} not found")

        return await self._serve("gemini", request, auth)

    async def _vertex(self, request: web.Request) -> web.StreamResponse:
        def auth() -> None:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            if scheme != "Bearer" or not token:
                raise GoogleError(401, "UNAUTHENTICATED", "Request is missing required authentication "
                                  "credential. Expected OAuth 2 access token, login cookie or other valid "
                                  "authentication credential.")
            if token != self.token:
                raise GoogleError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. "
                                  "Expected OAuth 2 access token, login cookie or other valid authentication "
                                  "credential.", "ACCESS_TOKEN_TYPE_UNSUPPORTED")
            info = request.match_info
            if info["version"] not in ("v1", "v1beta1"):
                raise GoogleError(404, "NOT_FOUND", f"API version {info['version']} not found")
            if info["project"] != self.project or info["location"] != self.location:
                raise GoogleError(403, "PERMISSION_DENIED", f"Permission denied on resource project "
                                  f"{info['project']} (location {info['location']}).")
            if info["publisher"] != "google":
                raise GoogleError(404, "NOT_FOUND", f"Publisher {info['publisher']} has no Gemini models.")

        return await self._serve("vertexai", request, auth)

    async def _unknown(self, request: web.Request) -> web.Response:
        self.rejected.append(f"unknown path {request.method} {request.path}")
        return GoogleError(404, "NOT_FOUND", f"The requested URL {request.path} was not found on this "
                           "server.").response()

    async def _serve(self, api: str, request: web.Request, auth: Any) -> web.StreamResponse:
        try:
            auth()
            model, _, method = request.match_info["call"].partition(":")
            if method not in ("generateContent", "streamGenerateContent"):
                raise GoogleError(404, "NOT_FOUND", f"Method {method!r} not found.")
            try:
                body = json.loads(await request.read())
            except ValueError as e:
                raise invalid(f"Invalid JSON payload received. {e}") from None
            check_request(body)
            self.seen.append(Seen(api, request.path, dict(request.query),
                                  {k.lower(): v for k, v in request.headers.items()}, body))
            if not model.startswith("gemini"):
                raise GoogleError(404, "NOT_FOUND", f"models/{model} is not found for API version "
                                  f"{request.match_info['version']}, or is not supported for {method}. Call "
                                  "ListModels to see the list of available models and their supported methods.")
            if model == "gemini-busy":
                raise GoogleError(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).")
            if model == "gemini-down":
                raise GoogleError(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
        except GoogleError as e:
            self.rejected.append(e.message)
            return e.response()
        events, whole = generate(body, model)
        if method == "generateContent":
            return web.json_response(whole)
        if request.query.get("alt") != "sse":  # without alt=sse: one JSON array of the events
            return web.json_response(events)
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for n, event in enumerate(events):
            if n:
                await asyncio.sleep(self.delay)
            await response.write(b"data: " + json.dumps(event, ensure_ascii=False).encode() + b"\r\n\r\n")
        await response.write_eof()
        return response


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
    prompt = sum(len(t.split()) for c in body["contents"] for t in texts(c))
    prompt += sum(len(t.split()) for t in texts(body.get("systemInstruction", {})))
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
    output = sum(len(p.get("text", "").split()) + (3 if "functionCall" in p else 0)
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
