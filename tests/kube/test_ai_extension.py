"""The AI extension in Kubernetes mode: a container of the proxy Pod of each Gateway whose
routes use an AI Backend, with its config (only that Gateway's providers, keys and route
settings) in the Secret `<gateway>-ai-config` the controller writes and keeps current."""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.kube.helpers import (
    GW,
    LG,
    Controller,
    eventually,
    gateway,
    gateway_class,
    gateway_condition,
    gateway_parameters,
    route,
    service,
    settle,
)
from tests.kubefake import KubeFake

ARGS = ["--config", "/etc/lychgate-ai/config.json", "--listen", "127.0.0.1:9097",
        "--metrics-port", "9092", "--metrics-address", "0.0.0.0"]


def key_secret(name: str, key: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"},
            "stringData": {"Authorization": key}}


def ai_backend(name: str, secret: str) -> dict[str, Any]:
    return {"apiVersion": LG, "kind": "Backend", "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "AI", "ai": {"llm": {"openai": {
                "authToken": {"kind": "SecretRef", "secretRef": {"name": secret}}}}}}}


def ai_route(name: str, gw: str, backend: str) -> dict[str, Any]:
    return {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": name, "namespace": "default"},
            "spec": {"parentRefs": [{"name": gw}], "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
                "backendRefs": [{"group": "gateway.lychgate.dev", "kind": "Backend", "name": backend}]}]}}


def ai_policy(name: str, route_name: str, system_prompt: str) -> dict[str, Any]:
    return {"apiVersion": LG, "kind": "TrafficPolicy", "metadata": {"name": name, "namespace": "default"},
            "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": route_name}],
                     "ai": {"promptEnrichment": {"prepend": [{"role": "SYSTEM", "content": system_prompt}]}}}}


def containers(kube: KubeFake, name: str) -> dict[str, dict[str, Any]]:
    dep = kube.get("deployments", name)
    assert dep is not None, f"no Deployment {name}"
    return {c["name"]: c for c in dep["spec"]["template"]["spec"]["containers"]}


def config(kube: KubeFake, gw: str) -> dict[str, Any] | None:
    """The AI extension's config as the Pod's mounted file will hold it."""
    secret = kube.get("secrets", f"{gw}-ai-config")
    if secret is None:
        return None
    return json.loads(base64.b64decode(secret["data"]["config.json"]))


def tokens(cfg: dict[str, Any] | None) -> dict[str, str]:
    return {p["id"]: p["token"] for p in (cfg or {}).get("providers", [])}


