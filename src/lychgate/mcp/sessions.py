"""Relay sessions: what a client's `Mcp-Session-Id` stands for.

The id the relay hands out is its state, not a key to it: base64url of a small JSON
object naming the Backend, each target's own session id and negotiated protocol
version, and the targets that were down at `initialize`. Any relay replica serves
any Streamable HTTP request of the session without shared state, and a relay that
restarts keeps its clients. (The id shows the targets' session ids to the client;
they are the client's own sessions, held for it.)

What cannot travel in an id stays in this process (`Held`): connections to SSE
targets (that transport answers on a stream the relay must keep open), keyed by
the session's nonce and closed when the client ends the session or leaves it idle.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lychgate.mcp.upstream import SSELink

log = logging.getLogger("lychgate.mcp")

IDLE_TIMEOUT = 1800.0  # seconds an SSE target's connection is kept for a session nobody uses


@dataclass(frozen=True)
class TargetSession:
    session_id: str  # the target's Mcp-Session-Id ("": none, a stateless server or an SSE target)
    version: str  # the protocol version the target agreed to
    replica: tuple[str, int] | None = None  # the replica of a Service target the session lives on


@dataclass(frozen=True)
class SessionState:
    backend: str  # "<namespace>/<name>"
    version: str  # the version the relay agreed with the client
    targets: dict[str, TargetSession]  # the targets that answered `initialize`
    down: tuple[str, ...] = ()  # the targets that did not
    nonce: str = field(default_factory=lambda: secrets.token_urlsafe(12))

    def encode(self) -> str:
        data = {"b": self.backend, "v": self.version, "n": self.nonce, "d": list(self.down),
                "t": {name: [t.session_id, t.version, *([list(t.replica)] if t.replica else [])]
                      for name, t in self.targets.items()}}
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    @classmethod
    def decode(cls, text: str) -> SessionState | None:
        """The state an id stands for; None for anything the relay did not hand out."""
        try:
            data: Any = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
            targets = {str(name): TargetSession(str(t[0]), str(t[1]), (str(t[2][0]), int(t[2][1])) if t[2:] else None)
                       for name, t in data["t"].items()}
            return cls(str(data["b"]), str(data["v"]), targets, tuple(str(d) for d in data["d"]), str(data["n"]))
        except (ValueError, TypeError, KeyError, AttributeError, binascii.Error):
            return None


@dataclass
class _Entry:
    backend: str
    links: dict[str, SSELink]  # by target name
    used: float = field(default_factory=time.monotonic)


class Held:
    """Connections that live in this process, by session nonce and target name."""

    def __init__(self, idle_timeout: float = IDLE_TIMEOUT) -> None:
        self.idle_timeout = idle_timeout
        self._entries: dict[str, _Entry] = {}

    def put(self, nonce: str, backend: str, target: str, link: SSELink) -> None:
        self._entries.setdefault(nonce, _Entry(backend, {})).links[target] = link

    def get(self, nonce: str, target: str) -> SSELink | None:
        entry = self._entries.get(nonce)
        if entry is None:
            return None
        entry.used = time.monotonic()
        return entry.links.get(target)

    async def drop(self, nonce: str, target: str | None = None) -> None:
        """Close the session's connections (to one target, or all)."""
        entry = self._entries.get(nonce)
        if entry is None:
            return
        names = list(entry.links) if target is None else [target]
        await asyncio.gather(*(link.close() for n in names if (link := entry.links.pop(n, None)) is not None),
                             return_exceptions=True)
        if not entry.links:
            del self._entries[nonce]

    async def drop_where(self, stale: Callable[[str, str], bool]) -> None:
        """Close every connection for which stale(backend, target) holds (a config change)."""
        await asyncio.gather(*(self.drop(nonce, target) for nonce, entry in list(self._entries.items())
                               for target in list(entry.links) if stale(entry.backend, target)))

    async def sweep(self) -> None:
        now = time.monotonic()
        idle = [nonce for nonce, entry in self._entries.items() if now - entry.used > self.idle_timeout]
        for nonce in idle:
            log.info("MCP session %s idle for %.0fs: its SSE target connections are closed", nonce, self.idle_timeout)
            await self.drop(nonce)

    async def sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(min(self.idle_timeout / 4, 30.0))
            await self.sweep()

    async def close(self) -> None:
        await asyncio.gather(*(self.drop(nonce) for nonce in list(self._entries)))

