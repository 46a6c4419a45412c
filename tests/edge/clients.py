"""Abusive clients on raw sockets: what a browser or httpx would never send.

HTTP/1.1 requests are written byte for byte; HTTP/2 frames are written by
hand (only HPACK comes from a library), so a client can do what h2's own
state machine forbids: more streams than the server allows, resets in a loop.
Every loop is bounded in count and in time.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7, 0x8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE = 0x3, 0x4
CANCEL = 0x8


def readable(sock: socket.socket, timeout: float) -> bool:
    """poll(), not select(): thousands of sockets have descriptors past select's 1024."""
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(max(0, int(timeout * 1000))))


def raw_request(address: str, port: int, data: bytes, timeout: float = 5.0, first: bool = False) -> bytes:
    """Send `data` as it is; everything the server answers until it closes or `timeout` passes
    (with `first`, until its first response is complete)."""
    with socket.create_connection((address, port), timeout=timeout) as sock:
        sock.sendall(data)
        return read_until_closed(sock, time.monotonic() + timeout, first)


def _complete(answer: bytes) -> bool:
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        return False
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return len(body) >= length


def read_until_closed(sock: socket.socket, deadline: float, first: bool = False) -> bytes:
    out = b""
    while time.monotonic() < deadline and not (first and _complete(out)):
        if not readable(sock, deadline - time.monotonic()):
            break
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        out += chunk
    return out


def status_of(answer: bytes) -> int:
    """The status of the first HTTP/1.1 response in `answer` (0: none)."""
    if not answer.startswith(b"HTTP/1."):
        return 0
    return int(answer.split(b" ", 2)[1])


def open_many(address: str, port: int, count: int, timeout: float = 10.0) -> list[socket.socket]:
    """`count` TCP connections, opened one after the other (the listener's backlog is finite)."""
    deadline = time.monotonic() + timeout
    out: list[socket.socket] = []
    for _ in range(count):
        if time.monotonic() > deadline:
            raise AssertionError(f"opened only {len(out)} of {count} connections in {timeout}s")
        out.append(socket.create_connection((address, port), timeout=timeout))
    return out


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the server closed (or reset) the connection: readable with nothing to read."""
    if not readable(sock, 0):
        return False
    try:
        sock.setblocking(False)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        sock.setblocking(True)


def wait_closed(socks: list[socket.socket], timeout: float) -> list[socket.socket]:
    """Wait (at most `timeout`) for the server to close every one; the ones still open."""
    deadline = time.monotonic() + timeout
    still = list(socks)
    while still and time.monotonic() < deadline:
        still = [s for s in still if not closed_by_peer(s)]
        if still:
            time.sleep(0.1)
    return still


# --- HTTP/2 -------------------------------------------------------------------------------


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", stream) + payload


@dataclass
class H2:
    """A prior-knowledge HTTP/2 (h2c) connection and what the server sent on it."""

    sock: socket.socket
    encoder: hpack.Encoder = field(default_factory=hpack.Encoder)
    decoder: hpack.Decoder = field(default_factory=hpack.Decoder)  # one per connection: HPACK has state
    buffer: bytes = b""
    settings: dict[int, int] = field(default_factory=dict)
    resets: dict[int, int] = field(default_factory=dict)  # stream -> error code
    responses: dict[int, int] = field(default_factory=dict)  # stream -> :status
    goaway: int | None = None  # its error code
    closed: bool = False

    @classmethod
    def connect(cls, address: str, port: int) -> H2:
        sock = socket.create_connection((address, port), timeout=5)
        conn = cls(sock)
        conn.send(PREFACE + frame(SETTINGS, 0, 0))
        return conn

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            self.closed = True

    def headers(self, stream: int, authority: str, path: str, end_stream: bool = True) -> bytes:
        block = self.encoder.encode([(":method", "GET"), (":scheme", "http"), (":authority", authority),
                                     (":path", path)])
        return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), stream, block)

    def read(self, timeout: float, until: Callable[[], bool] = lambda: False) -> None:
        """Read and parse what arrives within `timeout` (less if the server closes, or once `until()`)."""
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline and not until():
            if not readable(self.sock, deadline - time.monotonic()):
                break
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                chunk = b""
            if not chunk:
                self.closed = True
                break
            self.buffer += chunk
            self._parse()

    def _parse(self) -> None:
        while len(self.buffer) >= 9:
            length = int.from_bytes(self.buffer[:3], "big")
            if len(self.buffer) < 9 + length:
                return
            kind, flags = self.buffer[3], self.buffer[4]
            stream = int.from_bytes(self.buffer[5:9], "big") & 0x7FFFFFFF
            payload, self.buffer = self.buffer[9:9 + length], self.buffer[9 + length:]
            if kind == SETTINGS and not flags & ACK:
                for i in range(0, len(payload), 6):
                    key, value = struct.unpack(">HI", payload[i:i + 6])
                    self.settings[key] = value
                self.send(frame(SETTINGS, ACK, 0))
            elif kind == RST_STREAM:
                self.resets[stream] = int.from_bytes(payload[:4], "big")
            elif kind == GOAWAY:
                self.goaway = int.from_bytes(payload[4:8], "big")
            elif kind == HEADERS:
                fields = {str(k): str(v) for k, v in self.decoder.decode(payload)}
                if ":status" in fields:
                    self.responses[stream] = int(fields[":status"])
            elif kind == PING and not flags & ACK:
                self.send(frame(PING, ACK, 0, payload))

    def close(self) -> None:
        self.sock.close()
