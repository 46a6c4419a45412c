"""/debug/pprof: the list of profiles, and the profiles themselves.

Named after Go's net/http/pprof, which the specification's admin server
(§4.1) follows; the profiles are Python's equivalents:

    profile  sampling CPU profile of every thread     collapsed stacks | speedscope JSON
    heap     live allocations by line (tracemalloc)   text | JSON
    threads  stack of every thread                    text | JSON
    tasks    every asyncio task and what it awaits    text | JSON
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import threading
import time
from collections.abc import Callable
from html import escape
from typing import TypeVar

from aiohttp import web

from lychgate.admin import heap, profiler, stacks
from lychgate.admin.pages import Endpoint, json_body, page, table, wants_json

MAX_SECONDS = 60.0
DEFAULT_SECONDS = 10.0
DEFAULT_HZ = 100
MAX_HZ = 1000

T = TypeVar("T")

# One CPU profile at a time per process: the sampler sees every thread of the
# process, so a second concurrent one would only double the overhead.
_cpu_busy = threading.Lock()


@dataclasses.dataclass(frozen=True)
class ProfileInfo:
    name: str
    href: str  # a ready-to-open example URL
    summary: str  # one line for the admin index: what, which format, what opens it
    description: str
    formats: str
    how_to_open: str


PROFILES: tuple[ProfileInfo, ...] = (
    ProfileInfo(
        "profile",
        "/debug/pprof/profile?seconds=5",
        f"CPU profile of every thread for ?seconds=N (max {MAX_SECONDS:g}): collapsed stacks "
        "for flamegraph.pl or speedscope, or ?format=speedscope JSON for speedscope",
        f"CPU profile: samples the Python stack of every thread ~{DEFAULT_HZ} times a second "
        f"for ?seconds=N (default {DEFAULT_SECONDS:g}, at most {MAX_SECONDS:g}) and charges each "
        "stack with the CPU time its thread used; idle threads drop out "
        "(?mode=wall keeps them, ?hz=N changes the rate).",
        "?format=collapsed (default, text: one 'thread;frame;...;frame microseconds' line per "
        "stack) or ?format=speedscope (JSON)",
        "collapsed: flamegraph.pl --countname=us profile.txt > profile.svg, or drag the file "
        "into speedscope; speedscope JSON: open it in speedscope (the web app or "
        "'npx speedscope profile.json')",
    ),
    ProfileInfo(
        "heap",
        "/debug/pprof/heap",
        "live allocations by line (tracemalloc, starts on first request): text, or ?format=json",
        "Live memory allocations by source line (tracemalloc), largest first (?limit=N, "
        "?group=traceback for the call path). Tracing starts with the first request; "
        "DELETE stops it.",
        "text (default) or ?format=json",
        "read it in the browser, or curl it to a file and diff two of them to see growth",
    ),
    ProfileInfo(
        "threads",
        "/debug/pprof/threads",
        "the stack of every thread: text in traceback layout, or ?format=json",
        "The current stack of every thread (the event loop, executor workers, gRPC threads).",
        "text (Python traceback layout, default) or ?format=json",
        "read it in the browser",
    ),
    ProfileInfo(
        "tasks",
        "/debug/pprof/tasks",
        "every asyncio task with the coroutines and Future it awaits: text, or ?format=json",
        "Every asyncio task of the control plane's event loop with the chain of coroutines "
        "it is suspended in and the Future it awaits (Go's goroutine profile).",
        "text (Python traceback layout, default) or ?format=json",
        "read it in the browser",
    ),
)

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("/debug/pprof", "the available profiles, their formats and how to open them"),
    *(Endpoint(p.href, p.summary) for p in PROFILES),
)


async def _in_thread(fn: Callable[[], T], name: str) -> T:
    """Run blocking work in a thread of its own and await it.

    Not the loop's default executor: the pipeline may have filled it, and a
    profile of a stuck control plane is exactly when it must still answer.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def target() -> None:
        try:
            result = fn()
        except BaseException as exc:  # handed to the awaiting handler
            settle = functools.partial(_fail, future, exc)
        else:
            settle = functools.partial(_succeed, future, result)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle)

    threading.Thread(target=target, name=name, daemon=True).start()
    return await future


def _succeed(future: asyncio.Future[T], result: T) -> None:
    if not future.done():  # the handler may have been cancelled
        future.set_result(result)


