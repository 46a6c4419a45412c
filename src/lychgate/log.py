"""Logging: one logger per pipeline component, one line per event.

Each component logs under `lychgate.<component>`; the admin server's /logging
page lists COMPONENTS and changes their levels at run time. Lines carry the
component name so a reader can follow one stage through a busy log (spec §4.4).
"""

from __future__ import annotations

import collections
import logging
import sys

# The pipeline stages of DESIGN.md, plus the process wiring ("controlplane").
COMPONENTS: tuple[str, ...] = (
    "controlplane",
    "sources",
    "store",
    "translate",
    "xds",
    "deploy",
    "status",
    "admin",
)

LEVELS: dict[str, int] = {
    "trace": logging.DEBUG,  # Python has no TRACE; debug is the finest we emit
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "off": logging.CRITICAL + 10,
}


# The last warnings and errors, for `lychgate debug` (served at /api/v1/logs).
RECENT: collections.deque[str] = collections.deque(maxlen=200)


class _RecentHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            RECENT.append(self.format(record))
        except Exception:  # never let logging break the caller
            self.handleError(record)


def component_logger(component: str) -> logging.Logger:
    return logging.getLogger(f"lychgate.{component}")


class _ComponentFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        record.component = record.name.removeprefix("lychgate.")
        return super().format(record)


def setup(level: str = "info") -> None:
    """Configure the root lychgate logger once per process."""
    root = logging.getLogger("lychgate")
    if not any(getattr(h, "_lychgate", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(
            _ComponentFormatter(
                "%(asctime)s.%(msecs)03d %(levelname)-5s [%(component)s] %(message)s",
                datefmt="%Y-%m-%dT%H:%M:%S",
            )
        )
        handler._lychgate = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        recent = _RecentHandler(logging.WARNING)
        recent.setFormatter(handler.formatter)
        recent._lychgate = True  # type: ignore[attr-defined]
        root.addHandler(recent)
        root.propagate = False
    root.setLevel(parse_level(level))
    for component in COMPONENTS:
        component_logger(component).setLevel(logging.NOTSET)


def parse_level(name: str) -> int:
    try:
        return LEVELS[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown log level {name!r}; use one of {', '.join(LEVELS)}") from None
