"""The AI extension of `lychgate run`: one process beside the local Envoys.

Started when the first AI Backend appears (most setups never need it), it serves
ext_proc on a loopback port every local Envoy's AI clusters call, its token metrics on
another (both in `<state dir>/ai/extension.json`), and reads the
config the control plane writes for it: the providers with their credentials, so
they never enter Envoy's configuration. The file lives in the state directory,
readable by its owner only, and is rewritten in place of the old one (the extension
watches it). A process that dies is started again after RESTART_DELAY seconds: without
it every AI route answers 500 (Envoy fails closed), and nothing else would notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from pathlib import Path

from lychgate.ai.config import AIConfig
from lychgate.deploy.ports import free_port

log = logging.getLogger("lychgate.deploy")

RESTART_DELAY = 1.0  # seconds before a dead extension is started again (no busy loop on a crash at start)


class LocalAIExtension:
    def __init__(self, state_dir: Path, port: int | None = None) -> None:
        self.dir = state_dir / "ai"
        self.config_file = self.dir / "config.json"
        self.port = port or free_port()
        self.metrics_port = free_port()
        self.process: asyncio.subprocess.Process | None = None
        self._written: str | None = None
        self._supervisor: asyncio.Task[None] | None = None

    @property
    def listen(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def apply(self, config: AIConfig) -> None:
        """Hand the extension `config`; start it when there is something to serve."""
        text = config.to_json()
        if text != self._written:
            self._write(text)
            self._written = text
        if config.providers and self._supervisor is None:
            self._supervisor = asyncio.create_task(self._supervise())

    async def _supervise(self) -> None:
        """Keep the extension running until close()."""
        while True:
            await self._start()
            assert self.process is not None
            code = await self.process.wait()
            log.warning("AI extension exited with %s; starting it again in %.0f s", code, RESTART_DELAY)
            await asyncio.sleep(RESTART_DELAY)

    def _write(self, text: str) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.config_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        tmp.replace(self.config_file)

    async def _start(self) -> None:
        log_file = (self.dir / "extension.log").open("ab")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "lychgate", "ai-extension", "--config", str(self.config_file),
            "--listen", self.listen, "--metrics-port", str(self.metrics_port),
            stdout=log_file, stderr=log_file, start_new_session=True)
        log_file.close()
        # Where it serves, for people and tools: its token metrics are scraped from here.
        (self.dir / "extension.json").write_text(json.dumps({
            "pid": self.process.pid, "listen": self.listen, "metrics": f"127.0.0.1:{self.metrics_port}",
            "config": str(self.config_file), "log": str(self.dir / "extension.log")}, indent=2) + "\n")
        log.info("AI extension started (pid %d) on %s, metrics on 127.0.0.1:%d", self.process.pid, self.listen,
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
