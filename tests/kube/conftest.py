"""Fixtures for Kubernetes-mode tests: the in-process API server stand-in and the controller.

No API server can run here, so every test talks to `tests.kubefake.KubeFake` over
real HTTP with the real lightkube client, exactly as `lychgate controller` does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.kube.helpers import Controller
from tests.kubefake import KubeFake


@pytest.fixture
async def kube() -> AsyncIterator[KubeFake]:
    async with KubeFake(bookmark_interval=0.2) as server:
        server.namespace("lychgate-system")
        yield server
    assert not server.internal_errors, f"kubefake bugs: {server.internal_errors!r}"


@pytest.fixture
async def client(kube: KubeFake) -> AsyncIterator[object]:
    c = kube.client()
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
def controller(kube: KubeFake) -> Controller:
    """controller(**settings) is an async context manager running `lychgate controller` in-process."""
    return Controller(kube)
