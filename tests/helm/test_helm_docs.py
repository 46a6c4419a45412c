"""docs/values.md is generated from values.yaml and must not go stale; the image matches the chart."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from _helm_support import REPO, SPEC, Rendered, spec_values

TOOL = REPO / "tools" / "values_doc.py"


@pytest.fixture(scope="module")
def values_doc() -> ModuleType:
    spec = importlib.util.spec_from_file_location("values_doc", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["values_doc"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_values_md_is_fresh() -> None:
    result = subprocess.run(
        [sys.executable, str(TOOL), "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_check_fails_when_stale(
    values_doc: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = tmp_path / "values.md"
    stale.write_text(
        (REPO / "docs" / "values.md")
        .read_text()
        .replace("Create the controller Service.", "old text")
    )
    monkeypatch.setattr(values_doc, "DOC", stale)
    assert values_doc.main(["--check"]) == 1
    assert values_doc.main([]) == 0  # regenerating fixes it
    assert values_doc.main(["--check"]) == 0


def test_undocumented_key_is_an_error(values_doc: ModuleType, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("# -- Documented.\na: 1\nb: 2\n")
    with pytest.raises(values_doc.ValuesDocError, match="b: no `# --` comment"):
        values_doc.parse(values)


def test_doc_lists_every_spec_value_with_its_type(values_doc: ModuleType) -> None:
    if not SPEC.exists():
        pytest.skip(f"spec not found at {SPEC}")
    documented = {d.key: d for d in values_doc.parse()}
    for spec in spec_values():
        assert spec.key in documented, spec.key
        assert documented[spec.key].type == spec.type, spec.key
        assert documented[spec.key].description, spec.key


def test_image_runs_the_command_the_chart_starts(defaults: Rendered) -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    program, *_ = defaults.container["command"]
    assert program in pyproject["project"]["scripts"]  # the console script pip installs
    assert dockerfile.startswith("#") and "FROM python:3.11-slim" in dockerfile
    user = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert user and user[-1].split(":")[0] not in ("0", "root"), "the image must not run as root"
