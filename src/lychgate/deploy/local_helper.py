"""A helper process of `lychgate run` beside the local Envoys (the AI extension, the MCP relay).

Started when the first object that needs it appears (most setups never do), it serves
on a loopback port every local Envoy reaches, its metrics on another (both in
`<state dir>/<name>/<stem>.json`; its log is `<stem>.log` beside it), and reads the config the control plane writes for
it. The file lives in the state directory, readable by its owner only, and is
rewritten in place of the old one (the helper watches it). A process that dies is
started again after RESTART_DELAY seconds: without it every route that needs it
answers an error (Envoy fails closed), and nothing else would notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from pathlib import Path

from lychgate.deploy.ports import free_port

log = logging.getLogger("lychgate.deploy")

RESTART_DELAY = 1.0  # seconds before a dead helper is started again (no busy loop on a crash at start)
START_WAIT = 10.0  # seconds a first start may take before the routes reaching it are served anyway


class LocalHelper:
    """`python -m lychgate <command> --config F --listen A --metrics-port P`, kept running."""

    def __init__(self, state_dir: Path, name: str, stem: str, command: str, title: str,
                 port: int | None = None) -> None:
        self.dir = state_dir / name
        self.info_file, self.log_file = self.dir / f"{stem}.json", self.dir / f"{stem}.log"
        self.config_file = self.dir / "config.json"
        self.command, self.title = command, title
        self.port = port or free_port()
        self.metrics_port = free_port()
        self.process: asyncio.subprocess.Process | None = None
        self._written: str | None = None
        self._supervisor: asyncio.Task[None] | None = None

    @property
    def listen(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def hand(self, text: str, needed: bool) -> None:
        """Write the config `text`; start the helper once it is `needed`."""
        if text != self._written:
            self._write(text)
            self._written = text
        if needed and self._supervisor is None:
            self._supervisor = asyncio.create_task(self._supervise())
            # The first time only: Envoy gets the routes that reach the helper right after
            # this, and a client that comes at once should find it serving, not a 503.
            await self._listening(START_WAIT)

    async def _listening(self, timeout: float) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            return
        log.warning("%s does not listen on %s after %.0f s; see %s", self.title, self.listen, timeout, self.log_file)

    async def _supervise(self) -> None:
        """Keep the helper running until close()."""
        while True:
            await self._start()
            assert self.process is not None
            code = await self.process.wait()
            log.warning("%s exited with %s; starting it again in %.0f s", self.title, code, RESTART_DELAY)
            await asyncio.sleep(RESTART_DELAY)

    def _write(self, text: str) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.config_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        tmp.replace(self.config_file)

    async def _start(self) -> None:
        log_file = self.log_file.open("ab")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "lychgate", self.command, "--config", str(self.config_file),
            "--listen", self.listen, "--metrics-port", str(self.metrics_port),
            stdout=log_file, stderr=log_file, start_new_session=True)
        log_file.close()
        # Where it serves, for people and tools: its metrics are scraped from here.
        self.info_file.write_text(json.dumps({
            "pid": self.process.pid, "listen": self.listen, "metrics": f"127.0.0.1:{self.metrics_port}",
            "config": str(self.config_file), "log": str(self.log_file)}, indent=2) + "\n")
        log.info("%s started (pid %d) on %s, metrics on 127.0.0.1:%d", self.title, self.process.pid, self.listen,
                 self.metrics_port)

    async def close(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        process, self.process = self.process, None
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 5)
        except TimeoutError:
            process.kill()
            await process.wait()
