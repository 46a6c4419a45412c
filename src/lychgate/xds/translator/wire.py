"""Envoy messages assembled from already-serialized parts.

A RouteConfiguration of 10,000 routes is megabytes of protobuf; rebuilding it
from Python objects on every change costs hundreds of milliseconds. Protobuf's
wire format lets a repeated message field be written as the concatenation of
its serialized elements, so a RouteConfiguration is assembled here from the
cached bytes of its virtual hosts, and only virtual hosts that changed are
serialized again (the "share unchanged protobufs" idea of issue 9).
"""

from __future__ import annotations

from typing import Any


class RawMessage:
    """Quacks like a protobuf message where the snapshot needs it: its bytes."""

    __slots__ = ("cls", "data", "digest")

    def __init__(self, cls: Any, data: bytes, digest: str | None = None) -> None:
        self.cls = cls
        self.data = data
        # A content hash computed from the parts (cheaper than hashing megabytes).
        self.digest = digest

    def SerializeToString(self, deterministic: bool = False) -> bytes:
        return self.data

    def decode(self) -> Any:
        return self.cls.FromString(self.data)


def as_message(value: Any) -> Any:
    """A real protobuf message, whether built as one or assembled from bytes."""
    return value.decode() if isinstance(value, RawMessage) else value


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def repeated_field(number: int, elements: list[bytes]) -> bytes:
    """Serialized elements of a repeated message field, as they appear on the wire."""
    tag = _varint((number << 3) | 2)  # wire type 2: length-delimited
    return b"".join(tag + _varint(len(e)) + e for e in elements)
