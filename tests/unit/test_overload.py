"""The proxy's heap and connection limits (deploy/overload.py) and how GatewayParameters set them."""

from __future__ import annotations

from typing import Any

import pytest

from lychgate.api.lychgate import GatewayParameters
from lychgate.deploy.overload import (
    DEFAULT_HEAP_BYTES,
    Limits,
    limits,
    overload_manager,
    quantity_bytes,
)
from lychgate.translate.parameters import problem


def params(envoy: dict[str, Any]) -> GatewayParameters:
    return GatewayParameters.model_validate({
        "apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "GatewayParameters",
        "metadata": {"name": "p", "namespace": "default"}, "spec": {"kube": {"envoyContainer": envoy}}})


@pytest.mark.parametrize("value,expected", [
    ("512Mi", 512 * 2**20), ("1G", 10**9), ("1e9", 10**9), ("1.5Gi", 3 * 2**29), (4096, 4096),
    ("100m", 0), ("-1Gi", 0), ("lots", 0)])
def test_quantities(value: int | str, expected: int) -> None:
    assert quantity_bytes(value) == expected


def test_defaults_without_parameters() -> None:
    assert limits(None) == Limits(DEFAULT_HEAP_BYTES, 32768)  # 1 GiB, one connection per 32 KiB


def test_the_heap_follows_the_memory_limit_and_connections_the_heap() -> None:
    got = limits(params({"resources": {"limits": {"memory": "2Gi"}}}))
    assert got == Limits(int(2 * 2**30 * 0.8), int(2 * 2**30 * 0.8) // 32768)
    # A small container: never fewer than 1,024 connections.
    assert limits(params({"resources": {"limits": {"memory": "16Mi"}}})).max_connections == 1024


def test_explicit_values_win() -> None:
    got = limits(params({"resources": {"limits": {"memory": "2Gi"}},
                         "bootstrap": {"overload": {"maxHeapSize": "256Mi", "maxDownstreamConnections": 500}}}))
    assert got == Limits(256 * 2**20, 500)


def test_locally_the_default_connection_limit_leaves_file_descriptors_for_backends() -> None:
    assert limits(None, fd_limit=20000).max_connections == 10000
    explicit = params({"bootstrap": {"overload": {"maxDownstreamConnections": 15000}}})
    assert limits(explicit, fd_limit=20000).max_connections == 15000  # the user's choice (lychgate warns)


def test_a_heap_limit_that_is_not_a_size_is_refused_naming_the_field() -> None:
    bad = params({"bootstrap": {"overload": {"maxHeapSize": "100m"}}})
    assert (problem(bad) or "").startswith("spec.kube.envoyContainer.bootstrap.overload.maxHeapSize: '100m'")
    assert problem(params({"bootstrap": {"overload": {"maxHeapSize": "64Mi"}}})) is None


def test_the_overload_manager_sheds_load_before_the_heap_is_full() -> None:
    om = overload_manager(Limits(2**30, 1000))
    monitors = {m["name"]: m["typed_config"] for m in om["resource_monitors"]}
    assert monitors["envoy.resource_monitors.fixed_heap"]["max_heap_size_bytes"] == 2**30
    assert monitors["envoy.resource_monitors.global_downstream_max_connections"][
        "max_active_downstream_connections"] == 1000
    thresholds = {a["name"].rsplit(".", 1)[1]: a["triggers"][0].get("threshold", {}).get("value")
                  for a in om["actions"]}
    assert thresholds["stop_accepting_requests"] == 0.98
