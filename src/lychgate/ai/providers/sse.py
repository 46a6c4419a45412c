"""Server-sent events (WHATWG's event stream format): reading a provider's stream as the
bytes arrive, and writing OpenAI's.

A provider's body reaches the extension in chunks cut anywhere: inside a line, inside a
multi-byte character, between a CR and its LF. Lines end with CRLF, LF or CR (Google
ends its events with CRLF CRLF). `EventReader` keeps the incomplete line until its end
arrives and hands over every event as soon as the blank line that ends it does, so none
is held back and none is cut.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

DONE = b"data: [DONE]\n\n"
_EOL = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class Event:
    name: str  # the `event:` field, "message" when absent (OpenAI's and Google's streams have none)
    data: str  # the `data:` lines, joined by "\n"
    raw: bytes  # the event's lines as received (comments included), ended by LF, without the blank line


class EventReader:
    """Bytes in, complete events out (comments and events without data skipped)."""

    def __init__(self) -> None:
        self._buf = b""
        self._scanned = 0  # how much of _buf holds no line end: the next search starts there
        self._lines: list[bytes] = []  # the lines of the event being read

    def feed(self, chunk: bytes) -> list[Event]:
        """Every event complete so far."""
        self._buf += chunk
        out: list[Event] = []
        pos = 0
        while (m := _EOL.search(self._buf, max(pos, self._scanned))) is not None:
            if m.group() == b"\r" and m.end() == len(self._buf):
                break  # a CR at the end may be the first half of a CRLF: wait for the next byte
            self._line(self._buf[pos:m.start()], out)
            pos = m.end()
        self._buf = self._buf[pos:]
        self._scanned = max(len(self._buf) - 1, 0)  # the last byte may be that lone CR
        return out

    def end(self) -> list[Event]:
        """The last event, when the stream ended without the blank line after it."""
        out: list[Event] = []
        if self._buf:
            self._line(self._buf.rstrip(b"\r"), out)
            self._buf, self._scanned = b"", 0
        self._line(b"", out)
        return out

    def _line(self, line: bytes, out: list[Event]) -> None:
        if line:
            self._lines.append(line)
            return
        lines, self._lines = self._lines, []
        name, data = "message", []
        for text in (raw.decode("utf-8", "replace") for raw in lines):
            field, _, value = text.partition(":")
            value = value.removeprefix(" ")
            if field == "data":
                data.append(value)
            elif field == "event":
                name = value
        if data:  # a comment (": ping") or an event without data dispatches nothing
            out.append(Event(name, "\n".join(data), b"\n".join(lines) + b"\n"))


def encode(body: dict[str, Any]) -> bytes:
    """One event of OpenAI's stream: a `data:` line of compact JSON."""
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"
