"""listenerset conformance cases."""

from __future__ import annotations
