"""filterStage: filters whose place in the HTTP filter chain a policy chooses.

kgateway names five well-known stages (Fault, AuthN, AuthZ, RateLimit, Route)
and a predicate (Before, During, After). Each of the fifteen positions is one
feature with its own filter order among lychgate's fixed filters (the table
below frames them: `Before AuthN` precedes oauth2 and every other
authentication filter, `After AuthZ` follows rbac and ext_authz, ...).

Three kinds of filters are placed this way, each by a source registered here:
headerModifiers' header_mutation filters (header_stage.py), the ext_proc filter
of each ExtProc GatewayExtension (ext_proc.py) and the listener's buffer filter
(buffer.py). Filters at one position run in kgateway's order: higher `weight`
first, then by filter name. The per-route configuration that turns a placed
filter on stays with its feature.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import add_disabled_filter

Position = tuple[str, str]  # (stage, predicate)

# The filter order of each position. Fixed filters for reference: fault 5, CORS 10,
# acl 11, csrf 12, local rate limit 20, decompression 25, oauth2 31, jwt_authn 32,
# basic auth 33, API keys 34, rbac 38, ext_authz 40, global rate limit 45,
# transformation 60, backend features 90-95, then the router.
ORDERS: dict[Position, float] = {
    ("Fault", "Before"): 4, ("Fault", "During"): 6, ("Fault", "After"): 7,
    ("AuthN", "Before"): 30.5, ("AuthN", "During"): 34.5, ("AuthN", "After"): 35,
    ("AuthZ", "Before"): 37, ("AuthZ", "During"): 41, ("AuthZ", "After"): 42,
    ("RateLimit", "Before"): 44, ("RateLimit", "During"): 46, ("RateLimit", "After"): 47,
    ("Route", "Before"): 94, ("Route", "During"): 97, ("Route", "After"): 98,
}


@dataclass(frozen=True)
class Placed:
    """One filter a source puts at a position (off by default, like every policy filter)."""

    position: Position
    name: str
    config: object
    weight: int = 0


# listener -> the filters a source places in its chain
SOURCES: list[Callable[[ir.HTTPListener], Iterable[Placed]]] = []


class _PlacedByPosition:
    """Every source's filters of a listener, by position, found once per listener:
    the fifteen position features ask in turn about the same listener."""

    def __init__(self) -> None:
        self.listener: ir.HTTPListener | None = None
        self.placed: dict[Position, list[Placed]] = {}

    def __call__(self, listener: ir.HTTPListener) -> dict[Position, list[Placed]]:
        if listener is not self.listener:
            placed: dict[Position, list[Placed]] = {}
            for source in SOURCES:
                for p in source(listener):
                    placed.setdefault(p.position, []).append(p)
            for filters in placed.values():
                filters.sort(key=lambda p: (-p.weight, p.name))
            self.listener, self.placed = listener, placed
        return self.placed


_placed = _PlacedByPosition()


def earliest(positions: Iterable[Position]) -> Position:
    return min(positions, key=ORDERS.__getitem__)


class StagePosition(Feature):
    def __init__(self, position: Position) -> None:
        self.position = position
        self.name = f"filter_stage_{position[0]}_{position[1]}".lower()
        self.order = ORDERS[position]

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        for p in _placed(listener).get(self.position, ()):
            add_disabled_filter(hcm, p.name, p.config)


for _position in ORDERS:
    register(StagePosition(_position))
