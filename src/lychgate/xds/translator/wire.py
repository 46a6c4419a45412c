"""Envoy messages assembled from already-serialized parts.

A RouteConfiguration of 10,000 routes is megabytes of protobuf; rebuilding it
from Python objects on every change costs hundreds of milliseconds. Protobuf's
wire format lets a repeated message field be written as the concatenation of
its serialized elements, so a RouteConfiguration is assembled here from the
cached bytes of its virtual hosts, and only virtual hosts that changed are
serialized again (the "share unchanged protobufs" idea of issue 9).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from lychgate.identity import unchanged_ends


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


class WireCache:
    """Bytes (and a digest of them) built from IR objects, by the objects' identity.

    Translation hands back the same IR object while nothing in it changed, so
    identity is enough to know the bytes are still right. Entries keep their
    object alive, so an id is never reused while its entry exists."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, str], tuple[Any, bytes, bytes]] = {}
        self._used = 0
        # Per sequence key: the items of the last call, the message built from them, its
        # prefix's length, each item's length after it and their digests end to end.
        # The message's bytes are the snapshot's own: no copy of each item is kept.
        self._sequences: dict[Hashable, tuple[tuple[Any, ...], bytes, int, array[int], bytes]] = {}
        # Route tables split into scopes, by (namespace, gateway, table) (scoped.py).
        self.tables: dict[Hashable, Any] = {}
        # A Gateway's clusters (by "namespace/name"), and the Cluster and ClusterLoadAssignment
        # resources built from them: the same objects pass after pass, reused as a whole.
        self.clusters: dict[str, tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]] = {}
        # The routes of big virtual hosts, serialized, by (table, host name) (route.py _route_bytes).
        self.route_bytes: dict[tuple[Hashable, str], dict[int, tuple[Any, bytes]]] = {}

    def get(self, obj: Any, kind: str, encode: Callable[[Any], bytes]) -> tuple[bytes, bytes]:
        """(encode(obj), its 8-byte digest), encoded once per object."""
        self._used += 1
        key = (id(obj), kind)
        entry = self._entries.get(key)
        if entry is None or entry[0] is not obj:
            data = encode(obj)
            entry = self._entries[key] = (obj, data, hashlib.blake2b(data, digest_size=8).digest())
        return entry[1], entry[2]

    def get_all(
        self, key: Hashable | None, items: Sequence[Any], encode: Callable[[Any], bytes], prefix: bytes = b""
    ) -> tuple[bytes, bytes]:
        """prefix + the concatenated encode(item), and the items' 8-byte digests end
        to end, for a sequence that changes a little between calls (the virtual hosts
        of one route table, pass after pass).

        The runs at both ends that are the very objects of the last call for `key`
        are slices of the last call's bytes (found at C speed); only the middle is
        looked up item by item, among the middle of the last call. One changed or
        inserted host among 10,000 thus costs two identity scans and one encoding.
        Only the joined bytes are kept, with each item's length, not a copy of each
        item (1.3 MiB at 5,000 routes)."""
        previous = self._sequences.get(key) if key is not None else None
        view = memoryview(b"")
        if previous is None:
            head = tail = 0
            old: tuple[Any, ...] = ()
            lengths = array("I")
            digests = b""
            start = 0
        else:
            old, data, start, lengths, digests = previous
            head, tail = unchanged_ends(items, old)
            view = memoryview(data)
        old_end = len(old) - tail
        head_end = start + sum(lengths[:head])
        # The last call's middle, by identity: items moved or kept between two changes.
        was: dict[int, tuple[Any, int, int]] = {}  # id -> (item, its place, its offset)
        at = head_end
        for i in range(head, old_end):
            was[id(old[i])] = (old[i], i, at)
            at += lengths[i]
        tail_start = at  # (where the last call's unchanged tail begins)
        parts: list[Any] = [prefix, view[start:head_end]]
        middle_lengths = array("I")
        middle_digests = []
        for item in items[head:len(items) - tail]:
            found = was.get(id(item))
            if found is not None and found[0] is item:
                _, i, at = found
                part: Any = view[at:at + lengths[i]]
                digest = digests[8 * i:8 * i + 8]
            else:
                part = encode(item)
                digest = hashlib.blake2b(part, digest_size=8).digest()
            parts.append(part)
            middle_lengths.append(len(part))
            middle_digests.append(digest)
        parts.append(view[tail_start:])
        joined = b"".join(parts)
        new_digests = b"".join((digests[:8 * head], *middle_digests, digests[8 * old_end:]))
        self._used += len(items)
        if key is not None:
            self._sequences[key] = (tuple(items), joined, len(prefix),
                                    lengths[:head] + middle_lengths + lengths[old_end:], new_digests)
        return joined, new_digests

    def forget(self, key: tuple[Hashable, ...]) -> None:
        """Drop what was built for the route table `key` (and its scopes, `(*key, i)`),
        which is no longer built: a listener's table is renamed when its chain gains or
        loses policy filters. Its sequences go (their bytes, and every object they
        hold), with its scoped table and its hosts' route bytes, at once rather than
        at the next full sweep."""
        stale = [k for k in self._sequences if isinstance(k, tuple) and k[:len(key)] == key]
        for k in stale:
            del self._sequences[k]
        if stale:
            for host in [h for h in self.route_bytes if h[0] in stale]:
                del self.route_bytes[host]
        self.tables.pop(key, None)

    def keep(self, count: int) -> None:
        """Count `count` entries as used this pass without looking them up (they
        sit in a scoped table that did not change)."""
        self._used += count

    def sweep(self) -> None:
        """Forget everything once stale entries outnumber the used ones (walking
        them every pass to find the stale few would cost more). The items of the
        sequences are all in use (each call replaces its key's), and count as
        entries here as they count as used."""
        held = sum(len(sequence[0]) for sequence in self._sequences.values())
        if len(self._entries) + held > 2 * self._used + 1000:
            self._entries = {}
            self._sequences = {}
            self.tables = {}
            self.route_bytes = {}
            self.clusters = {}
        self._used = 0
