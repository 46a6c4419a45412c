"""A deployer that starts no proxy, in a module of its own: the benchmark's controller
process imports it without the harness (httpx, the echo server), whose memory it would hold."""

from __future__ import annotations

from typing import Any

from lychgate import native


class NoProxies:
    """A deployer that starts no proxy, for a ControlPlane driven in process:
    addresses come from spec.addresses, everything else is a no-op. Split route
    tables are keyed as `lychgate run` keys them: by lychgate's Envoy module when
    `make install` built it (scoped.native_key)."""

    def __init__(self) -> None:
        self.scope_module = native.scope_module()

    def address_for(self, gateway: Any) -> str | None:
        return next((a.value for a in gateway.spec.addresses if a.value), "127.0.50.1")

    async def sync(self, intents: Any) -> None:
        return None

    async def close(self) -> None:
        return None

    def proxy_state(self, ref: str) -> str | None:
        return None
