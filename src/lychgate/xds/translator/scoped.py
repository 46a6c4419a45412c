"""Route tables split into scopes, so a new host costs Envoy one small table.

Envoy rebuilds a RouteConfiguration whole on every change: at 3,000 hosts a
new route costs its main thread 50-100 ms before traffic follows (RDS and VHDS
alike rebuild every virtual host). A table with many hosts is therefore served
through scoped RDS: `SCOPES` RouteConfigurations, each holding the hosts whose
name hashes into it, and a scope key that says which one a request uses. A
change to one host then re-sends and rebuilds one scope's RouteConfiguration.

The scope key is a hash of the request's host, so every request has a scope
(Envoy has no fallback for a key without one). A small Lua filter, first in the
chain, computes it from :authority the way `bucket()` computes it here: ASCII
lower case, port dropped, a polynomial hash modulo 65521, then modulo SCOPES.
It sets the key header and clears the route cache, since the connection
manager looks the route up before any filter runs. Hosts with a wildcard
(`*.example.com`, `*`) can match requests of any scope, so they are copied
into every scope; a scope thus picks the same virtual host the whole table
would, and Envoy's own host matching (case, port, wildcards) decides as before.
The key header is removed before requests go upstream.

Tables below the threshold keep one RouteConfiguration and no Lua filter.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from collections.abc import Sequence
from typing import Any

from envoy.config.core.v3 import config_source_pb2
from envoy.config.route.v3 import scoped_route_pb2
from envoy.extensions.filters.http.lua.v3 import lua_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate import ir
from lychgate.xds.translator.wire import RawMessage, unchanged_ends

SCOPES = 64
SCOPE_HEADER = "x-lychgate-scope"
FILTER_NAME = "lychgate.route_scope"  # also the route metadata namespace the filter reads
_MODULUS = 65521  # keeps Lua's double arithmetic exact

_LUA = """\
-- lychgate: the route scope of this request (xds/translator/scoped.py)
function envoy_on_request(handle)
  local host = string.lower(handle:headers():get(":authority") or "")
  host = string.gsub(host, ":%d+$", "")
  local h = 0
  for i = 1, #host do
    h = (h * 31 + string.byte(host, i)) % MODULUS
  end
  handle:headers():replace("HEADER", "TABLE/" .. (h % SCOPES))
  handle:clearRouteCache()
  -- Upgrades were let through before the route was known: allow only the
  -- ones the route allows (route metadata, see route.py), as Envoy would.
  local upgrade = handle:headers():get("upgrade")
  if upgrade ~= nil and handle:metadata():get("upgrade") ~= string.lower(upgrade) then
    handle:respond({[":status"] = "403"}, "upgrade failed")
  end
