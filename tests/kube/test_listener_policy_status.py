"""Kubernetes mode: ListenerPolicy and HTTPListenerPolicy are watched, and their status written back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.kube.helpers import (
    CONTROLLER,
    LG,
    Controller,
    condition,
    eventually,
    gateway,
    gateway_class,
)
from tests.kubefake import KubeFake

CRDS = Path(__file__).parent.parent.parent / "charts" / "lychgate" / "crds"
TARGET = [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}]


def status(kube: KubeFake, plural: str, name: str) -> dict[str, Any] | None:
    return (kube.get(plural, name) or {}).get("status")


async def test_listener_policies_get_status_per_gateway(kube: KubeFake, controller: Controller) -> None:
    for plural in ("listenerpolicies", "httplistenerpolicies"):  # the chart's CRDs, as a cluster holds them
        kube.install_crd(yaml.safe_load((CRDS / f"gateway.lychgate.dev_{plural}.yaml").read_text()))
    kube.create(gateway_class())
    kube.create(gateway())
    kube.create({"apiVersion": LG, "kind": "ListenerPolicy", "metadata": {"name": "logs", "namespace": "default"},
                 "spec": {"targetRefs": TARGET,
                          "default": {"httpSettings": {"accessLog": [{"fileSink": {"path": "/dev/stdout"}}]}}}})
    kube.create({"apiVersion": LG, "kind": "HTTPListenerPolicy", "metadata": {"name": "legacy", "namespace": "default"},
                 "spec": {"targetRefs": TARGET, "healthCheck": {"path": "/healthz"}}})
    async with controller():
        st = await eventually(lambda: status(kube, "listenerpolicies", "logs"), what="ListenerPolicy status")
        (ancestor,) = st["ancestors"]
        assert ancestor["controllerName"] == CONTROLLER and ancestor["ancestorRef"]["name"] == "gw"
        assert condition(ancestor, "Accepted")["status"] == "True"  # type: ignore[index]
        assert condition(ancestor, "Applied")["message"] == "applied: accessLog"  # type: ignore[index]
        legacy = await eventually(lambda: status(kube, "httplistenerpolicies", "legacy"),
                                  what="HTTPListenerPolicy status")
        assert condition(legacy["ancestors"][0], "Applied")["message"] == "applied: healthCheck"  # type: ignore[index]

        # A change is watched and reflected (and an invalid value named).
        kube.apply({"apiVersion": LG, "kind": "ListenerPolicy", "metadata": {"name": "logs", "namespace": "default"},
                    "spec": {"targetRefs": TARGET, "default": {"httpSettings": {"streamIdleTimeout": "soon"}}}})

        def invalid() -> dict[str, Any] | None:
            accepted = condition(status(kube, "listenerpolicies", "logs"), "Accepted")
            return accepted if accepted and accepted["status"] == "False" else None

        accepted = await eventually(invalid, what="the invalid value to be reported")
        assert "spec.default.httpSettings.streamIdleTimeout" in accepted["message"]
