"""/debug/pprof: the profile list and each profile, over real HTTP requests."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import tracemalloc

from aiohttp import web
from aiohttp.test_utils import TestClient

Client = TestClient[web.Request, web.Application]


def busy_spin_for_profile_test(stop: threading.Event) -> None:
    total = 0
    while not stop.is_set():
        for i in range(10_000):
            total += i * i


def block_loop_for_profile_test(seconds: float) -> None:
    end = time.monotonic() + seconds
    total = 0
    while time.monotonic() < end:
        total += sum(range(1000))


async def test_index_lists_profiles_html_and_json(admin: Client) -> None:
    resp = await admin.get("/debug/pprof")
    assert resp.status == 200
    assert resp.content_type == "text/html"
    html = await resp.text()
    for name in ("profile", "heap", "threads", "tasks"):
        assert f"/debug/pprof/{name}" in html
    assert "speedscope" in html and "flamegraph.pl" in html

    resp = await admin.get("/debug/pprof?format=json")
    data = await resp.json()
    names = [p["name"] for p in data["profiles"]]
    assert names == ["profile", "heap", "threads", "tasks"]
    assert all(p["description"] and p["formats"] and p["how_to_open"] for p in data["profiles"])


async def test_cpu_profile_shows_busy_thread_function(admin: Client) -> None:
    stop = threading.Event()
    worker = threading.Thread(target=busy_spin_for_profile_test, args=(stop,), name="busy-worker")
    worker.start()
    try:
        resp = await admin.get("/debug/pprof/profile?seconds=1")
    finally:
        stop.set()
        worker.join()
    assert resp.status == 200
    assert resp.content_type == "text/plain"
    assert resp.headers["X-Lychgate-Profile-Mode"] == "cpu"
    text = await resp.text()
    busy = [line for line in text.splitlines() if "busy_spin_for_profile_test" in line]
    assert busy, text
    # collapsed format: thread first, frames joined by ';', a weight in µs last.
    stack, weight = busy[0].rsplit(" ", 1)
    assert stack.startswith("thread busy-worker;")
    assert int(weight) > 0
    # The busy thread used most of the CPU the process got; it must dominate the profile.
    # (Relative, not in µs: on a loaded 2-core machine the thread may get a fraction of a core.)
    total_busy = sum(int(line.rsplit(" ", 1)[1]) for line in busy)
    total = sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.strip())
    assert total_busy > total / 2, text


async def test_cpu_profile_samples_the_event_loop_thread(admin: Client) -> None:
    # The handler awaits the sampler thread; meanwhile a callback hogs the loop,
    # as a slow translation on the loop would.
    asyncio.get_running_loop().call_later(0.2, block_loop_for_profile_test, 0.5)
    resp = await admin.get("/debug/pprof/profile?seconds=1")
    text = await resp.text()
    loop_lines = [line for line in text.splitlines() if "block_loop_for_profile_test" in line]
    assert loop_lines, text
    assert loop_lines[0].startswith("thread MainThread;")


async def test_cpu_profile_speedscope_format(admin: Client) -> None:
    stop = threading.Event()
    worker = threading.Thread(target=busy_spin_for_profile_test, args=(stop,), name="busy-worker")
    worker.start()
    try:
        resp = await admin.get("/debug/pprof/profile?seconds=0.5&format=speedscope")
    finally:
        stop.set()
        worker.join()
    assert resp.status == 200
    doc = json.loads(await resp.text())
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert any(f["name"] == "busy_spin_for_profile_test" for f in frames)
    by_name = {p["name"]: p for p in doc["profiles"]}
    busy = by_name["thread busy-worker"]
    assert busy["type"] == "sampled" and busy["unit"] == "microseconds"
    assert len(busy["samples"]) == len(busy["weights"]) > 0
    assert busy["endValue"] == sum(busy["weights"])
    assert all(0 <= i < len(frames) for stack in busy["samples"] for i in stack)
    leaf_names = {frames[stack[-1]]["name"] for stack in busy["samples"]}
    assert "busy_spin_for_profile_test" in leaf_names


async def test_wall_mode_includes_idle_threads(admin: Client) -> None:
    parked = threading.Event()
    idle = threading.Thread(target=parked.wait, name="idle-worker")
    idle.start()
    try:
        resp = await admin.get("/debug/pprof/profile?seconds=0.3&mode=wall")
    finally:
        parked.set()
        idle.join()
    assert resp.headers["X-Lychgate-Profile-Mode"] == "wall"
    assert "thread idle-worker;" in await resp.text()


async def test_cpu_profile_rejects_bad_parameters(admin: Client) -> None:
    for query in ("seconds=0", "seconds=61", "seconds=abc", "seconds=nan", "format=pprof", "hz=0"):
        resp = await admin.get(f"/debug/pprof/profile?{query}")
        assert resp.status == 400, query
        assert query.split("=")[0] in await resp.text()


async def test_only_one_cpu_profile_at_a_time(admin: Client) -> None:
    first = asyncio.create_task(admin.get("/debug/pprof/profile?seconds=1"))
    await asyncio.sleep(0.3)
    second = await admin.get("/debug/pprof/profile?seconds=1")
    assert second.status == 409
    assert "already" in await second.text()
    assert (await first).status == 200


def allocate_for_heap_test() -> list[bytearray]:
    return [bytearray(4096) for _ in range(500)]


async def test_heap_starts_tracing_then_reports_allocations(admin: Client) -> None:
    assert not tracemalloc.is_tracing()
    resp = await admin.get("/debug/pprof/heap")
    assert resp.status == 200
    text = await resp.text()
    assert "started with this request" in text
    assert tracemalloc.is_tracing()

    kept = allocate_for_heap_test()
    resp = await admin.get("/debug/pprof/heap?format=json&limit=20")
    data = await resp.json()
    assert data["started_now"] is False
    assert "tracing" in data["note"]
    assert data["total_bytes"] >= 500 * 4096
    tops = [entry["traceback"][-1] for entry in data["top"]]
    assert any("test_admin_pprof.py" in where for where in tops), tops
    assert len(kept) == 500

    resp = await admin.delete("/debug/pprof/heap")
    assert resp.status == 200
    assert not tracemalloc.is_tracing()


async def test_heap_traceback_grouping(admin: Client) -> None:
    await admin.get("/debug/pprof/heap")
    kept = allocate_for_heap_test()
    text = await (await admin.get("/debug/pprof/heap?group=traceback&limit=5")).text()
    assert "grouped by traceback" in text
    assert "test_admin_pprof.py" in text
    assert kept


def parked_thread_for_dump_test(event: threading.Event) -> None:
    event.wait()


async def test_threads_dump_every_thread(admin: Client) -> None:
    event = threading.Event()
    thread = threading.Thread(
        target=parked_thread_for_dump_test, args=(event,), name="parked-for-dump"
    )
    thread.start()
    try:
        text = await (await admin.get("/debug/pprof/threads")).text()
        data = await (await admin.get("/debug/pprof/threads?format=json")).json()
    finally:
        event.set()
        thread.join()
    assert "Thread 'parked-for-dump'" in text
    assert "in parked_thread_for_dump_test" in text
    assert text.index("Thread 'MainThread'") < text.index("Thread 'parked-for-dump'")
    parked = next(t for t in data["threads"] if t["name"] == "parked-for-dump")
    assert parked["native_id"] and parked["daemon"] is False
    functions = [f["function"] for f in parked["stack"]]
    assert "parked_thread_for_dump_test" in functions
    assert functions.index("parked_thread_for_dump_test") < functions.index("Event.wait")


async def inner_wait_for_dump(event: asyncio.Event) -> None:
    await event.wait()


async def parked_coroutine_for_dump(event: asyncio.Event) -> None:
    await inner_wait_for_dump(event)


async def test_tasks_dump_shows_await_chain(admin: Client) -> None:
    event = asyncio.Event()
    task = asyncio.create_task(parked_coroutine_for_dump(event), name="parked-task")
    await asyncio.sleep(0)
    try:
        text = await (await admin.get("/debug/pprof/tasks")).text()
        data = await (await admin.get("/debug/pprof/tasks?format=json")).json()
    finally:
        event.set()
        await task
    assert "Task 'parked-task' pending, coroutine parked_coroutine_for_dump" in text
    assert "in inner_wait_for_dump" in text
    parked = next(t for t in data["tasks"] if t["name"] == "parked-task")
    functions = [f["function"] for f in parked["stack"]]
    assert functions[:3] == ["parked_coroutine_for_dump", "inner_wait_for_dump", "Event.wait"]
    assert parked["awaiting"].startswith("<Future pending")