end
"""


@functools.lru_cache(maxsize=1 << 17)
def bucket(host: str) -> int:
    """The scope of an exact host, as the Lua filter computes it for a request."""
    h = 0
    for byte in host.encode().lower():
        h = (h * 31 + byte) % _MODULUS
    return h % SCOPES


def scope_name(table: str, index: int) -> str:
    return f"{table}/{index}"


def _shared(vh: ir.VirtualHost) -> bool:
    return any("*" in d for d in vh.domains)


def _name(vh: ir.VirtualHost) -> str:
    return vh.name


class ScopedTable:
    """The scopes of one route table, kept from pass to pass.

    Each pass hands the table's virtual hosts in; the hosts that are not the
    very objects of the last pass (found at C speed, as WireCache.get_all
    finds them) move in or out of their scopes, so a pass costs what changed,
    not what the table holds. Every scope lists its exact hosts by name, then
    the shared (wildcard) hosts by name: the same lists a fresh split gives."""

    def __init__(self) -> None:
        self.vhosts: tuple[ir.VirtualHost, ...] = ()
        self.exact: list[list[ir.VirtualHost]] = [[] for _ in range(SCOPES)]
        self.shared: list[ir.VirtualHost] = []
        self.exact_routes = 0
        self.shared_routes = 0
        self.versions = [0] * SCOPES  # bumped whenever a scope's list changes
        self.built: dict[int, tuple[int, Any]] = {}  # scope -> (version, its RouteConfiguration)
        self.active = False  # split on the last pass

    def update(self, vhosts: Sequence[ir.VirtualHost]) -> None:
        head, tail = unchanged_ends(vhosts, self.vhosts)
        gone, came = self.vhosts[head:len(self.vhosts) - tail], vhosts[head:len(vhosts) - tail]
        # Two changes far apart leave unchanged hosts between them: those stay put.
        kept = {id(vh) for vh in gone} & {id(vh) for vh in came}
        for vh in gone:
            if id(vh) not in kept:
                self._move(vh, -1)
        for vh in came:
            if id(vh) not in kept:
                self._move(vh, +1)
        self.vhosts = tuple(vhosts)

    def _move(self, vh: ir.VirtualHost, sign: int) -> None:
        if _shared(vh):
            self._place(self.shared, vh, sign)
            self.shared_routes += sign * len(vh.routes)
            self.versions = [v + 1 for v in self.versions]
            return
        self.exact_routes += sign * len(vh.routes)
        for i in {bucket(d) for d in vh.domains}:
            self._place(self.exact[i], vh, sign)
            self.versions[i] += 1

    @staticmethod
    def _place(items: list[ir.VirtualHost], vh: ir.VirtualHost, sign: int) -> None:
        at = bisect.bisect_left(items, vh.name, key=_name)
        if sign > 0:
            items.insert(at, vh)
            return
        while items[at] is not vh:  # names are unique in a table; this is a guard
            at += 1
        del items[at]

    def scoped(self, threshold: int) -> bool:
        """From `threshold` exact hosts on (and down to keep_below(threshold)
        once split), and only while the wildcard hosts copied into every scope
        hold fewer routes than the table has per scope (a table of mostly
        wildcard routes would grow SCOPES-fold instead)."""
        exact = len(self.vhosts) - len(self.shared)
        floor = keep_below(threshold) if self.active else threshold
        self.active = 0 < floor <= exact and SCOPES * self.shared_routes <= self.exact_routes
        return self.active

    def scope(self, index: int) -> list[ir.VirtualHost]:
        return [*self.exact[index], *self.shared]


def keep_below(threshold: int) -> int:
    """A split table stays split down to this many hosts: switching changes the
    listener, which drains its connections, so a table near the threshold must
    not switch back and forth."""
    return threshold * 4 // 5


def scoped_routes(table: str, source: config_source_pb2.ConfigSource) -> hcm_pb.ScopedRoutes:
    """The connection manager's side: scopes by the key header, from ADS."""
    extractor = hcm_pb.ScopedRoutes.ScopeKeyBuilder.FragmentBuilder.HeaderValueExtractor(name=SCOPE_HEADER, index=0)
    out = hcm_pb.ScopedRoutes(name=table, rds_config_source=source)
    out.scope_key_builder.fragments.add(header_value_extractor=extractor)
    out.scoped_rds.scoped_rds_config_source.CopyFrom(source)
    return out


def scope_filter(table: str) -> lua_pb2.Lua:
    code = (_LUA.replace("MODULUS", str(_MODULUS)).replace("SCOPES", str(SCOPES))
            .replace("HEADER", SCOPE_HEADER).replace("TABLE", table))
    return lua_pb2.Lua(default_source_code={"inline_string": code})


@functools.lru_cache(maxsize=256)
def scope_resources(table: str) -> tuple[tuple[str, RawMessage], ...]:
    """One scope per hash value, each naming its RouteConfiguration; the same
    for a table pass after pass, so serialized once."""
    out = []
    for i in range(SCOPES):
        scope = scoped_route_pb2.ScopedRouteConfiguration(
            name=scope_name(table, i), route_configuration_name=scope_name(table, i))
        scope.key.fragments.add(string_key=scope_name(table, i))
        data = scope.SerializeToString(deterministic=True)
        out.append((scope.name, RawMessage(scoped_route_pb2.ScopedRouteConfiguration, data,
                                           hashlib.blake2b(data, digest_size=8).hexdigest())))
    return tuple(out)