def _fail(future: asyncio.Future[T], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _number(request: web.Request, name: str, default: float, low: float, high: float) -> float:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not low < value <= high:  # also rejects nan
        raise web.HTTPBadRequest(
            text=f"{name} must be a number above {low:g} and at most {high:g}, not {raw!r}\n"
        )
    return value


def _choice(request: web.Request, name: str, choices: tuple[str, ...]) -> str:
    value = request.query.get(name, choices[0]).lower()
    if value not in choices:
        raise web.HTTPBadRequest(
            text=f"{name} must be one of {', '.join(choices)}, not {value!r}\n"
        )
    return value


def _format_links(p: ProfileInfo) -> str:
    if p.name == "profile":
        href = escape(p.href + "&format=speedscope")
        return f' &mdash; <a href="{href}">speedscope JSON</a>'
    href = escape(p.href + "?format=json")
    return f' &mdash; <a href="{href}">JSON</a>'


async def index(request: web.Request) -> web.Response:
    """The list of profiles (HTML, or JSON with ?format=json)."""
    if wants_json(request):
        return json_body({"profiles": [dataclasses.asdict(p) for p in PROFILES]}, pretty=True)
    rows = [
        [
            f'<a href="{escape(p.href)}">{escape(p.name)}</a>',
            escape(p.description),
            escape(p.formats) + _format_links(p),
            escape(p.how_to_open),
        ]
        for p in PROFILES
    ]
    body = (
        "<p>Profiles of this control plane process. Save one with "
        "<code>curl -o cpu.txt 'http://127.0.0.1:9095/debug/pprof/profile?seconds=30'</code>.</p>"
        + table(["profile", "what it shows", "formats", "how to open it"], rows)
    )
    return page("/debug/pprof", body)


async def cpu_profile(request: web.Request) -> web.Response:
    """Sample every thread for ?seconds=N and return collapsed stacks or speedscope JSON."""
    seconds = _number(request, "seconds", DEFAULT_SECONDS, 0, MAX_SECONDS)
    hz = _number(request, "hz", DEFAULT_HZ, 0, MAX_HZ)
    fmt = _choice(request, "format", ("collapsed", "speedscope"))
    mode: profiler.Mode = "wall" if _choice(request, "mode", ("cpu", "wall")) == "wall" else "cpu"
    if not _cpu_busy.acquire(blocking=False):
        raise web.HTTPConflict(
            text="a CPU profile is already being taken; try again when it ends\n"
        )
    stop = threading.Event()
    try:
        sampler = profiler.SamplingProfiler(interval=1.0 / hz, mode=mode)
        result = await _in_thread(lambda: sampler.run(seconds, stop), "lychgate-cpu-profiler")
    finally:
        stop.set()  # ends the sampler early if the request was cancelled
        _cpu_busy.release()
    headers = {
        "X-Lychgate-Profile-Mode": result.mode,
        "X-Lychgate-Profile-Samples": str(result.samples_taken),
        "X-Lychgate-Profile-Seconds": f"{result.duration:.3f}",
    }
    if fmt == "speedscope":
        doc = profiler.to_speedscope(result)
        return web.Response(text=json.dumps(doc), content_type="application/json", headers=headers)
    text = profiler.to_collapsed(result)
    if not text:
        # An empty body reads as a broken page in a browser; flamegraph.pl and
        # speedscope skip a line that is not "stack count", so say why instead.
        text = (
            f"# no thread used CPU during the {result.duration:.1f}s profile; the control plane "
            "was idle. ?mode=wall shows where threads wait.\n"
        )
    return web.Response(text=text, content_type="text/plain", headers=headers)


async def heap_profile(request: web.Request) -> web.Response:
    """Top live allocations from tracemalloc; starts tracing on first use."""
    limit = int(_number(request, "limit", 50, 0, 10_000))
    group: heap.Group = (
        "traceback"
        if _choice(request, "group", ("lineno", "traceback")) == "traceback"
        else "lineno"
    )
    report = await _in_thread(lambda: heap.report(limit, group), "lychgate-heap-profile")
    if wants_json(request):
        return json_body(heap.as_json(report), pretty=True)
    return web.Response(text=heap.format_text(report), content_type="text/plain")


async def heap_stop(request: web.Request) -> web.Response:
    """Stop tracemalloc (its overhead stays until then)."""
    was = heap.stop_tracing()
    return web.Response(
        text="tracemalloc stopped\n" if was else "tracemalloc was not tracing\n",
        content_type="text/plain",
    )


async def thread_stacks(request: web.Request) -> web.Response:
    """The stack of every thread."""
    dumps = stacks.thread_dumps()
    if wants_json(request):
        return json_body({"at": time.time(), "threads": dumps}, pretty=True)
    return web.Response(text=stacks.format_threads(dumps), content_type="text/plain")


async def task_stacks(request: web.Request) -> web.Response:
    """Every asyncio task of this event loop, with its await chain."""
    dumps = stacks.task_dumps()
    if wants_json(request):
        return json_body({"at": time.time(), "tasks": dumps}, pretty=True)
    return web.Response(text=stacks.format_tasks(dumps), content_type="text/plain")


def routes() -> list[web.RouteDef]:
    return [
        web.get("/debug/pprof", index),
        web.get("/debug/pprof/", index),
        web.get("/debug/pprof/profile", cpu_profile),
        web.get("/debug/pprof/heap", heap_profile),
        web.delete("/debug/pprof/heap", heap_stop),
        web.get("/debug/pprof/threads", thread_stacks),
        web.get("/debug/pprof/tasks", task_stacks),
    ]
