"""A sampling CPU profiler over every Python thread.

Translation runs on the event-loop thread and in worker threads; cProfile
sees only the thread that enabled it and slows every call it traces. Instead a
background thread wakes ~100 times a second, takes every thread's Python stack
from `sys._current_frames()`, and charges each stack with the CPU time its
thread used since the previous sample (read from /proc/self/task/<tid>/schedstat,
nanoseconds). Threads that are blocked (the loop in select, idle workers in
queue.get) use no CPU and so drop out, the way py-spy hides idle threads by
default. Where per-thread CPU time cannot be read, or with mode "wall", every
sample is charged with the wall time since the previous one instead.

Weights are microseconds throughout, so the collapsed counts and the speedscope
weights add up to seconds of CPU (or wall) time.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Iterable
from types import FrameType
from typing import Any, Literal

Mode = Literal["cpu", "wall"]

# A frame as shown in a flame graph: one box per function, not per line, so
# loops over several lines of one function do not split it into slivers.
Frame = tuple[str, str, int]  # (qualified name, file, first line)


@dataclasses.dataclass
class Profile:
    """The result of one profiling run."""

    started_at: float  # time.time()
    duration: float  # seconds actually sampled
    interval: float  # seconds between samples asked for
    mode: Mode  # what the weights measure
    samples_taken: int  # sampling rounds (each covers every thread)
    frames: list[Frame]  # interned frames, indexed by stacks
    # Per sample, in time order: thread name, stack (root first, frame indices), weight µs.
    samples: list[tuple[str, tuple[int, ...], int]]


def _cpu_ns(native_id: int) -> int | None:
    """CPU time of one thread of this process in ns, or None when unreadable."""
    try:
        fd = os.open(f"/proc/self/task/{native_id}/schedstat", os.O_RDONLY)
    except OSError:
        return None
    try:
        first = os.read(fd, 128).split(b" ", 1)[0]
    finally:
        os.close(fd)
    try:
        return int(first)
    except ValueError:
        return None


def cpu_time_available() -> bool:
    return _cpu_ns(threading.get_native_id()) is not None


class SamplingProfiler:
    """Samples all threads but its own; `run` blocks, so call it from a worker thread."""

    def __init__(self, *, interval: float = 0.01, mode: Mode = "cpu") -> None:
        self.interval = interval
        self.mode: Mode = mode if mode == "wall" or cpu_time_available() else "wall"
        self._frames: list[Frame] = []
        self._frame_index: dict[Frame, int] = {}
        self._samples: list[tuple[str, tuple[int, ...], int]] = []

    def run(self, duration: float, stop: threading.Event | None = None) -> Profile:
        stop = stop or threading.Event()
        me = threading.get_ident()
        started_at = time.time()
        start = last = time.monotonic()
        deadline = start + duration
        last_cpu: dict[int, int] = {}
        self._read_cpu(last_cpu, me)  # baseline: CPU used before the run is not charged
        rounds = 0
        while not stop.is_set():
            now = time.monotonic()
            if now >= deadline:
                break
            stop.wait(min(self.interval, deadline - now))
            now = time.monotonic()
            self._sample(me, last_cpu, wall_us=int((now - last) * 1e6))
            last = now
            rounds += 1
        return Profile(
            started_at=started_at,
            duration=time.monotonic() - start,
            interval=self.interval,
            mode=self.mode,
            samples_taken=rounds,
            frames=self._frames,
            samples=self._samples,
        )

    def _read_cpu(self, last_cpu: dict[int, int], me: int) -> None:
        if self.mode != "cpu":
            return
        for thread in threading.enumerate():
            if thread.ident != me and thread.native_id is not None:
                ns = _cpu_ns(thread.native_id)
                if ns is not None:
                    last_cpu[thread.native_id] = ns

    def _sample(self, me: int, last_cpu: dict[int, int], wall_us: int) -> None:
        threads = {t.ident: t for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            thread = threads.get(ident)
            name = thread.name if thread is not None else f"thread-{ident}"
            weight = wall_us
            if self.mode == "cpu" and thread is not None and thread.native_id is not None:
                ns = _cpu_ns(thread.native_id)
                if ns is not None:
                    previous = last_cpu.get(thread.native_id, ns)
                    last_cpu[thread.native_id] = ns
                    weight = (ns - previous) // 1000
            if weight <= 0:
                continue  # idle since the last sample
            self._samples.append((name, self._stack(frame), weight))

    def _stack(self, frame: FrameType | None) -> tuple[int, ...]:
        indices: list[int] = []
        while frame is not None:
            code = frame.f_code
            key: Frame = (code.co_qualname, code.co_filename, code.co_firstlineno)
            index = self._frame_index.get(key)
            if index is None:
                index = self._frame_index[key] = len(self._frames)
                self._frames.append(key)
            indices.append(index)
            frame = frame.f_back
        indices.reverse()
        return tuple(indices)


def _short_file(path: str) -> str:
    """The path from the package root on, so frames read `lychgate/xds/server.py`."""
    for marker in ("/site-packages/", "/src/"):
        if marker in path:
            return path.rpartition(marker)[2]
    if "/lib/python3" in path:  # the standard library: asyncio/events.py
        return path.rpartition("/lib/python3")[2].partition("/")[2]
    return path


def frame_label(frame: Frame) -> str:
    name, path, line = frame
    # ';' separates frames in the collapsed format and the last ' ' its count.
    return f"{name} ({_short_file(path)}:{line})".replace(";", ":")


def to_collapsed(profile: Profile) -> str:
    """Brendan Gregg's collapsed stacks: `thread;root;...;leaf <µs>` per line.

    Feed it to flamegraph.pl, or import it in speedscope. The first frame is the
    thread name so one flame graph shows every thread side by side.
    """
    totals: dict[tuple[str, tuple[int, ...]], int] = {}
    for thread, stack, weight in profile.samples:
        totals[(thread, stack)] = totals.get((thread, stack), 0) + weight
    labels = [frame_label(f) for f in profile.frames]
    lines = []
    for (thread, stack), weight in sorted(totals.items(), key=lambda kv: -kv[1]):
        path = ";".join([f"thread {thread}".replace(";", ":"), *(labels[i] for i in stack)])
        lines.append(f"{path} {weight}")
    return "\n".join(lines) + ("\n" if lines else "")


def to_speedscope(profile: Profile, name: str = "lychgate CPU profile") -> dict[str, Any]:
    """speedscope's file format: one "sampled" profile per thread, weights in µs.

    https://github.com/jlfwong/speedscope/blob/main/src/lib/file-format-spec.ts
    """
    by_thread: dict[str, list[tuple[tuple[int, ...], int]]] = {}
    for thread, stack, weight in profile.samples:
        by_thread.setdefault(thread, []).append((stack, weight))
    profiles = []
    for thread, samples in sorted(by_thread.items(), key=lambda kv: -_total(kv[1])):
        total = _total(samples)
        profiles.append(
            {
                "type": "sampled",
                "name": f"thread {thread}",
                "unit": "microseconds",
                "startValue": 0,
                "endValue": total,
                "samples": [list(stack) for stack, _ in samples],
                "weights": [weight for _, weight in samples],
            }
        )
    return {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {
            "frames": [
                {"name": qualname, "file": path, "line": line}
                for qualname, path, line in profile.frames
            ]
        },
        "profiles": profiles,
        "name": f"{name} ({profile.mode}, {profile.duration:.1f}s)",
        "activeProfileIndex": 0,
        "exporter": "lychgate",
    }


def _total(samples: Iterable[tuple[tuple[int, ...], int]]) -> int:
    return sum(weight for _, weight in samples)
