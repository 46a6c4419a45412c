"""Fixtures for the admin server tests: fake pipeline views and a live test client."""

from __future__ import annotations

import logging
import tracemalloc
from collections.abc import AsyncIterator, Iterator

import pytest
from admin_fixtures import FakePipeline
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from lychgate.admin import heap
from lychgate.admin.server import build_admin_app
from lychgate.log import COMPONENTS


@pytest.fixture
def pipeline() -> FakePipeline:
    return FakePipeline()


async def _client(app: web.Application) -> TestClient[web.Request, web.Application]:
    client: TestClient[web.Request, web.Application] = TestClient(TestServer(app))
    await client.start_server()
    return client


@pytest.fixture
async def admin(pipeline: FakePipeline) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    client = await _client(build_admin_app(pipeline.providers()))
    yield client
    await client.close()


@pytest.fixture(autouse=True)
def restore_log_levels() -> Iterator[None]:
    names = ["lychgate", *(f"lychgate.{c}" for c in COMPONENTS)]
    saved = {n: logging.getLogger(n).level for n in names}
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


@pytest.fixture(autouse=True)
def no_tracemalloc_leak() -> Iterator[None]:
    # The heap profile turns tracemalloc on for good; it would slow every later test.
    was = tracemalloc.is_tracing()
    yield
    if not was:
        heap.stop_tracing()
