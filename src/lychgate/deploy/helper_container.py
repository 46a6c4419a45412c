"""A lychgate process beside Envoy in a proxy Pod (the AI extension, the MCP relay): the
container both are, as `lychgate <command>` reading a mounted config file, serving on a
loopback port Envoy reaches and its metrics on a Pod port for scrapers."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any


def container(name: str, command: str, image: str, pull_policy: str | None,
              security_context: dict[str, Any] | None, *, config: PurePosixPath, listen_port: int,
              metrics_port: int, ports: list[dict[str, Any]], volume: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "image": image,
        "command": ["lychgate", command],
        "args": ["--config", str(config), "--listen", f"127.0.0.1:{listen_port}",
                 "--metrics-port", str(metrics_port), "--metrics-address", "0.0.0.0"],
        "ports": ports,
        # Serving once its metrics port answers (its server starts right after): a new Pod
        # takes no request it would fail.
        "readinessProbe": {"tcpSocket": {"port": metrics_port}, "periodSeconds": 5, "failureThreshold": 2},
        "volumeMounts": [{"name": volume, "mountPath": str(config.parent), "readOnly": True}],
    }
    if pull_policy:
        out["imagePullPolicy"] = pull_policy
    if security_context:
        out["securityContext"] = security_context
    return out
