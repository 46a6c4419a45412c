"""Route tables split into scopes, so a new host costs Envoy one small table.

Envoy rebuilds a RouteConfiguration whole on every change: at 3,000 hosts a
new route costs its main thread 50-100 ms before traffic follows (RDS and VHDS
alike rebuild every virtual host). A table with many hosts is therefore served
through scoped RDS: 2 to 256 RouteConfigurations (scopes), each holding the
hosts whose name hashes into it, and a scope key that says which one a request
uses. A change to one host then re-sends and rebuilds one scope's
RouteConfiguration.

The scope key is a hash of the request's host, computed by Envoy itself before
it looks the route up: an early header mutation of the connection manager sets
the key header, so no filter runs Lua and the route (with its upgrades and
per-route filter settings) is known before the filter chain is built. Two
mutations compute it (`scope_key_mutation`; `native_key` chooses), each its
own hash, and `bucket()` computes either in Python for the route hostnames:
- lychgate's Envoy module (scope_module.py, src/lychgate/native/lychgate_scope.c,
  an `envoy.http.early_header_mutation.dynamic_modules` extension) reads
  `:authority` once and hashes it in one pass: FNV-1a, then MurmurHash3's
  finalizer (`_mixed`), up to 8 bits. Every bit depends on every character, so
  the fullest of 256 scopes holds 1.9-2.1 times the mean of 3,000 names (what
  random placement gives), 1.0-1.2 with 3 bits. Local mode uses it when `make
  install` built it (the deployer hands Envoy its search path); Kubernetes
  mode when the proxy image carries it (Helm `proxy.nativeScopeKey`).
- Otherwise CEL (`scope_key_expression`), which any Envoy computes: Envoy's CEL
  has no string function but `matches`, so each bit is one small RE2 regex,
  and Envoy resolves `request.host` once per bit. Each bit of this hash is the
  parity of the host's characters that are in one set (`_hash`: the XOR of a
  6-bit code per character). The sets were picked among random ones for an
  even spread over families of real-looking host names (numbered services,
  words, tenants, two varying labels): with all 6 bits the fullest scope holds
  1.2-2.1 times the mean, with fewer bits less. A parity hash cannot give more
  bits: a 7th spread numbered names at best 3.6 times the mean, and 4-digit
  names have fewer parity classes than 256 scopes.
Envoy's own instructions per request (`python -m tests.bench.scope_key_cost`:
callgrind, one keep-alive connection, 2,000 hosts, direct response): whole
table 74.8k; split with a constant key 82.1k (the scoped lookup and the key
header); the module 83.1-83.2k whatever the bits, 2 to 8 (82.9k with the parity
hash it computed before); CEL 91.3k at 2 bits, 94.6k at 3,
105.2k at 6 (each bit ~3.5k). Envoy CPU per request under wrk (6 alternating rounds, noisy): whole
13.7-14.4 us, constant key 14.2-14.4, module (2 bits) 14.0-14.5, CEL 2 bits
14.4-15.5.
A key Envoy could read without computing it (the Host as it is) would need a
fallback scope for the Hosts no scope is named after (upper case,
wildcard-only, catch-all), which scoped RDS does not have (it answers 404):
the key must be a closed hash computed before the route lookup. With CEL every
bit costs each request of the table, so a table gets as few bits as keep its
scopes at about SCOPE_ROUTES routes on average (`scope_bits`: 2 bits for
the 2,000 routes a table splits at, 3 up to 4,000, 6 from 16,000; 500 keeps
the key at 3 bits, about 1 % of req/s more than 1 bit, where a new route of a
3,000-route table costs Envoy a scope of ~375 routes instead of ~750). A bigger scope costs propagation little: a new
route among 6,000 (3,000 two-match HTTPRoutes) reached Envoy in 20 ms with
64 scopes, 23 with 16, 26 with 8 and 30 with 4, against 67 ms for the whole
table (Envoy rebuilds a scope of 1,500 routes in ~3.5 ms). With lychgate's module the key
costs the same at any bits, and a table gets as many as keep its scopes at about
NATIVE_SCOPE_ROUTES routes (8 bits, 256 scopes, from 6,400 routes): what a change
costs is then mostly sending the scope to every proxy of the Gateway. A new route
among 3,000 two-match HTTPRoutes re-sent a scope of 47 KiB at 16 scopes, 12-14
KiB at 64 and 3 KiB at 256; with 256 instead of 64 it reached 1,000 simulated
proxies (`python -m tests.bench.fleet`) at p50 175-180 ms instead of 209-220,
with 169-175 ms of the controller's CPU instead of 195-205 (64 instead of 16
had taken 200 proxies from p50 33-34 ms to 26-27). The bits are
chosen when a table splits (a table loaded at 10,000 routes gets 5) and kept
while it stays split: a new count would change the listener, and the
connections of the old filter chain, draining, would look scopes up with the
old key.
Both keys ignore ASCII case and a port (a trailing ':<digits>'), as Envoy's
host matching does (`ignore_port_in_host_matching`); a Host that no exact host
can match (other characters, IPv6 literals, empty) lands in scope 0 and finds the wildcard hosts and the
catch-all there, as in every scope.

Hosts with a wildcard (`*.example.com`, `*`) can match requests of any scope,
so they are copied into every scope; a scope thus picks the same virtual host
the whole table would, and Envoy's own host matching (case, port, wildcards)
decides as before. The key header is removed before requests go upstream, and
a client's own value is overwritten.

Tables below the threshold keep one RouteConfiguration and no scope key.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import heapq
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from envoy.config.core.v3 import base_pb2, config_source_pb2, extension_pb2
from envoy.config.route.v3 import scoped_route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.extensions.http.early_header_mutation.header_mutation.v3 import (
    header_mutation_pb2 as early_pb,
)

from lychgate import ir
from lychgate.identity import unchanged_ends
from lychgate.xds.translator import scope_module
from lychgate.xds.translator.wire import RawMessage

MAX_BITS = 6  # len(_SETS): at most 64 scopes
NATIVE_MAX_BITS = 8  # lychgate's module's mixed hash: at most 256 scopes
SCOPE_ROUTES = 500  # routes a scope may hold on average before its table gets another bit
NATIVE_SCOPE_ROUTES = 25  # the same with lychgate's module, whose key costs the same at any bits
SCOPE_HEADER = "x-lychgate-scope"
MIN_HOSTS = 16  # fewer exact hosts leave most scopes empty: such tables stay whole

# The characters of host names (Gateway API hostnames are RFC 1123: lower case
# letters, digits, '-' and '.'); bit j of the hash is the parity of the
# host's characters that are in _SETS[j].
_ALPHABET = "-.0123456789abcdefghijklmnopqrstuvwxyz"
_SETS = (".03567abdegjmnopstuwxyz", "4579cdfhijnquwxyz", "-.01235689deghjkmrvx",
         ".126bdjklqtvxyz", "34678abcdfghjlmnoqsuyz", "146789cdefhjlmnpqrwxz")
# The port Envoy ignores when it matches hosts (it cuts at the last ':').
_PORT = "(?::[0-9]*)?$"


def _class(chars: str) -> str:
    """An RE2 character class of `chars` and their upper case, as ranges. No
    escapes, as the regexes sit in CEL string literals: '-' goes first, where
    it is literal, and '.' is literal in a class ('/' parts it from the digits)."""
    out = ["-"] if "-" in chars else []
    chars = "".join(sorted({*chars, *chars.upper()} - {"-"}))
    i = 0
    while i < len(chars):
        j = i
        while j + 1 < len(chars) and ord(chars[j + 1]) == ord(chars[j]) + 1:
            j += 1
        out.append(chars[i] if i == j else f"{chars[i]}-{chars[j]}" if j > i + 1 else chars[i] + chars[j])
        i = j + 1
    return "[" + "".join(out) + "]"


def parity_regex(chars: str) -> str:
    """RE2 that matches a host with an odd number of characters in `chars`."""
    hit, miss = _class(chars), _class("".join(c for c in _ALPHABET if c not in chars))
    return f"^{miss}*(?:{hit}{miss}*{hit}{miss}*)*{hit}{miss}*{_PORT}"


@functools.lru_cache(maxsize=MAX_BITS + 1)
def scope_key_expression(bits: int) -> str:
    """The CEL expression Envoy evaluates per request: bucket(request.host, bits)."""
    return " + ".join(f"(request.host.matches('{parity_regex(chars)}') ? {1 << j} : 0)"
                      for j, chars in enumerate(_SETS[:bits]))


def scope_bits(routes: int, native: bool = False) -> int:
    """The bits of a table split at `routes` routes: as few as keep a scope at
    SCOPE_ROUTES routes on average (NATIVE_SCOPE_ROUTES with the `native` key),
    at least 1 (kept while the table stays split)."""
    per_scope, most = (NATIVE_SCOPE_ROUTES, NATIVE_MAX_BITS) if native else (SCOPE_ROUTES, MAX_BITS)
    want = 1
    while want < most and routes > per_scope << want:
        want += 1
    return want


# Each character's bits: the sets it is in.
_CODES = {c: sum(1 << j for j, chars in enumerate(_SETS) if c in chars) for c in _ALPHABET}


@functools.lru_cache(maxsize=1 << 17)
def _hash(host: str) -> int:
    out = 0
    for c in host.lower():
        code = _CODES.get(c)
        if code is None:  # no regex matches: every bit is 0
            return 0
        out ^= code
    return out


_VALID = frozenset(_ALPHABET)


@functools.lru_cache(maxsize=1 << 17)
def _mixed(host: str) -> int:
    """lychgate's module's own hash: FNV-1a over the host's characters (lower case),
    then MurmurHash3's 32-bit finalizer; 0 for a host with other characters."""
    host = host.lower()
    if not host or not _VALID.issuperset(host):
        return 0
    h = 0x811C9DC5
    for c in host.encode():
        h = ((h ^ c) * 0x01000193) & 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


