"""A small LLM for trying the AI gateway without a provider account: `lychgate echo --llm`.

It speaks OpenAI's Chat Completions API (POST .../chat/completions), answering each
request with the last user message repeated ("You said: ..."), whole or streamed word
by word as server-sent events, with usage counted one token per word. It checks the
API key a Backend is configured with (`--key`), as a real provider would, so a newcomer
sees the gateway add its own key to the requests.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web

STREAM_DELAY = 0.05  # seconds between words: a stream visibly streams


def llm_app(key: str) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        if request.headers.get("authorization") != f"Bearer {key}":
            return _error(401, "Incorrect API key provided.", "invalid_api_key")
        try:
            body = await request.json()
            prompt = next(m["content"] for m in reversed(body["messages"]) if m.get("role") == "user")
        except (ValueError, KeyError, StopIteration, TypeError):
            return _error(400, "the request needs messages with a user message", "invalid_request")
        model, words = str(body.get("model") or "echo"), f"You said: {prompt}".split(" ")
        usage = {"prompt_tokens": len(str(prompt).split()), "completion_tokens": len(words)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        base = {"id": f"chatcmpl-echo{time.monotonic_ns()}", "created": int(time.time()), "model": model}
        if not body.get("stream"):
            return web.json_response({**base, "object": "chat.completion", "usage": usage, "choices": [{
                "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": " ".join(words)}}]})
        out = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await out.prepare(request)
        chunk = {**base, "object": "chat.completion.chunk"}
        for i, word in enumerate(words):
            delta = {"role": "assistant", "content": word} if i == 0 else {"content": " " + word}
            await _event(out, {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            await asyncio.sleep(STREAM_DELAY)
        await _event(out, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            await _event(out, {**chunk, "choices": [], "usage": usage})
        await out.write(b"data: [DONE]\n\n")
        return out

    app = web.Application()
    app.router.add_post("/{prefix:.*}chat/completions", chat)
    return app


async def _event(out: web.StreamResponse, data: dict[str, Any]) -> None:
    await out.write(b"data: " + json.dumps(data).encode() + b"\n\n")


def _error(status: int, message: str, code: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                        "code": code}}, status=status)
