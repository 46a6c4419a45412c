"""pytest fixtures, for a conftest: `pytest_plugins = ["tests.kubefake.fixtures"]`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from .server import KubeFake


@pytest.fixture
async def kube() -> AsyncIterator[KubeFake]:
    """A started, empty (default namespaces + CRDs only) API server stand-in."""
    async with KubeFake() as server:
        yield server
    assert not server.internal_errors, f"kubefake bugs: {server.internal_errors!r}"


@pytest.fixture
async def kube_client(kube: KubeFake) -> AsyncIterator[Any]:
    """A real lightkube.AsyncClient talking to `kube`."""
    client = kube.client()
    try:
        yield client
    finally:
        await client.close()