async def test_each_gateway_gets_the_extension_and_only_its_own_keys(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    for gw, port in (("team-a", 8080), ("team-b", 8081), ("plain", 8082)):
        kube.create(gateway(gw, port=port))
    kube.create(key_secret("key-a", "sk-team-a-1"))
    kube.create(key_secret("key-b", "sk-team-b"))
    kube.create(ai_backend("llm-a", "key-a"))
    kube.create(ai_backend("llm-b", "key-b"))
    kube.create(ai_route("chat-a", "team-a", "llm-a"))
    kube.create(ai_route("chat-b", "team-b", "llm-b"))
    kube.create(ai_policy("french", "chat-a", "Answer in French."))
    kube.create(route("web", gw="plain"))
    kube.create(service())
    async with controller():
        a = await eventually(lambda: config(kube, "team-a"), what="team-a's AI config Secret")
        b = await eventually(lambda: config(kube, "team-b"), what="team-b's AI config Secret")
        # Each Pod's config holds its own Backend's key and route settings, nobody else's.
        assert tokens(a) == {"default/llm-a/llm": "sk-team-a-1"}
        assert tokens(b) == {"default/llm-b/llm": "sk-team-b"}
        assert [r["prompt_enrichment"] for r in a["routes"]] == [
            {"prepend": [{"role": "SYSTEM", "content": "Answer in French."}], "append": []}]
        assert b["routes"] == []

        secret = kube.get("secrets", "team-a-ai-config")
        gw_a = kube.get("gateways", "team-a")
        assert secret is not None and gw_a is not None
        assert secret["type"] == "Opaque"
        assert secret["metadata"]["ownerReferences"] == [{  # goes with its Gateway
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "team-a",
            "uid": gw_a["metadata"]["uid"], "controller": True}]
        assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "lychgate"

        await eventually(lambda: "ai-extension" in containers(kube, "team-a"), what="team-a's extension")
        dep = kube.get("deployments", "team-a")
        assert dep is not None
        pod = dep["spec"]["template"]["spec"]
        ext = containers(kube, "team-a")["ai-extension"]
        assert ext["image"] == "ghcr.io/lychgate/lychgate:0.1.0"
        assert ext["command"] == ["lychgate", "ai-extension"] and ext["args"] == ARGS
        assert ext["ports"] == [{"name": "ai-monitoring", "containerPort": 9092, "protocol": "TCP"}]
        assert ext["volumeMounts"] == [{"name": "ai-config", "mountPath": "/etc/lychgate-ai", "readOnly": True}]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["ai-config"]["secret"]["secretName"] == "team-a-ai-config"
        assert ext["securityContext"]["runAsNonRoot"] is True
        assert ext["securityContext"]["readOnlyRootFilesystem"] is True
        # The keys are in the Secret only: the Deployment carries none of them.
        assert "sk-team-a" not in json.dumps(dep)

        # A Gateway without AI routes: no extension, no Secret.
        await eventually(lambda: kube.get("deployments", "plain"), what="the plain Gateway's Deployment")
        assert list(containers(kube, "plain")) == ["envoy"]
        assert kube.get("secrets", "plain-ai-config") is None


async def test_a_rotated_key_reaches_the_secret_without_a_rollout(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    kube.create(gateway())
    kube.create(key_secret("key", "sk-old"))
    kube.create(ai_backend("llm", "key"))
    kube.create(ai_route("chat", "gw", "llm"))
    async with controller():
        await eventually(lambda: tokens(config(kube, "gw")) == {"default/llm/llm": "sk-old"}, what="the config")
        dep = await eventually(lambda: kube.get("deployments", "gw"), what="the Deployment")
        await settle()
        generation = kube.get("deployments", "gw")["metadata"]["generation"]  # type: ignore[index]
        changes = kube.changes("deployments", "gw")
        secret_writes = kube.writes("secrets", "gw-ai-config")

        # The Backend's Secret is rotated: the config Secret follows, and only it.
        kube.apply(key_secret("key", "sk-new"))
        await eventually(lambda: tokens(config(kube, "gw")) == {"default/llm/llm": "sk-new"}, what="the new key")
        await settle()
        dep = kube.get("deployments", "gw")
        assert dep is not None and dep["metadata"]["generation"] == generation  # the Pods keep running
        assert kube.changes("deployments", "gw") == changes
        assert kube.writes("secrets", "gw-ai-config") == secret_writes + 1

        # Nothing changes: the Secret is not written again.
        kube.create(service("unrelated"))
        await settle()
        assert kube.writes("secrets", "gw-ai-config") == secret_writes + 1

        # The route goes: so do the extension and its Secret.
        kube.delete("httproutes", "chat")
        await eventually(lambda: kube.get("secrets", "gw-ai-config") is None, what="the Secret pruned")
        await eventually(lambda: list(containers(kube, "gw")) == ["envoy"], what="the container removed")


async def test_ai_extension_parameters_shape_the_container(kube: KubeFake, controller: Controller) -> None:
    """aiExtension as kgateway's users write it; enabled: true before any AI route exists."""
    kube.create(gateway_class())
    kube.create(gateway_parameters(aiExtension={
        "enabled": True,
        "image": {"registry": "mirror.example.com", "tag": "0.1.0-patched", "pullPolicy": "Always"},
        "securityContext": {"runAsUser": 4242},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
        "env": [{"name": "LOG_LEVEL", "value": "DEBUG"}],
        "ports": [{"name": "ai-monitoring", "containerPort": 9192}, {"name": "debug", "containerPort": 5678}],
    }))
    kube.create(gateway(params="params"))
    async with controller():
        ext = await eventually(lambda: containers(kube, "gw").get("ai-extension"), what="the extension")
        assert ext["image"] == "mirror.example.com/lychgate:0.1.0-patched" and ext["imagePullPolicy"] == "Always"
        assert ext["securityContext"]["runAsUser"] == 4242 and ext["securityContext"]["runAsNonRoot"] is True
        assert ext["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"}}
        assert ext["env"] == [{"name": "LOG_LEVEL", "value": "DEBUG"}]
        # Its metrics serve on the port named ai-monitoring; the other ports are declared as given.
        assert [(p["name"], p["containerPort"]) for p in ext["ports"]] == [("ai-monitoring", 9192), ("debug", 5678)]
        assert ext["args"][ext["args"].index("--metrics-port") + 1] == "9192"
        assert ext["readinessProbe"]["tcpSocket"]["port"] == 9192
        assert config(kube, "gw") == {"providers": [], "routes": []}  # nothing to serve yet


async def test_what_the_extension_cannot_do_is_refused(kube: KubeFake, controller: Controller) -> None:
    kube.create(gateway_class())
    kube.create(gateway_parameters("traced", aiExtension={
        "enabled": True, "tracing": {"endpoint": "http://otel-collector.monitoring:4317"}}))
    kube.create(gateway_parameters("labelled", aiExtension={
        "enabled": True, "stats": {"customLabels": [{"name": "subject", "metadataKey": "principal:sub"}]}}))
    kube.create(gateway("traced", params="traced"))
    kube.create(gateway("labelled", port=8081, params="labelled"))
    # A listener on the port the extension serves ext_proc on, in the same Pod network.
    kube.create(key_secret("key", "sk-x"))
    kube.create(ai_backend("llm", "key"))
    kube.create(gateway("clash", port=9097))
    kube.create(ai_route("chat", "clash", "llm"))
    async with controller():
        for name, field in (("traced", "spec.kube.aiExtension.tracing: the AI extension sends no"),
                            ("labelled", "spec.kube.aiExtension.stats.customLabels: the AI extension's metrics")):
            accepted = await eventually(lambda n=name: gateway_condition(kube, "Accepted", n),  # type: ignore[misc]
                                        what=f"{name}'s status")
            assert accepted["status"] == "False" and field in accepted["message"], accepted
        programmed = await eventually(
            lambda: (c := gateway_condition(kube, "Programmed", "clash")) and "9097" in c["message"] and c,
            what="the port clash in status")
        assert programmed["status"] == "False" and "AI extension" in programmed["message"]
        for name in ("traced", "labelled", "clash"):
            assert kube.get("deployments", name) is None, name
            assert kube.get("secrets", f"{name}-ai-config") is None, name
