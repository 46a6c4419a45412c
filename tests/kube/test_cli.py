"""`lychgate controller` as a user runs it: a process, KUBECONFIG and LYCHGATE_* variables."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.kube.helpers import (
    condition,
    eventually,
    gateway,
    gateway_class,
    gateway_condition,
    route,
    service,
)
from tests.kubefake import KubeFake

LYCHGATE = [sys.executable, "-m", "lychgate"]


def env_for(kube: KubeFake, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LYCHGATE_")}
    env.update({
        "KUBECONFIG": str(kube.write_kubeconfig(tmp_path / "kubeconfig")),
        "LYCHGATE_XDS_ADDRESS": "127.0.0.1:0",
        "LYCHGATE_AGENTGATEWAY_XDS_ADDRESS": "127.0.0.1:0",
        "LYCHGATE_ADMIN_ADDRESS": "127.0.0.1:0",
        "LYCHGATE_METRICS_ADDRESS": "127.0.0.1:0",
        "LYCHGATE_HEALTH_ADDRESS": "127.0.0.1:0",
        "LYCHGATE_NAMESPACE": "lychgate-system",
        "HOME": str(tmp_path),  # no ~/.kube/config of the machine running the tests
        **extra,
    })
    return env


async def test_controller_process_configured_by_environment(kube: KubeFake, tmp_path: Path) -> None:
    kube.namespace("edge", {"team": "edge"})
    kube.create(gateway_class())
    kube.create(gateway(ns="edge"))
    kube.create(gateway("ignored"))  # in default, which the selector leaves out
    kube.create(route(ns="edge"))
    kube.create(service(ns="edge"))
    env = env_for(kube, tmp_path, LYCHGATE_DISCOVERY_NAMESPACE_SELECTORS='[{"matchLabels": {"team": "edge"}}]',
                  LYCHGATE_LOG_LEVEL="debug")
    log = (tmp_path / "controller.log").open("wb")
    proc = await asyncio.create_subprocess_exec(*LYCHGATE, "controller", env=env, stdout=log, stderr=log)
    try:
        await eventually(lambda: gateway_condition(kube, "Accepted", ns="edge"), timeout=20,
                         what="status written by the controller process")
        # Statuses are written one object at a time: the route's may come after the Gateway's.
        route_status = await eventually(lambda: (kube.get("httproutes", "route", namespace="edge") or {}).get("status"),
                                        what="the route's status")
        parents = route_status["parents"]
        assert condition(parents[0], "Accepted")["status"] == "True"  # type: ignore[index]
        await eventually(lambda: kube.get("deployments", "gw", namespace="edge"), what="the proxy Deployment")
        lease = kube.get("leases", "lychgate", namespace="lychgate-system")
        assert lease and lease["spec"]["holderIdentity"]
        assert (kube.get("gateways", "ignored") or {}).get("status") is None
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 15)
        log.close()
    text = (tmp_path / "controller.log").read_text()
    assert code == 0, text
    assert "released Lease lychgate-system/lychgate" in text
    assert kube.get("leases", "lychgate", namespace="lychgate-system")["spec"].get("holderIdentity") is None  # type: ignore[index]


@pytest.mark.parametrize("args, env, message", [
    (["--discovery-namespace-selectors", "[{"], {}, "--discovery-namespace-selectors: not valid JSON"),
    ([], {"LYCHGATE_DISCOVERY_NAMESPACE_SELECTORS": '[{"matchExpressions": [{"key": "a", "operator": "Is"}]}]'},
     "discoveryNamespaceSelectors[0].matchExpressions[0]: operator must be In"),
    ([], {"LYCHGATE_LEADER_ELECTION_RENEW_DEADLINE": "30"}, "renew deadline < lease duration"),
    ([], {"LYCHGATE_POLICY_MERGE": "{not json"}, "LYCHGATE_POLICY_MERGE"),
])
async def test_invalid_settings_are_refused_clearly(
    kube: KubeFake, tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    proc = await asyncio.create_subprocess_exec(
        *LYCHGATE, "controller", *args, env=env_for(kube, tmp_path, **env),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2, (out + err).decode()
    assert message in err.decode() and "Traceback" not in err.decode()


async def test_no_cluster_configuration_is_a_clear_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LYCHGATE_", "KUBECONFIG"))}
    env.update(HOME=str(tmp_path), KUBECONFIG=str(tmp_path / "missing"))
    proc = await asyncio.create_subprocess_exec(
        *LYCHGATE, "controller", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1 and err.decode().startswith("error:") and "Traceback" not in err.decode()


def test_inference_extension_without_agent_gateway_is_deprecated(caplog: pytest.LogCaptureFixture) -> None:
    """Spec §2.6.1/§9: warned about (deprecated in v2.1), not refused."""
    import logging

    from lychgate.kube_main import check_settings
    from lychgate.settings import Settings

    root = logging.getLogger("lychgate")
    propagate, root.propagate = root.propagate, True  # lychgate's handler may have turned it off
    try:
        with caplog.at_level(logging.WARNING, logger="lychgate.controlplane"):
            check_settings(Settings(inference_extension_enabled=True))
            assert "deprecated" in caplog.text and "agentgateway.enabled" in caplog.text
            caplog.clear()
            check_settings(Settings(inference_extension_enabled=True, agentgateway_enabled=True))
            assert "deprecated" not in caplog.text
    finally:
        root.propagate = propagate
