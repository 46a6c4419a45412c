"""httpUpgrade: the protocol upgrades (websocket, CONNECT, ...) the routes accept, with
kgateway's rules: each type once (case-insensitive), and not beside a request buffer,
which would hold the upgraded stream."""

from __future__ import annotations

from typing import Any

from lychgate.api.policy import TrafficPolicy
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, Invalid


class HTTPUpgradeField(PolicyField):
    name, attr = "httpUpgrade", "http_upgrade"

    def value(self, policy: TrafficPolicy) -> dict[str, Any] | None:
        upgrades = policy.spec.http_upgrade
        if upgrades is None:
            return None
        buffer = policy.spec.buffer
        return {"upgrades": [u.model_dump(by_alias=True, exclude_unset=True) for u in upgrades],
                "buffered": buffer is not None and buffer.disable is None}

    def merge(self, high: dict[str, Any], low: dict[str, Any]) -> dict[str, Any]:
        return high  # a list of upgrades is one value: the higher-priority policy's

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if value["buffered"]:
            raise Invalid(path, "cannot be used together with buffer (it would hold the upgraded stream)")
        seen: set[str] = set()
        out: list[tuple[str, bool]] = []
        for i, upgrade in enumerate(value["upgrades"]):
            kind = upgrade["type"]
            if kind.lower() in seen:
                raise Invalid(f"{path}[{i}].type", f"{kind!r} is listed twice")
            seen.add(kind.lower())
            terminate = bool((upgrade.get("connect") or {}).get("terminate"))
            if terminate and kind.upper() != "CONNECT":
                raise Invalid(f"{path}[{i}].connect", "only a CONNECT upgrade can be terminated")
            out.append((kind, terminate))
        return {"http_upgrades": tuple(out)}


register(HTTPUpgradeField())
