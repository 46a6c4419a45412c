"""The manifest watcher (sources/watcher.py) reports every way a file can change,
with the kernel's own notifications (inotify on Linux)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from lychgate.sources import watcher

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/sys/fs/inotify"), reason="inotify is Linux-only")


class Watching:
    """The batches the watcher yields, collected in the background."""

    def __init__(self, root: Path) -> None:
        self.stop = asyncio.Event()
        self.batches: asyncio.Queue[set[Path] | None] = asyncio.Queue()
        self.task = asyncio.create_task(self._run(root))

    async def _run(self, root: Path) -> None:
        async for batch in watcher.changes(root, self.stop):
            await self.batches.put(batch)

    async def next(self, timeout: float = 2.0) -> set[Path] | None:
        return await asyncio.wait_for(self.batches.get(), timeout)

    async def until(self, wanted: Callable[[set[Path] | None], bool], timeout: float = 2.0) -> set[Path] | None:
        """The first batch that `wanted` accepts (a save may also raise earlier, smaller batches)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            batch = await self.next(max(0.01, deadline - asyncio.get_running_loop().time()))
            if wanted(batch):
                return batch


@pytest.fixture
async def watching(tmp_path: Path) -> AsyncIterator[Watching]:
    w = Watching(tmp_path)
    await asyncio.sleep(0.05)  # the watches are in place
    yield w
    w.stop.set()
    await asyncio.wait_for(w.task, 2)


async def test_a_written_file_is_reported_once_closed(tmp_path: Path, watching: Watching) -> None:
    route = tmp_path / "route.yaml"
    route.write_text("kind: HTTPRoute\n")
    assert await watching.next() == {route}
    (tmp_path / "notes.txt").write_text("not a manifest")
    route.unlink()
    assert await watching.next() == {route}  # the text file raised nothing


async def test_rename_over_reports_the_manifest_not_the_temporary_file(tmp_path: Path, watching: Watching) -> None:
    route = tmp_path / "route.yaml"
    tmp = tmp_path / ".route.yaml.swp"
    tmp.write_text("kind: HTTPRoute\n")
    os.replace(tmp, route)
    assert await watching.until(lambda b: b is not None and route in b) == {route}


async def test_a_writer_that_keeps_the_file_open_is_reported_after_it_goes_quiet(
        tmp_path: Path, watching: Watching) -> None:
    route = tmp_path / "route.yaml"
    with route.open("w") as f:
        f.write("kind: HTTPRoute\n")
        f.flush()
        assert await watching.next() == {route}  # before the file is closed


async def test_files_in_a_new_directory_and_a_removed_one(tmp_path: Path, watching: Watching) -> None:
    team = tmp_path / "team"
    staged = tmp_path.parent / f"{tmp_path.name}-staged"
    staged.mkdir()
    (staged / "a.yaml").write_text("kind: HTTPRoute\n")
    (staged / "b.yml").write_text("kind: HTTPRoute\n")
    staged.rename(team)  # a directory moved in with its files: they raised no events of their own
    assert await watching.next() == {team / "a.yaml", team / "b.yml"}
    (team / "c.yaml").write_text("kind: HTTPRoute\n")  # the new directory is watched too
    assert await watching.next() == {team / "c.yaml"}
    shutil.rmtree(team)  # files of a removed directory: every file is looked at again
    assert await watching.until(lambda b: b is None) is None


async def test_one_manifest_file_is_watched_alone(tmp_path: Path) -> None:
    route = tmp_path / "route.yaml"
    route.write_text("kind: HTTPRoute\n")
    w = Watching(route)
    await asyncio.sleep(0.05)
    try:
        (tmp_path / "other.yaml").write_text("kind: HTTPRoute\n")
        route.write_text("kind: GRPCRoute\n")
        assert await w.next() == {route}
    finally:
        w.stop.set()
        await asyncio.wait_for(w.task, 2)


async def test_no_change_is_lost_in_a_burst(tmp_path: Path, watching: Watching) -> None:
    """Files written back to back, as a test suite or `kubectl apply` in a loop writes
    them, each through a temporary name: every one is reported."""
    written = set()
    for i in range(300):
        path = tmp_path / f"r{i:03d}.yaml"
        tmp = path.with_suffix(".tmp")
        tmp.write_text("kind: HTTPRoute\n")
        tmp.replace(path)
        written.add(path)
        if i % 7 == 0:
            await asyncio.sleep(0.0005)  # some land while the watcher gathers, some between reads
    seen: set[Path] = set()
    while seen != written:
        batch = await watching.next()
        assert batch is not None
        seen |= batch
