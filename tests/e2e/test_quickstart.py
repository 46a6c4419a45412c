"""The README's first command: the bundled quickstart answers the documented curl."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.harness import EchoBackends, Lychgate

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).parents[2] / "examples" / "quickstart"


def test_quickstart_example_answers(lychgate: Lychgate, backends: EchoBackends) -> None:
    backends.start(pod="echo", port=3000)  # what `make quickstart` starts beside it
    lychgate.start(directory=EXAMPLE)
    addr = lychgate.address("http")
    # The address the README's curl uses (unless this run was moved aside).
    assert addr == os.environ.get("LYCHGATE_LOCAL_ADDRESS_BASE", "127.0.1.1")
    resp = lychgate.get(addr, "/hello", host="www.example.com", port=8080)
    assert resp.status_code == 200
    assert resp.json()["path"] == "/hello"
    assert resp.json()["host"] == "www.example.com"
