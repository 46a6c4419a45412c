"""Fixtures for the chart tests: renders by the real Helm engine (helm-python-sdk wraps
Helm's Go SDK in-process, no helm binary), cached per distinct values so the folder stays fast.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import helm_python as helm
import pytest
from _helm_support import CHART_DIR, NAMESPACE, RELEASE, Rendered


@pytest.fixture(scope="session")
def chart() -> Iterator[helm.Chart]:
    loaded = helm.Chart.load(CHART_DIR)
    yield loaded
    loaded.close()


@pytest.fixture(scope="session")
def render(chart: helm.Chart) -> Callable[..., Rendered]:
    """render(values) -> Rendered; the same values are rendered once per session."""
    cache: dict[str, Rendered] = {}

    def _render(values: dict[str, Any] | None = None) -> Rendered:
        key = json.dumps(values or {}, sort_keys=True)
        if key not in cache:
            cache[key] = Rendered.from_helm(
                chart.render(values=values or {}, name=RELEASE, namespace=NAMESPACE)
            )
        return cache[key]

    return _render


@pytest.fixture(scope="session")
def render_error(chart: helm.Chart) -> Callable[[dict[str, Any]], str]:
    """render_error(values) -> the message Helm refuses the install with."""

    def _render_error(values: dict[str, Any]) -> str:
        with pytest.raises(helm.HelmError) as info:
            chart.render(values=values, name=RELEASE, namespace=NAMESPACE)
        return str(info.value)

    return _render_error


@pytest.fixture(scope="session")
def defaults(render: Callable[..., Rendered]) -> Rendered:
    return render({})
