"""Which manifest files changed: inotify on Linux, watchfiles elsewhere.

A saved file should reach the control loop at once: it is the first step of
every change a user of local mode makes. watchfiles polls its Rust thread for
quiet every `step` ms, which put a saved file in the control loop about
4.5 ms after the write (at 2 ms steps; measured) and costs ~2.6 % of a core
while idle. inotify read straight from the event loop takes a fraction of a
millisecond and costs nothing while idle.

A file counts as changed when its writer closes it (IN_CLOSE_WRITE: never
half-written), when it is renamed into place or away, or deleted. A writer that
keeps a file open is waited for (up to `OPEN_WRITER_SECONDS` of quiet), as
watchfiles' debounce did. Batches are yielded as sets of paths; `None` means
"the kernel dropped events: look at every file again".
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lychgate.log import component_logger

if TYPE_CHECKING:  # Linux only: imported where it runs
    from asyncinotify import Event, RecursiveInotify

log = component_logger("sources")

SUFFIXES = (".yaml", ".yml")
# After a file went away, how long to wait for what brings it back (an editor's
# rename-over is a few events); a file written and closed is read at once.
GATHER_SECONDS = 0.0005
OPEN_WRITER_SECONDS = 0.1


async def changes(root: Path, stop: asyncio.Event) -> AsyncIterator[set[Path] | None]:
    """Batches of changed manifest paths under `root` (a directory or one file) until `stop`."""
    if sys.platform.startswith("linux"):
        try:
            from asyncinotify import RecursiveInotify  # noqa: F401  (Linux only)
        except (ImportError, OSError) as err:  # no inotify (a sandbox without it)
            log.info("inotify unavailable (%s); watching with watchfiles", err)
        else:
            async for batch in _inotify(root, stop):
                yield batch
            return
    async for batch in _watchfiles(root, stop):
        yield batch


async def _watchfiles(root: Path, stop: asyncio.Event) -> AsyncIterator[set[Path] | None]:
    from watchfiles import awatch

    async for found in awatch(root, stop_event=stop, debounce=200, step=2, recursive=True,
                              watch_filter=lambda _change, p: p.endswith(SUFFIXES)):
        yield {Path(p) for _, p in found}


async def _inotify(root: Path, stop: asyncio.Event) -> AsyncIterator[set[Path] | None]:
    from asyncinotify import Mask, RecursiveInotify

    files = Mask.CLOSE_WRITE | Mask.MOVED_TO | Mask.MOVED_FROM | Mask.DELETE | Mask.MODIFY | Mask.CREATE
    single = None if root.is_dir() else root.name  # one manifest file: watch its directory
    with RecursiveInotify() as ino:
        if single is None:
            ino.add_recursive_watch(root, files)
        else:
            ino.add_watch(root.parent, files)
        # One task reads the events and is never cancelled: cancelling a read of inotify
        # just as it completes would drop the events it read.
        events: asyncio.Queue[Event] = asyncio.Queue()
        pump = asyncio.create_task(_pump(ino, events))
        stopping = asyncio.ensure_future(stop.wait())
        open_writers: set[Path] = set()  # modified, not closed yet
        try:
            while True:
                getting = asyncio.ensure_future(events.get())
                done, _ = await asyncio.wait({getting, stopping}, return_when=asyncio.FIRST_COMPLETED,
                                             timeout=OPEN_WRITER_SECONDS if open_writers else None)
                if getting not in done:
                    getting.cancel()  # the event stays queued
                    if stopping in done:
                        return
                    yield set(open_writers)  # quiet: what open writers wrote so far is what there is
                    open_writers.clear()
                    continue
                found = [getting.result()]
                await asyncio.sleep(0)  # the events read along with it
                _drain(events, found)
                if any(event.mask & (Mask.MOVED_FROM | Mask.DELETE) for event in found):
                    # A file went away: an editor's rename-over or rewrite brings it back
                    # within microseconds, and must not delete its objects meanwhile.
                    await asyncio.sleep(GATHER_SECONDS)
                    _drain(events, found)
                batch: set[Path] = set()
                rescan = False
                for event in found:
                    rescan = rescan or Mask.Q_OVERFLOW in event.mask or _classify(
                        event, single, batch, open_writers, lambda d: ino.add_recursive_watch(d, files))
                if rescan:
                    log.info("reading every manifest again (inotify dropped events, or a directory went)")
                    open_writers.clear()
                    yield None
                elif batch:
                    open_writers -= batch
                    yield batch
        finally:
            stopping.cancel()
            pump.cancel()


def _drain(events: asyncio.Queue[Event], into: list[Event]) -> None:
    while not events.empty():
        into.append(events.get_nowait())


async def _pump(ino: RecursiveInotify, events: asyncio.Queue[Event]) -> None:
    async for event in ino:
        events.put_nowait(event)


def _classify(event: Event, single: str | None, batch: set[Path], open_writers: set[Path],
              watch_dir: Callable[[Path], object]) -> bool:
    """Add what one event changed; True when only reading every file again can tell
    (a directory moved away or deleted: its files' names raise no events)."""
    from asyncinotify import Mask

    mask, path = event.mask, event.path
    if path is None:
        return False
    if Mask.ISDIR in mask:
        if mask & (Mask.CREATE | Mask.MOVED_TO):
            # A directory that appeared: RecursiveInotify watches it for directory events
            # only, so it is watched for file events too; and files written into it before
            # that raised no event of their own.
            watch_dir(path)
            batch.update(p for p in path.rglob("*") if p.suffix in SUFFIXES)
        return bool(mask & (Mask.MOVED_FROM | Mask.DELETE))
    if (path.name != single) if single is not None else (path.suffix not in SUFFIXES):
        return False
    if mask & (Mask.CLOSE_WRITE | Mask.MOVED_TO | Mask.MOVED_FROM | Mask.DELETE):
        batch.add(path)
    elif Mask.MODIFY in mask:
        open_writers.add(path)
    return False
