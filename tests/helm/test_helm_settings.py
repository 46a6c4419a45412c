"""The controller's settings parser accepts exactly what the chart renders.

The rendered Deployment's environment is loaded into os.environ and `Settings()` is built
from it, as the controller does at start-up in the pod.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _helm_support import CHART_DIR, NAMESPACE, Rendered, template_env_names

from lychgate.log import LEVELS, parse_level
from lychgate.settings import Settings, ValidationLevel

PREFIX = "LYCHGATE_"


def settings_from(r: Rendered, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in list(os.environ):
        if name.startswith(PREFIX):
            monkeypatch.delenv(name)
    env = r.env()
    # Every variable must resolve in the pod: a valueFrom the test cannot follow is a surprise.
    assert {e["name"] for e in r.env_entries()} == set(env)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


def test_every_chart_variable_names_a_settings_field(render: Callable[..., Rendered]) -> None:
    fields = set(Settings.model_fields)
    # Scan the template sources, so variables behind a disabled feature are covered too.
    for name in template_env_names():
        assert name.removeprefix(PREFIX).lower() in fields, f"{name} is not a Settings field"
    everything = render({"controller": {"xds": {"tls": {"enabled": True}}}})
    for name in everything.env():
        assert name.removeprefix(PREFIX).lower() in fields, name


def test_defaults(defaults: Rendered, monkeypatch: pytest.MonkeyPatch) -> None:
    s = settings_from(defaults, monkeypatch)
    assert s.log_level == "info"
    assert s.namespace == NAMESPACE
    assert s.validation_level is ValidationLevel.STANDARD
    assert s.xds_tls_enabled is False
    assert (s.xds_address, s.agentgateway_xds_address) == ("0.0.0.0:9977", "0.0.0.0:9978")
    assert (s.metrics_address, s.health_address) == ("0.0.0.0:9092", "0.0.0.0:9093")
    assert s.admin_address == "127.0.0.1:9095"
    assert s.policy_merge == {}
    assert s.discovery_namespace_selectors == []
    assert s.gateway_class_parameters_refs == {}
    assert s.native_scope_key is False  # CEL scope keys: the proxy image may not carry the module
    assert (s.waypoint_enabled, s.inference_extension_enabled, s.agentgateway_enabled) == (
        False,
        False,
        False,
    )


def test_every_feature_value(
    render: Callable[..., Rendered], monkeypatch: pytest.MonkeyPatch
) -> None:
    selectors: list[dict[str, Any]] = [
        {"matchLabels": {"team": "edge"}},
        {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]},
    ]
    merge = {"trafficPolicy": {"extAuth": "DeepMerge", "transformation": "DeepMerge"}}
    refs = {
        "lychgate": {"name": "gp", "namespace": "infra"},
        "lychgate-waypoint": {"name": "mesh", "namespace": "istio-system"},
    }
    r = render(
        {
            "controller": {"logLevel": "debug", "xds": {"tls": {"enabled": True}}},
            "validation": {"level": "STRICT"},
            "policyMerge": merge,
            "discoveryNamespaceSelectors": selectors,
            "gatewayClassParametersRefs": refs,
            "waypoint": {"enabled": True},
            "inferenceExtension": {"enabled": True},
            "agentgateway": {"enabled": True},
            "proxy": {"nativeScopeKey": True},
        }
    )
    s = settings_from(r, monkeypatch)
    assert s.log_level == "debug"
    assert s.validation_level is ValidationLevel.STRICT
    assert s.xds_tls_enabled is True
    mount = r.container["volumeMounts"][0]["mountPath"]
    assert s.xds_tls_dir == Path(mount)
    assert s.policy_merge == merge
    assert s.discovery_namespace_selectors == selectors
    assert s.gateway_class_parameters_refs == refs
    assert s.native_scope_key is True
    assert (s.waypoint_enabled, s.inference_extension_enabled, s.agentgateway_enabled) == (
        True,
        True,
        True,
    )


def test_chart_log_levels_are_the_controllers(chart_schema: dict[str, Any]) -> None:
    levels = chart_schema["properties"]["controller"]["properties"]["logLevel"]["enum"]
    assert set(levels) == set(LEVELS)


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_each_log_level_starts_the_controller(
    level: str, render: Callable[..., Rendered], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = settings_from(render({"controller": {"logLevel": level}}), monkeypatch)
    parse_level(s.log_level)  # what the controller calls at start-up; raises on a bad level


@pytest.fixture(scope="module")
def chart_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((CHART_DIR / "values.schema.json").read_text())
    return schema


def test_ai_extension_runs_the_controllers_image(
    render: Callable[..., Rendered], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Proxy Pods' AI extension reads the config this controller writes: same image, mirror included."""
    r = render({"image": {"registry": "mirror.example.com/lychgate", "tag": "0.1.0-rc1"}})
    s = settings_from(r, monkeypatch)
    assert s.ai_extension_image == r.container["image"] == "mirror.example.com/lychgate/lychgate:0.1.0-rc1"
