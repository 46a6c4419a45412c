"""Heap profile: live allocations by source line, from tracemalloc.

tracemalloc costs memory and time on every allocation, so it is off until the
first heap request turns it on; that request can only report what was
allocated after it, and says so. Tracing then stays on so later requests show
growth, until `stop_tracing` (DELETE /debug/pprof/heap).
"""

from __future__ import annotations

import dataclasses
import linecache
import time
import tracemalloc
from typing import Any, Literal

Group = Literal["lineno", "traceback"]

# Frames kept per allocation: enough to see which caller allocates through a
# helper, without tracemalloc's memory use growing with deep asyncio stacks.
TRACE_FRAMES = 16

_started_at: float | None = None  # when *we* started tracing; None if someone else did


@dataclasses.dataclass
class HeapReport:
    started_now: bool  # tracing was off and this request turned it on
    tracing_since: float | None  # time.time() when we started it, if we did
    current_bytes: int
    peak_bytes: int
    total_bytes: int  # sum over all traced allocations still alive
    total_count: int
    group: Group
    top: list[dict[str, Any]]  # {"size", "count", "traceback": ["file:line"...], "code"}

    @property
    def note(self) -> str:
        if self.started_now:
            return (
                "tracemalloc was not tracing: it started with this request, so only "
                "allocations made from now on are counted. Request this page again later "
                "to see them."
            )
        return "tracemalloc is tracing; DELETE /debug/pprof/heap stops it."


def stop_tracing() -> bool:
    """Stop tracing and drop the traces; True if it was tracing."""
    global _started_at
    was = tracemalloc.is_tracing()
    tracemalloc.stop()
    _started_at = None
    return was


def report(limit: int = 50, group: Group = "lineno") -> HeapReport:
    """Blocking (a snapshot of a large heap takes a while): run it off the event loop."""
    global _started_at
    started_now = not tracemalloc.is_tracing()
    if started_now:
        tracemalloc.start(TRACE_FRAMES)
        _started_at = time.time()
    snapshot = tracemalloc.take_snapshot().filter_traces(
        (
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
        )
    )
    stats = snapshot.statistics(group)
    current, peak = tracemalloc.get_traced_memory()
    top = [
        {
            "size": stat.size,
            "count": stat.count,
            "traceback": [f"{frame.filename}:{frame.lineno}" for frame in stat.traceback],
            "code": linecache.getline(
                stat.traceback[-1].filename, stat.traceback[-1].lineno
            ).strip(),
        }
        for stat in stats[:limit]
    ]
    return HeapReport(
        started_now=started_now,
        tracing_since=_started_at,
        current_bytes=current,
        peak_bytes=peak,
        total_bytes=sum(stat.size for stat in stats),
        total_count=sum(stat.count for stat in stats),
        group=group,
        top=top,
    )


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def format_text(rep: HeapReport) -> str:
    since = (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(rep.tracing_since))
        if rep.tracing_since
        else "unknown (started outside lychgate)"
    )
    lines = [
        f"heap profile (tracemalloc), grouped by {rep.group}",
        f"note: {rep.note}",
        f"tracing since: {since}",
        f"traced memory: current {_size(rep.current_bytes)}, peak {_size(rep.peak_bytes)}",
        f"live allocations: {rep.total_count} blocks, {_size(rep.total_bytes)}",
        "",
        f"top {len(rep.top)} by size:",
    ]
    for i, entry in enumerate(rep.top, 1):
        lines.append(f"#{i}: {_size(entry['size'])} in {entry['count']} blocks")
        # Oldest call first, the allocating line last (tracemalloc's order).
        lines.extend(f"    {frame}" for frame in entry["traceback"])
        if entry["code"]:
            lines.append(f"        {entry['code']}")
    return "\n".join(lines) + "\n"


def as_json(rep: HeapReport) -> dict[str, Any]:
    data = dataclasses.asdict(rep)
    data["note"] = rep.note
    return data
