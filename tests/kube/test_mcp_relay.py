"""The MCP relay in Kubernetes mode: a container of the proxy Pod of each Gateway whose
routes use an MCP Backend, its config (that Gateway's MCP Backends, targets resolved) in
the key `mcp.json` of the proxy's ConfigMap; a target that moves changes the ConfigMap
and never rolls the Pods. The API server is tests/kubefake.py (no cluster here)."""

from __future__ import annotations

import json
from typing import Any

from tests.kube.helpers import (
    GW,
    LG,
    Controller,
    eventually,
    gateway,
    gateway_class,
    route,
    service,
    settle,
)
from tests.kubefake import KubeFake


def mcp_backend(name: str, host: str, port: int = 3000) -> dict[str, Any]:
    return {"apiVersion": LG, "kind": "Backend", "metadata": {"name": name, "namespace": "default"},
            "spec": {"mcp": {"targets": [{"name": "tools", "static": {"host": host, "port": port}}]}}}


def mcp_route(name: str, gw: str, backend: str) -> dict[str, Any]:
    return {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": name, "namespace": "default"},
            "spec": {"parentRefs": [{"name": gw}], "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/mcp"}}],
                "backendRefs": [{"group": "gateway.lychgate.dev", "kind": "Backend", "name": backend}]}]}}


def containers(kube: KubeFake, name: str) -> dict[str, dict[str, Any]]:
    dep = kube.get("deployments", name)
    assert dep is not None, f"no Deployment {name}"
    return {c["name"]: c for c in dep["spec"]["template"]["spec"]["containers"]}


def relay_config(kube: KubeFake, gw: str) -> dict[str, Any] | None:
    cm = kube.get("configmaps", gw)
    return json.loads(cm["data"]["mcp.json"]) if cm is not None and "mcp.json" in cm["data"] else None


def hosts(cfg: dict[str, Any] | None) -> dict[str, list[str]]:
    return {b["id"]: [t["host"] for t in b["targets"]] for b in (cfg or {}).get("backends", [])}


async def test_each_gateway_gets_the_relay_and_only_its_own_backends(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    kube.create(gateway("team-a", port=8080))
    kube.create(gateway("plain", port=8081))
    kube.create(mcp_backend("tools-a", "tools-a.default.svc.cluster.local"))
    kube.create(mcp_backend("unused", "unused.example.com"))
    kube.create(mcp_route("mcp-a", "team-a", "tools-a"))
    kube.create(route("web", gw="plain"))
    kube.create(service())
    async with controller():
        cfg = await eventually(lambda: relay_config(kube, "team-a"), what="team-a's relay config")
        assert hosts(cfg) == {"default/tools-a": ["tools-a.default.svc.cluster.local"]}
        relay = (await eventually(lambda: containers(kube, "team-a").get("mcp-relay"), what="the relay"))
        assert relay["command"] == ["lychgate", "mcp-relay"]
        assert relay["args"] == ["--config", "/etc/lychgate-mcp/mcp.json", "--listen", "127.0.0.1:9978",
                                 "--metrics-port", "9093", "--metrics-address", "0.0.0.0"]
        assert relay["securityContext"]["runAsNonRoot"] is True
        assert relay["volumeMounts"] == [{"name": "bootstrap", "mountPath": "/etc/lychgate-mcp", "readOnly": True}]
        # A Gateway without MCP routes: no relay, no config.
        await eventually(lambda: kube.get("deployments", "plain"), what="the plain Gateway's Deployment")
        assert "mcp-relay" not in containers(kube, "plain") and relay_config(kube, "plain") is None


async def test_a_moved_target_reaches_the_config_map_without_a_rollout(kube: KubeFake,
                                                                       controller: Controller) -> None:
    kube.create(gateway_class())
    kube.create(gateway())
    kube.create(mcp_backend("tools", "old.example.com"))
    kube.create(mcp_route("mcp", "gw", "tools"))
    async with controller():
        await eventually(lambda: hosts(relay_config(kube, "gw")) == {"default/tools": ["old.example.com"]},
                         what="the relay config")
        await settle()
        generation = kube.get("deployments", "gw")["metadata"]["generation"]  # type: ignore[index]
        kube.apply(mcp_backend("tools", "new.example.com"))
        await eventually(lambda: hosts(relay_config(kube, "gw")) == {"default/tools": ["new.example.com"]},
                         what="the moved target in the config")
        await settle()
        assert kube.get("deployments", "gw")["metadata"]["generation"] == generation  # type: ignore[index]
