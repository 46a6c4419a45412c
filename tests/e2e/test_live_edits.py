"""The README's promise on its own example: edit a file of `lychgate run examples/quickstart`
(a relative directory) and the change is served, whichever way the editor saves it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness import EchoBackends, Lychgate, wait_for

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).parents[2] / "examples" / "quickstart"


def rewrite_in_place(path: Path, text: str) -> None:
    """`sed -i`-less editors and `echo > file`: truncate and write the same inode."""
    with path.open("r+", encoding="utf-8") as f:
        f.truncate(0)
        f.write(text)


def write_temp_then_rename(path: Path, text: str) -> None:
    """vim (backupcopy=no), sed -i, most IDEs: a new file renamed over the old one."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def delete_and_create(path: Path, text: str) -> None:
    path.unlink()
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("save", [rewrite_in_place, write_temp_then_rename, delete_and_create])
def test_quickstart_edit_is_served_from_a_relative_directory(
    tmp_path: Path, lychgate: Lychgate, backends: EchoBackends, save: Callable[[Path, str], None],
) -> None:
    project = tmp_path / "checkout"
    shutil.copytree(EXAMPLE, project / "examples" / "quickstart")
    port = backends.start(pod="echo")
    backend = project / "examples" / "quickstart" / "backend.yaml"
    backend.write_text(backend.read_text().replace("3000", str(port)))
    lychgate.start(directory=Path("examples/quickstart"), cwd=project)  # as `make quickstart` runs it
    addr = lychgate.address("http")
    lychgate.wait_pod(addr, "echo", "/hello", host="www.example.com")

    route = project / "examples" / "quickstart" / "route.yaml"
    save(route, route.read_text().replace("www.example.com", "edited.example.com"))

    lychgate.wait_pod(addr, "echo", "/hello", host="edited.example.com")
    wait_for(lambda: lychgate.pod(addr, "/hello", host="www.example.com") == 404, 10,
             "the old hostname to stop being served")
    assert lychgate.problems() == []
    assert "already defined" not in lychgate.log()
    out = lychgate.cli("get", "httproutes", "echo", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert "edited.example.com" in out.stdout
