"""Stack dumps: every thread, and every asyncio task (Go's goroutine profile).

Task stacks follow the await chain (`cr_await`), not `Task.get_stack()`: for a
suspended task the latter stops at the outermost coroutine, which says only
"handler" when the question is what the handler is waiting on.
"""

from __future__ import annotations

import asyncio
import linecache
import sys
import threading
from collections.abc import Iterator
from types import CodeType, FrameType
from typing import Any, TypedDict


class StackFrame(TypedDict):
    file: str
    line: int
    function: str
    code: str


class ThreadDump(TypedDict):
    name: str
    ident: int
    native_id: int | None
    daemon: bool | None
    stack: list[StackFrame]  # outermost call first


class TaskDump(TypedDict):
    name: str
    state: str  # pending, running (the dumping task), done, cancelled
    coroutine: str
    awaiting: str | None  # what the innermost coroutine waits on, e.g. a Future
    stack: list[StackFrame]  # outermost coroutine first


def _frame(code: CodeType, filename: str, line: int | None) -> StackFrame:
    lineno = line or code.co_firstlineno
    return {
        "file": filename,
        "line": lineno,
        "function": code.co_qualname,
        "code": linecache.getline(filename, lineno).strip(),
    }


def _walk_back(frame: FrameType | None) -> list[StackFrame]:
    frames: list[StackFrame] = []
    while frame is not None:
        frames.append(_frame(frame.f_code, frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    frames.reverse()
    return frames


def thread_dumps() -> list[ThreadDump]:
    """Every thread that runs Python code; the main thread first, then by name."""
    threads = {t.ident: t for t in threading.enumerate()}
    main = threading.main_thread().ident
    dumps: list[ThreadDump] = []
    for ident, frame in sys._current_frames().items():
        thread = threads.get(ident)
        dumps.append(
            {
                "name": thread.name if thread else f"thread-{ident}",
                "ident": ident,
                "native_id": thread.native_id if thread else None,
                "daemon": thread.daemon if thread else None,
                "stack": _walk_back(frame),
            }
        )
    dumps.sort(key=lambda d: (d["ident"] != main, d["name"]))
    return dumps


def _await_chain(coro: Any) -> Iterator[tuple[StackFrame | None, Any]]:
    """Yield (frame, awaited) down the chain of coroutines/generators a task awaits."""
    seen: set[int] = set()
    while coro is not None and id(coro) not in seen:
        seen.add(id(coro))
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
        awaited = getattr(coro, "cr_await", None)
        if awaited is None:
            awaited = getattr(coro, "gi_yieldfrom", None)
        if code is not None:
            line = frame.f_lineno if frame is not None else None
            yield _frame(code, code.co_filename, line), awaited
        else:
            yield None, coro
            return
        coro = awaited


def _describe(awaited: Any) -> str:
    text = repr(awaited)
    return text if len(text) <= 300 else text[:297] + "..."


def task_dumps(loop: asyncio.AbstractEventLoop | None = None) -> list[TaskDump]:
    """Every task of `loop` (default: the running loop), by name."""
    tasks = asyncio.all_tasks(loop or asyncio.get_running_loop())
    current = asyncio.current_task()
    dumps: list[TaskDump] = []
    for task in tasks:
        coro = task.get_coro()
        stack: list[StackFrame] = []
        awaiting: str | None = None
        for frame, awaited in _await_chain(coro):
            if frame is not None:
                stack.append(frame)
            elif awaited is not None:
                awaiting = _describe(awaited)
        # The chain ends in the Future's iterator, whose repr says nothing; the task
        # knows the Future itself (a private attribute in both implementations).
        waiter = getattr(task, "_fut_waiter", None)
        if waiter is not None:
            awaiting = _describe(waiter)
        if task is current:
            # Its coroutines are on the thread's stack, not suspended in awaits.
            state = "running (the task taking this dump)"
        elif task.cancelled():
            state = "cancelled"
        elif task.done():
            state = "done"
        else:
            state = "pending"
        code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
        dumps.append(
            {
                "name": task.get_name(),
                "state": state,
                "coroutine": code.co_qualname if code is not None else _describe(coro),
                "awaiting": awaiting,
                "stack": stack,
            }
        )
    dumps.sort(key=lambda d: d["name"])
    return dumps


def format_stack(stack: list[StackFrame]) -> str:
    """The traceback layout Python users read every day."""
    lines = []
    for f in stack:
        lines.append(f'  File "{f["file"]}", line {f["line"]}, in {f["function"]}')
        if f["code"]:
            lines.append(f"    {f['code']}")
    return "\n".join(lines)


def format_threads(dumps: list[ThreadDump]) -> str:
    parts = [f"{len(dumps)} threads\n"]
    for d in dumps:
        parts.append(
            f"Thread {d['name']!r} (ident {d['ident']}, native id {d['native_id']}, "
            f"daemon {d['daemon']}):\n{format_stack(d['stack'])}\n"
        )
    return "\n".join(parts)


def format_tasks(dumps: list[TaskDump]) -> str:
    parts = [f"{len(dumps)} asyncio tasks\n"]
    for d in dumps:
        waiting = f"\n  awaiting {d['awaiting']}" if d["awaiting"] else ""
        parts.append(
            f"Task {d['name']!r} {d['state']}, coroutine {d['coroutine']}:\n"
            f"{format_stack(d['stack'])}{waiting}\n"
        )
    return "\n".join(parts)
