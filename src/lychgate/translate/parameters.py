"""GatewayParameters of a class and of a Gateway, merged as kgateway merges them.

The class's parameters are the defaults and the Gateway's are laid over them,
field by field: objects merge key by key, a list or a value the Gateway sets
replaces the class's, and what the Gateway leaves unset keeps the class's value
(a Gateway naming its own parameters no longer loses the class's defaults).
Overlays merge the same way, so the class's overlay applies first and the
Gateway's over it.
"""

from __future__ import annotations

from typing import Any

from lychgate.api.lychgate import GatewayParameters


def deep_merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = deep_merge(base[key], value) if key in base else value
        return out
    return over


def merge(*layers: GatewayParameters | None) -> GatewayParameters | None:
    """The layers (lowest first) as one GatewayParameters, named after the last one."""
    present = [p for p in layers if p is not None]
    if len(present) < 2:
        return present[0] if present else None
    spec: dict[str, Any] = {}
    for params in present:
        spec = deep_merge(spec, params.spec.model_dump(by_alias=True, exclude_unset=True, mode="json"))
    top = present[-1]
    return GatewayParameters.model_validate({
        "apiVersion": top.api_version, "kind": top.kind,
        "metadata": top.metadata.model_dump(by_alias=True, exclude_none=True, mode="json"), "spec": spec})
