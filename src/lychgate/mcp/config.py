"""What the MCP relay needs to know, as the control plane hands it over.

One `MCPConfig` per process: every MCP Backend the Gateways' routes use, by id
(`<namespace>/<name>`, the value of the request header BACKEND_HEADER Envoy sets on
each MCP route, overwriting whatever the client sent), each with its targets
resolved to addresses (static hosts as written; Service selectors to the matching
Services' MCP ports). The control plane writes it as JSON to a file the relay
watches (local mode: the state directory; Kubernetes: a ConfigMap mounted into the
relay's container).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

Protocol = Literal["StreamableHTTP", "SSE"]

# Set by Envoy on every route to an MCP Backend; the relay serves that Backend.
BACKEND_HEADER = "x-lychgate-mcp-backend"
DEFAULT_RELAY_PORT = 9978  # the relay's port beside Envoy in a proxy pod (Kubernetes)
DEFAULT_PATHS: dict[str, str] = {"StreamableHTTP": "/mcp", "SSE": "/sse"}  # kgateway's defaults


@dataclass(frozen=True)
class Target:
    """One MCP server behind a Backend."""

    name: str  # tools, prompts and resources of this target are named `<name>_<their name>`
    host: str
    port: int
    path: str  # the MCP endpoint (StreamableHTTP) or the SSE stream (SSE)
    protocol: Protocol = "StreamableHTTP"
    # Every replica of a Service target ((address, port), `host`/`port` the first): each new
    # session is opened on the next one, and stays on it (the server holds its session).
    replicas: tuple[tuple[str, int], ...] = ()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"

    def on(self, replica: tuple[str, int]) -> Target:
        """This target at one of its replicas."""
        return replace(self, host=replica[0], port=replica[1], replicas=())


@dataclass(frozen=True)
class Backend:
    id: str  # "<namespace>/<name>"
    targets: tuple[Target, ...]


@dataclass(frozen=True)
class MCPConfig:
    backends: dict[str, Backend] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"backends": [asdict(b) for b in sorted(self.backends.values(), key=lambda b: b.id)]},
                          indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> MCPConfig:
        data: dict[str, Any] = json.loads(text) if text.strip() else {}
        backends = (Backend(b["id"], tuple(Target(**{**t, "replicas": tuple(map(tuple, t.get("replicas", ())))})
                                           for t in b["targets"])) for b in data.get("backends", ()))
        return cls({b.id: b for b in backends})
