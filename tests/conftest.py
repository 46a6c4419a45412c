from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import EchoBackends, Lychgate


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true",
                     help="Rewrite golden files from the current translator output.")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def backends() -> Iterator[EchoBackends]:
    b = EchoBackends()
    yield b
    b.close()


@pytest.fixture
def lychgate(tmp_path: Path) -> Iterator[Lychgate]:
    lg = Lychgate(tmp_path)
    yield lg
    lg.close()