def bucket(host: str, bits: int = MAX_BITS, native: bool = False) -> int:
    """The scope of an exact host in a table of `bits` bits, as Envoy computes
    it for a request (the low `bits` of the hash): the mixed hash of lychgate's
    module with `native`, else the parity hash CEL computes."""
    return (_mixed(host) if native else _hash(host)) & ((1 << bits) - 1)


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
    finds them) move in or out of their buckets, so a pass costs what changed,
    not what the table holds. Hosts are kept in the buckets of the full hash
    (2**most: 64 of the parity hash, 256 of the module's mixed one) whatever the
    table's bits; a scope is the buckets that agree on its bits. Every scope
    lists its exact hosts by name, then the shared (wildcard) hosts by name: the
    same lists a fresh split gives."""

    def __init__(self, native: bool = False) -> None:
        self.native = native  # keyed by lychgate's module (its mixed hash), else by CEL (parity)
        self.most = NATIVE_MAX_BITS if native else MAX_BITS
        self.vhosts: tuple[ir.VirtualHost, ...] = ()
        self.exact: list[list[ir.VirtualHost]] = [[] for _ in range(1 << self.most)]
        self.shared: list[ir.VirtualHost] = []
        self.exact_routes = 0
        self.shared_routes = 0
        self.stale: set[int] = set()  # buckets whose list changed since their scopes were last built
        self.all_stale = True  # the shared list changed: every scope
        self.built: dict[str, Any] = {}  # scope name -> its RouteConfiguration, as last built
        self.active = False  # split on the last pass
        self.bits = 0  # of the last split pass

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
            self.all_stale = True
            return
        self.exact_routes += sign * len(vh.routes)
        for i in {bucket(d, self.most, self.native) for d in vh.domains}:
            self._place(self.exact[i], vh, sign)
            self.stale.add(i)

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
        """From `threshold` routes of exact hosts on (and down to
        keep_below(threshold) once split): Envoy's cost of a change grows with
        the routes of the table, whether they sit on many hosts or on few.
        Only with MIN_HOSTS exact hosts or more (one host's routes are one scope
        whatever is done), and only while the wildcard hosts copied into every
        scope hold fewer routes than the table has per scope (a table of mostly
        wildcard routes would grow many-fold instead): a table splits into fewer
        scopes where that keeps them so. Sets the table's bits."""
        hosts = len(self.vhosts) - len(self.shared)
        floor = keep_below(threshold) if self.active else threshold
        # A split table keeps its bits: a new count changes the listener, and connections
        # of the old filter chain, still draining, would look scopes up with the old key.
        bits = self.bits if self.active else scope_bits(self.exact_routes, self.native)
        if not self.active:
            while bits > 1 and self.shared_routes << bits > self.exact_routes:
                bits -= 1
        self.active = (0 < floor <= self.exact_routes and hosts >= MIN_HOSTS
                       and self.shared_routes << bits <= self.exact_routes)
        if not self.active or bits != self.bits:
            self.built, self.all_stale = {}, True  # every scope changes
        self.bits = bits if self.active else 0
        return self.active

    def _members(self, index: int) -> range:
        """The buckets of scope `index`: those whose low bits are `index`."""
        return range(index, 1 << self.most, 1 << self.bits)

    def stale_scopes(self) -> Iterable[int]:
        """The scopes (of the table's bits) whose hosts changed since they were last built; each is
        handed out once. Looking only at the buckets that changed: with 256 scopes, asking each
        scope whether it changed cost every pass ~0.5 ms."""
        if self.all_stale:
            out: Iterable[int] = range(1 << self.bits)
        else:
            mask = (1 << self.bits) - 1
            out = sorted({bucket & mask for bucket in self.stale})
        self.stale, self.all_stale = set(), False
        return out

    def scope(self, index: int) -> list[ir.VirtualHost]:
        exact: list[ir.VirtualHost] = []
        for vh in heapq.merge(*(self.exact[i] for i in self._members(index)), key=_name):
            if not exact or exact[-1] is not vh:  # a host of several domains sits in several buckets
                exact.append(vh)
        return [*exact, *self.shared]


def keep_below(threshold: int) -> int:
    """A split table stays split down to this many routes: switching changes the
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


def native_key(setting: bool | None, module: Path | None) -> bool:
    """Whether split tables take their key from lychgate's Envoy module
    (scope_module.py) rather than CEL: as set (Helm proxy.nativeScopeKey in
    Kubernetes mode, where the proxy image must carry the module), else when the
    deployer hands its proxies the built `module` (local mode)."""
    return module is not None if setting is None else setting


def scope_key_mutation(table: str, bits: int, native: bool = False) -> extension_pb2.TypedExtensionConfig:
    """The connection manager's early header mutation that sets the key header,
    before Envoy looks the route up: lychgate's module when the proxies have it
    (`native`), else CEL."""
    if native:
        return scope_module.scope_key_mutation(SCOPE_HEADER, f"{table}/", _ALPHABET, bits)
    mutation = early_pb.HeaderMutation()
    mutation.mutations.add(append=base_pb2.HeaderValueOption(
        header=base_pb2.HeaderValue(key=SCOPE_HEADER, value=f"{table}/%CEL({scope_key_expression(bits)})%"),
        append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD))
    out = extension_pb2.TypedExtensionConfig(name="lychgate.route_scope")
    out.typed_config.Pack(mutation)
    return out


@functools.lru_cache(maxsize=256)
def scope_resources(table: str, bits: int) -> tuple[tuple[str, RawMessage], ...]:
    """One scope per hash value, each naming its RouteConfiguration; the same
    for a table pass after pass, so serialized once."""
    out = []
    for i in range(1 << bits):
        scope = scoped_route_pb2.ScopedRouteConfiguration(
            name=scope_name(table, i), route_configuration_name=scope_name(table, i))
        scope.key.fragments.add(string_key=scope_name(table, i))
        data = scope.SerializeToString(deterministic=True)
        out.append((scope.name, RawMessage(scoped_route_pb2.ScopedRouteConfiguration, data,
                                           hashlib.blake2b(data, digest_size=8).hexdigest())))
    return tuple(out)
