"""Server-sent events read as the bytes arrive (WHATWG's event stream format): a body cut
anywhere, lines ended by CRLF, LF or CR (Google ends its events with CRLF CRLF)."""

from __future__ import annotations

import re

_EOL = re.compile(rb"\r\n|\r|\n")


class SSEReader:
    def __init__(self) -> None:
        self._buf = b""
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        """The (event, data) of every event complete so far."""
        self._buf += chunk
        out: list[tuple[str, str]] = []
        pos = 0
        while (m := _EOL.search(self._buf, pos)) is not None:
            if m.group() == b"\r" and m.end() == len(self._buf):
                break  # a CR at the end may be half of a CRLF: wait for the next byte
            self._line(self._buf[pos:m.start()].decode("utf-8", "replace"), out)
            pos = m.end()
        self._buf = self._buf[pos:]
        return out

    def finish(self) -> list[tuple[str, str]]:
        """The last event, when the stream ended without the blank line after it."""
        out: list[tuple[str, str]] = []
        if self._buf:
            self._line(self._buf.decode("utf-8", "replace"), out)
            self._buf = b""
        self._line("", out)
        return out

    def _line(self, line: str, out: list[tuple[str, str]]) -> None:
        if not line:
            if self._data:
                out.append((self._event or "message", "\n".join(self._data)))
            self._event, self._data = "", []
            return
        if line.startswith(":"):
            return  # a comment (keep-alive)
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
