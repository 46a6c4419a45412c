"""Turns to open a stream (xds/opening.py): once no stream has been opening for IDLE
seconds, the ADS server is told (it gives what openings allocated back to the system);
a stream that opens meanwhile puts that off."""

from __future__ import annotations

import asyncio

import pytest

from lychgate.xds import opening


async def test_idle_is_told_once_the_openings_of_the_moment_are_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opening, "IDLE", 0.05)
    idle: list[float] = []
    turns = opening.Turns(2, idle=lambda: idle.append(asyncio.get_running_loop().time()))
    first = await turns.take(lambda: True)
    second = await turns.take(lambda: True)
    first.end()
    await asyncio.sleep(0.15)
    assert idle == []  # one stream still opening
    second.end()
    second.end()  # (idempotent: the turn is given up once)
    third = await turns.take(lambda: True)  # another opens before IDLE: not idle yet
    await asyncio.sleep(0.15)
    assert idle == []
    third.end()
    await asyncio.sleep(0.15)
    assert len(idle) == 1
    await turns.take(lambda: True)  # the slots are all there again
    await turns.take(lambda: True)
