"""A local Gateway's access log, as its proxy writes it: `lychgate logs GW --access`, `lychgate debug`.

Which files to read comes from the proxy itself (its listeners in Envoy's
/config_dump), so what is shown is what Envoy writes, whichever policy asked
for it. A log written to /dev/stdout or /dev/stderr lands in the proxy's own
log file (local mode), mixed with Envoy's messages: those are left out by
their `[date time][thread][level]` prefix.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ENVOY_MESSAGE = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}\]\[\d+\]\[")
STANDARD_STREAMS = frozenset({"/dev/stdout", "/dev/stderr", "/dev/fd/1", "/dev/fd/2", "/proc/self/fd/1",
                              "/proc/self/fd/2"})
FILE_LOGGER = "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog"


def file_paths(dump: Any) -> list[str]:
    """Every file access log path in a config dump (or any part of one), in order, once."""
    found: dict[str, None] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("@type") == FILE_LOGGER and isinstance(node.get("path"), str):
                found[node["path"]] = None
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(dump)
    return list(found)


def proxy_paths(envoy_admin: str) -> list[str]:
    """The file access logs of a running proxy (its Envoy admin address)."""
    dump = httpx.get(f"http://{envoy_admin}/config_dump", params={"resource": "dynamic_listeners"}, timeout=10)
    dump.raise_for_status()
    return file_paths(dump.json())


def _source(path: str, envoy_log: Path) -> Path:
    return envoy_log if path in STANDARD_STREAMS else Path(path)


def _requests(lines: list[str], mixed: bool) -> list[str]:
    return [line for line in lines if line and not (mixed and ENVOY_MESSAGE.match(line))]


def read(paths: list[str], envoy_log: Path) -> list[str]:
    """Every access log line in the files, one file after the other."""
    out: list[str] = []
    for source in dict.fromkeys(_source(p, envoy_log) for p in paths):
        try:
            text = source.read_text(errors="replace")
        except OSError:
            continue
        out += _requests(text.splitlines(), source == envoy_log)
    return out


def follow(paths: list[str], envoy_log: Path, poll: float = 0.2) -> Iterator[str]:
    """Lines as they are appended (after what is there already), until interrupted."""
    sources = list(dict.fromkeys(_source(p, envoy_log) for p in paths))
    offsets = {s: s.stat().st_size if s.exists() else 0 for s in sources}
    while True:
        for source in sources:
            try:
                with source.open("rb") as f:
                    f.seek(offsets[source])
                    chunk = f.read()
            except OSError:
                continue
            complete = chunk[: chunk.rfind(b"\n") + 1]
            offsets[source] += len(complete)
            yield from _requests(complete.decode(errors="replace").splitlines(), source == envoy_log)
        time.sleep(poll)


def recent(envoy_admin: str, envoy_log: Path, lines: int = 10) -> tuple[list[str], list[str]]:
    """(paths, last lines) of a proxy's file access logs; no paths: it has none."""
    paths = proxy_paths(envoy_admin)
    return paths, read(paths, envoy_log)[-lines:]
