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
        self._new_hosts = 0  # virtual hosts encoded since the last sweep
        # per sequence key: the items of the last call, their bytes and digests
        self._sequences: dict[Hashable, tuple[Sequence[Any], list[bytes], list[bytes]]] = {}
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
            self._new_hosts += kind == "vhost"
            data = encode(obj)
            entry = self._entries[key] = (obj, data, hashlib.blake2b(data, digest_size=8).digest())
        return entry[1], entry[2]

    def get_all(
        self, key: Hashable | None, items: Sequence[Any], kind: str, encode: Callable[[Any], bytes]
    ) -> tuple[list[bytes], list[bytes]]:
        """[encode(item)] and their digests for a sequence that changes a little
        between calls (the virtual hosts of one route table, pass after pass).

        The runs at both ends that are the very objects of the last call for
        `key` are reused as they are (found at C speed); only the middle is
        looked up item by item. One changed or inserted host among 10,000 thus
        costs two identity scans instead of 10,000 lookups."""
        previous = self._sequences.get(key) if key is not None else None
        if previous is None:
            head = tail = 0
            old_data: list[bytes] = []
            old_digests: list[bytes] = []
        else:
            old, old_data, old_digests = previous
            head, tail = unchanged_ends(items, old)
        middle = [self.get(item, kind, encode) for item in items[head:len(items) - tail]]
        end = len(old_data) - tail
        data = [*old_data[:head], *(d for d, _ in middle), *old_data[end:]]
        digests = [*old_digests[:head], *(h for _, h in middle), *old_digests[end:]]
        self._used += head + tail
        if key is not None:
            self._sequences[key] = (tuple(items), data, digests)
        return data, digests

    def forget(self, key: tuple[Hashable, ...]) -> None:
        """Drop what was built for the route table `key` (and its scopes, `(*key, i)`),
        which is no longer built: a listener's table is renamed when its chain gains or
        loses policy filters. Its sequences go, with the entries of their items that no
        other sequence holds, its scoped table and its hosts' route bytes. The sweep
        would keep them, and every object they hold, until stale entries outnumber the
        live ones (5,000 virtual hosts at 5,000 routes)."""
        stale = [k for k in self._sequences if isinstance(k, tuple) and k[:len(key)] == key]
        if stale:
            dropped = [self._sequences.pop(k)[0] for k in stale]
            held = {id(item) for items, _, _ in self._sequences.values() for item in items}
            for items in dropped:
                for item in items:
                    if id(item) not in held:
                        self._entries.pop((id(item), "vhost"), None)
            for host in [h for h in self.route_bytes if h[0] in stale]:
                del self.route_bytes[host]
        self.tables.pop(key, None)

    def keep(self, count: int) -> None:
        """Count `count` entries as used this pass without looking them up (they
        sit in a scoped table that did not change)."""
        self._used += count

    def sweep(self) -> None:
        """Forget everything once stale entries outnumber the used ones (walking
        them every pass to find the stale few would cost more). Virtual hosts, which
        change most, go sooner: every host in use is in a table's sequence, so once
        a thousand were encoded (each replacing one, with its IR), the hosts no
        sequence holds are dropped (a few ms at 10,000 hosts): under churn the
        cache stays the size of the tables instead of growing to twice their size."""
        if len(self._entries) > 2 * self._used + 1000:
            self._entries = {}
            self._sequences = {}
            self.tables = {}
            self.route_bytes = {}
            self.clusters = {}
            self._new_hosts = 0
        elif self._new_hosts > 1000:
            held = {id(item) for items, _, _ in self._sequences.values() for item in items}
            self._entries = {key: entry for key, entry in self._entries.items() if key[1] != "vhost" or key[0] in held}
            self._new_hosts = 0
        self._used = 0
