"""The process's allocator: large blocks go back to the system when freed.

glibc serves a block above its mmap threshold (128 KiB at start) from its own
mapping, unmapped on free; but each time such a block is freed it raises the
threshold to that size, so the next ones of that size come from the heap and
stay in the process once freed, wherever a small live object sits above them.
The control plane makes many such blocks for a moment: a proxy's first
configuration, encoded (megabytes at thousands of routes), then copied by gRPC,
once per proxy that connects. With the threshold set, the threshold stays, and
the RSS follows what is in use: it falls back when proxies have synced or left.
"""

from __future__ import annotations

import ctypes

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
THRESHOLD = 128 * 1024  # glibc's own starting value


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt, libc.malloc_trim  # noqa: B018  (glibc's, or not there)
    except (OSError, AttributeError):
        return None
    return libc


def return_large_blocks() -> None:
    """Fix the mmap threshold (glibc; elsewhere nothing to do)."""
    if (libc := _libc()) is not None:
        libc.mallopt(M_MMAP_THRESHOLD, THRESHOLD)


def give_back() -> None:
    """Return the heap's free pages to the system (glibc; a few ms): once proxies have
    opened their streams (xds/opening.py) or left, what they held is free, but below
    live objects the heap keeps it."""
    if (libc := _libc()) is not None:
        libc.malloc_trim(0)
