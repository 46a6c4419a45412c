"""The server-sent events reader of the provider codecs, cut at every byte."""

from __future__ import annotations

import pytest

from lychgate.ai.providers.sse import EventReader

STREAM = (b": keep-alive\r\n\r\nevent: delta\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n"
          b"data: caf\xc3\xa9\n\ndata:no space\r\rdata: last")
EVENTS = [("delta", '{"a":\n1}'), ("message", "café"), ("message", "no space"), ("message", "last")]


def read(pieces: list[bytes]) -> list[tuple[str, str]]:
    reader = EventReader()
    return [(e.name, e.data) for piece in pieces for e in reader.feed(piece)] + \
        [(e.name, e.data) for e in reader.end()]


def test_every_line_ending_and_the_last_event_without_a_blank_line() -> None:
    assert read([STREAM]) == EVENTS


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_cut_anywhere(cut: int) -> None:
    """A CR at the end of a piece may be the first half of CRLF: an event of two data
    lines cut there stays one event."""
    assert read([STREAM[:cut], STREAM[cut:]]) == EVENTS


def test_an_event_is_handed_over_when_its_blank_line_arrives_with_its_lines_as_received() -> None:
    reader = EventReader()
    assert reader.feed(b"event: x\ndata: 1") == []
    assert reader.feed(b"\n") == []
    [event] = reader.feed(b"\n")
    assert (event.name, event.data, event.raw) == ("x", "1", b"event: x\ndata: 1\n")
    assert reader.end() == []
