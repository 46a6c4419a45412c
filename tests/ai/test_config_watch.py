"""The AI extension follows its config file as Kubernetes updates it: a Secret volume is
rewritten by the kubelet's atomic writer (files in a new `..<timestamp>` directory, the
`..data` symlink swapped to it by a rename, the old directory removed; `config.json`
itself is a symlink into `..data` that never changes)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

from lychgate.ai import extension
from lychgate.ai.config import AIConfig, Provider


def kubelet_write(volume: Path, files: dict[str, str]) -> None:
    """What the kubelet's AtomicWriter does to a Secret volume on each update."""
    data = volume / "..data"
    old = os.readlink(data) if data.is_symlink() else None
    stamp = volume / datetime.now(UTC).strftime("..%Y_%m_%d_%H_%M_%S.%f")
    while stamp.exists():
        stamp = stamp.with_name(stamp.name + "0")
    stamp.mkdir()
    for name, text in files.items():
        (stamp / name).write_text(text)
    os.symlink(stamp.name, volume / "..data_tmp")
    os.rename(volume / "..data_tmp", data)  # the atomic swap
    for name in files:
        if not (volume / name).is_symlink():
            os.symlink(f"..data/{name}", volume / name)
    if old is not None:
        shutil.rmtree(volume / old)


def config(token: str) -> str:
    return AIConfig(providers={"default/llm/gpt": Provider(
        id="default/llm/gpt", kind="openai", host="api.openai.com", port=443, tls=True, token=token)}).to_json()


async def until_token(ext: extension.Extension, token: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while ext.config.providers.get("default/llm/gpt", None) is None or \
            ext.config.providers["default/llm/gpt"].token != token:
        assert time.monotonic() < deadline, f"the extension did not load the config with {token!r}"
        await asyncio.sleep(0.02)


async def test_the_extension_reloads_on_each_kubelet_update(tmp_path: Path) -> None:
    kubelet_write(tmp_path, {"config.json": config("sk-first")})
    config_file = tmp_path / "config.json"
    ext = extension.Extension(extension.load(config_file))
    assert ext.config.providers["default/llm/gpt"].token == "sk-first"
    watcher = asyncio.create_task(extension._watch(config_file, ext))
    try:
        await asyncio.sleep(0.2)  # the watch is in place
        # Twice: the second swap happens after the directory the first pointed to is gone.
        for token in ("sk-rotated", "sk-rotated-again"):
            kubelet_write(tmp_path, {"config.json": config(token)})
            await until_token(ext, token)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
