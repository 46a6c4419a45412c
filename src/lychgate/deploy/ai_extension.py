"""The AI extension of `lychgate run` (deploy/local_helper.py): started when the first
AI Backend appears, it serves ext_proc to every local Envoy's AI clusters and reads the
providers with their credentials from the config the control plane writes, so they
never enter Envoy's configuration (`<state dir>/ai/`)."""

from __future__ import annotations

from pathlib import Path

from lychgate.ai.config import AIConfig
from lychgate.deploy.local_helper import LocalHelper


class LocalAIExtension(LocalHelper):
    def __init__(self, state_dir: Path, port: int | None = None) -> None:
        super().__init__(state_dir, "ai", "extension", "ai-extension", "AI extension", port)

    async def apply(self, config: AIConfig) -> None:
        """Hand the extension `config`; start it when there is something to serve."""
        await self.hand(config.to_json(), bool(config.providers))
