"""How many proxies open their streams at once.

A proxy's opening is the heavy part of its stream: it sends what it holds and
what it wants of every type (with thousands of clusters, hundreds of KiB), and
gets its configuration (megabytes). When every proxy of a fleet reconnects at
once (a control-plane restart), all openings at once would hold all of that at
once, a few times the controller's memory; in turns of OPENING streams they hold
a bounded share, and finish no later (the work is the same, on one event loop).

A stream's opening ends once every type it asked for is answered and it has sent
nothing for QUIET seconds, or after at most LONGEST seconds whatever it does. A
delta stream's ends sooner, as soon as it has ACKed (or refused) every answer
(ProxyConnection.settled): waiting QUIET after that held a turn idle, and a
reconnect storm of 1,000 proxies took about 1 s longer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

OPENING = 16  # streams in their opening at once (32 let a storm of 1,010 proxies peak at 2.1-2.25x, 16 at 1.3-1.5x, as fast)
QUIET = 0.05  # seconds without a request after the last answer: the opening is over
LONGEST = 2.0  # seconds: a stream holds its turn no longer than this
IDLE = 0.2  # seconds without a stream opening: the openings of the moment are over


class Turns:
    """The turns to open a stream (one object per ADS server). `idle` is called once no
    stream has been opening for IDLE seconds: what openings allocated for a moment (a
    proxy's first configuration, copied by gRPC; a reconnecting proxy's versions) is
    free by then, and can go back to the system (memory.give_back)."""

    def __init__(self, size: int = OPENING, idle: Callable[[], None] | None = None) -> None:
        self._slots = asyncio.Semaphore(size)
        self._open = 0
        self._idle = idle
        self._due: asyncio.TimerHandle | None = None

    @property
    def busy(self) -> bool:
        """Is some stream opening, or has one been less than IDLE seconds ago?"""
        return self._open > 0 or self._due is not None

    async def take(self, answered: Callable[[], bool]) -> Turn:
        """Wait for a turn; `answered` says whether every type the stream asked for is answered."""
        await self._slots.acquire()
        self._open += 1
        if self._due is not None:
            self._due.cancel()
            self._due = None
        return Turn(self, answered)

    def _given_up(self) -> None:
        self._slots.release()
        self._open -= 1
        if self._open == 0 and self._idle is not None:
            self._due = asyncio.get_running_loop().call_later(IDLE, self._idle_now)

    def _idle_now(self) -> None:
        self._due = None
        if self._idle is not None:
            self._idle()


class Turn:
    def __init__(self, turns: Turns | None, answered: Callable[[], bool]) -> None:
        self._turns, self._answered = turns, answered
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._check: asyncio.TimerHandle | None = None
        if turns is not None:
            loop = asyncio.get_running_loop()
            self._last = loop.time()
            self._timer = loop.call_later(LONGEST, self.end)

    @property
    def opening(self) -> bool:
        """Does the stream still hold its turn?"""
        return self._timer is not None

    def asked(self) -> None:
        """A request came in: the opening goes on."""
        if self._timer is not None:
            self._last = asyncio.get_running_loop().time()

    def passed(self) -> None:
        """The stream answered what it could: the opening may be over soon."""
        if self._timer is not None and self._check is None:
            self._check = asyncio.get_running_loop().call_later(QUIET, self._over)

    def _over(self) -> None:
        self._check = None
        if asyncio.get_running_loop().time() - self._last >= QUIET and self._answered():
            self.end()
        else:
            self.passed()

    def end(self) -> None:
        """The opening is over (or the stream is): the turn goes to the next (idempotent)."""
        if self._timer is None:
            return
        self._timer.cancel()
        if self._check is not None:
            self._check.cancel()
        self._timer = self._check = None
        if self._turns is not None:
            self._turns._given_up()


NO_TURN = Turn(None, lambda: True)  # a stream's before its first request: holds nothing
