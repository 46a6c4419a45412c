"""The MCP relay in a Gateway's proxy Pod (Kubernetes mode): a container beside Envoy,
there while the Gateway's routes use an MCP Backend.

Envoy's MCP clusters reach it on 127.0.0.1:9978; it serves its metrics (tool calls,
target availability) on the Pod's port `mcp-monitoring` (9093) for scrapers. Its config
(this Gateway's MCP Backends with their targets resolved; no credentials) is the key
`mcp.json` of the proxy's own ConfigMap, added after the bootstrap's digest is taken:
a target that moves reaches the relay (kubelet swaps the mounted file, the relay
watches it) without rolling the proxy's Pods.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from lychgate.deploy import helper_container
from lychgate.mcp.config import DEFAULT_RELAY_PORT, MCPConfig

CONTAINER = "mcp-relay"
CONFIG_DIR = PurePosixPath("/etc/lychgate-mcp")
CONFIG_KEY = "mcp.json"
METRICS_PORT = 9093
METRICS_PORT_NAME = "mcp-monitoring"


def add_config(config_map: dict[str, Any], config: MCPConfig) -> None:
    config_map["data"][CONFIG_KEY] = config.to_json()


def port_conflict(listener_ports: tuple[int, ...]) -> str | None:
    """A Gateway listener on a port the relay binds in the same Pod network."""
    for port, what in ((DEFAULT_RELAY_PORT, "its MCP endpoint (127.0.0.1)"), (METRICS_PORT, "its metrics")):
        if port in listener_ports:
            return (f"listener port {port} is taken in the proxy Pod by the MCP relay, {what}; "
                    "use another listener port")
    return None


def container(image: str, pull_policy: str | None, security_context: dict[str, Any] | None,
              config_volume: str) -> dict[str, Any]:
    return helper_container.container(
        CONTAINER, "mcp-relay", image, pull_policy, security_context, config=CONFIG_DIR / CONFIG_KEY,
        listen_port=DEFAULT_RELAY_PORT, metrics_port=METRICS_PORT,
        ports=[{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}], volume=config_volume)
