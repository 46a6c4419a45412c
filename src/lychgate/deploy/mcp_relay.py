"""The MCP relay of `lychgate run` (deploy/local_helper.py): started when the first route
to an MCP Backend appears, it serves every local Envoy's MCP routes and reads the
Backends' targets from the config the control plane writes (`<state dir>/mcp/`)."""

from __future__ import annotations

from pathlib import Path

from lychgate.deploy.local_helper import LocalHelper
from lychgate.mcp.config import MCPConfig


class LocalMCPRelay(LocalHelper):
    def __init__(self, state_dir: Path, port: int | None = None) -> None:
        super().__init__(state_dir, "mcp", "relay", "mcp-relay", "MCP relay", port)

    async def apply(self, config: MCPConfig) -> None:
        """Hand the relay `config`; start it when some route uses an MCP Backend."""
        await self.hand(config.to_json(), bool(config.backends))
