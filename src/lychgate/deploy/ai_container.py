"""The AI extension in a Gateway's proxy Pod (Kubernetes mode), as kgateway ran it: a
container beside Envoy, shaped by GatewayParameters `kube.aiExtension`.

It is there when the Gateway's routes use an AI Backend, or when `aiExtension.enabled`
asks for it beforehand (`enabled: false` does not remove it while routes use one: they
could not be served). Envoy's AI clusters call it on 127.0.0.1:9097 (ext_proc); it
serves its token metrics on the Pod's port `ai-monitoring` (9092, or the containerPort
of an `aiExtension.ports` entry of that name) for scrapers.

Its config (providers with their credentials, the routes' AI settings: only this
Gateway's) comes in the Secret `<gateway>-ai-config`, mounted read-only. Kubelet swaps
the mounted files when the Secret changes and the extension watches them, so a key
rotation reaches it without a restart: nothing of the config is in the Deployment.

What the extension cannot do is refused with the rest of GatewayParameters
(translate/parameters.py): `stats.customLabels` and `tracing`.
"""

from __future__ import annotations

import base64
from pathlib import PurePosixPath
from typing import Any

from lychgate.ai.config import AIConfig
from lychgate.api.lychgate import AiExtension, GatewayParameters
from lychgate.deploy import helper_container
from lychgate.translate.ai_config import DEFAULT_EXTENSION_PORT

CONTAINER = "ai-extension"
VOLUME = "ai-config"
CONFIG_DIR = PurePosixPath("/etc/lychgate-ai")
CONFIG_FILE = "config.json"
METRICS_PORT = 9092
METRICS_PORT_NAME = "ai-monitoring"


def secret_name(gateway: str) -> str:
    return f"{gateway}-ai-config"


def wanted(params: GatewayParameters | None, config: AIConfig | None) -> bool:
    """A config (the Gateway's routes use an AI Backend) or `aiExtension.enabled`."""
    ext = params.spec.kube.ai_extension if params else None
    return config is not None or bool(ext and ext.enabled)


def port_conflict(params: GatewayParameters | None, config: AIConfig | None,
                  listener_ports: tuple[int, ...]) -> str | None:
    """A Gateway listener on a port the extension binds in the same Pod network."""
    if not wanted(params, config):
        return None
    ext = params.spec.kube.ai_extension if params else None
    for port, what in ((DEFAULT_EXTENSION_PORT, "its ext_proc server (127.0.0.1)"),
                       (metrics_port(ext), f"its metrics ({METRICS_PORT_NAME})")):
        if port in listener_ports:
            return (f"listener port {port} is taken in the proxy Pod by the AI extension, {what}; "
                    "use another listener port")
    return None


def metrics_port(ext: AiExtension | None) -> int:
    for p in ext.ports if ext else []:
        if p.get("name") == METRICS_PORT_NAME:
            return int(p["containerPort"])
    return METRICS_PORT


def container(ext: AiExtension | None, image: str, pull_policy: str | None,
              security_context: dict[str, Any] | None) -> dict[str, Any]:
    ext = ext or AiExtension()
    metrics = metrics_port(ext)
    ports = [dict(p) for p in ext.ports]
    if not any(p.get("name") == METRICS_PORT_NAME for p in ports):
        ports.append({"name": METRICS_PORT_NAME, "containerPort": metrics, "protocol": "TCP"})
    out = helper_container.container(CONTAINER, "ai-extension", image, pull_policy, security_context,
                                     config=CONFIG_DIR / CONFIG_FILE, listen_port=DEFAULT_EXTENSION_PORT,
                                     metrics_port=metrics, ports=ports, volume=VOLUME)
    if ext.resources and (ext.resources.limits or ext.resources.requests or ext.resources.claims):
        out["resources"] = ext.resources.model_dump(by_alias=True, exclude_defaults=True)
    if ext.env:
        out["env"] = [dict(e) for e in ext.env]
    return out


def volume(gateway: str) -> dict[str, Any]:
    return {"name": VOLUME, "secret": {"secretName": secret_name(gateway)}}


def secret(metadata: dict[str, Any], config: AIConfig) -> dict[str, Any]:
    """The Secret the extension reads its config from (`metadata`: the proxy's, renamed)."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": "Opaque",
            "data": {CONFIG_FILE: base64.b64encode(config.to_json().encode()).decode()}}
