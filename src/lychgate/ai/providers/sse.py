"""Server-sent events: reading a provider's stream as it arrives, and writing OpenAI's.

A provider's body reaches the extension in chunks cut anywhere (inside a line, between
a CR and its LF); `EventReader` keeps the incomplete tail until the blank line that
ends an event arrives, so every complete event is translated at once and none early.
`ChunkWriter` writes OpenAI's `chat.completion.chunk` events, what the openai SDK's
Stream reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lychgate.ai.providers.base import Usage

DONE = b"data: [DONE]\n\n"


@dataclass(frozen=True)
class Event:
    name: str  # the `event:` field ("" when absent: OpenAI's and Gemini's streams have none)
    data: str  # the `data:` lines, joined by "\n"
    raw: bytes  # the event as received, without its ending blank line


class EventReader:
    """Bytes in, complete server-sent events out (comments and empty events skipped)."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> list[Event]:
        buf = self._pending + chunk
        if b"\r" in buf:  # CRLF line ends; a CR at the end waits for its LF in the next chunk
            buf = buf.replace(b"\r\n", b"\n")
        *blocks, self._pending = buf.split(b"\n\n")
        return [e for e in map(self._parse, blocks) if e is not None]

    def end(self) -> list[Event]:
        """The last event when the stream ended without its blank line."""
        rest, self._pending = self._pending.strip(b"\r\n"), b""
        event = self._parse(rest) if rest else None
        return [event] if event is not None else []

    @property
    def pending(self) -> bytes:
        return self._pending

    @staticmethod
    def _parse(block: bytes) -> Event | None:
        name, data = "", []
        for line in block.decode("utf-8", "replace").split("\n"):
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "data":
                data.append(value)
            elif field == "event":
                name = value
        if not data and not name:  # a comment (": ping") or stray blank lines
            return None
        return Event(name, "\n".join(data), block)


def openai_usage(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage.input, "completion_tokens": usage.output, "total_tokens": usage.total}


class ChunkWriter:
    """OpenAI `chat.completion.chunk` events of one answer (one id, model and time)."""

    def __init__(self, id_: str, model: str, created: int) -> None:
        self.id, self.model, self.created = id_, model, created

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return self._event({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                            "model": self.model, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                              "finish_reason": finish_reason}]})

    def usage(self, usage: Usage) -> bytes:
        """OpenAI's last chunk when the client asked for `stream_options.include_usage`."""
        return self._event({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                            "model": self.model, "choices": [], "usage": openai_usage(usage)})

    @staticmethod
    def error(body: dict[str, Any]) -> bytes:
        """An error inside a stream, as OpenAI sends it (the openai SDK raises APIError)."""
        return ChunkWriter._event(body)

    @staticmethod
    def _event(body: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"
