"""Following a config file the control plane rewrites, for the processes beside Envoy
(the AI extension, the MCP relay).

The file's directory is watched rather than the file: in Kubernetes it is a mounted
volume the kubelet updates by swapping a `..data` symlink, so the file itself never
changes (tests/ai/test_config_watch.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path


async def follow(config_file: Path, reload: Callable[[], Awaitable[None]]) -> None:
    """Call `reload` after each change in the directory of `config_file` (until cancelled)."""
    from watchfiles import awatch

    async for _ in awatch(config_file.parent, debounce=50, step=20):
        await reload()
