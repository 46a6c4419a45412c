"""Route rules the proxy refused, served as a 500 until their input changes.

Translation catches what it knows Envoy refuses (lychgate/envoy_limits.py).
What it misses is found by Envoy itself: strict validation's preflight, or a
NACK from a running proxy, blamed on single route entries by
`envoy --mode validate` (xds/validate.py). The control plane then quarantines
the rules those entries came from: the next pass compiles each one as a direct
500 with a status that carries Envoy's message, so everything else on the
listener reaches the proxy again, without anyone touching a file.

An entry lasts while its input is what Envoy refused: it is lifted when the
rule is edited (its fingerprint changes), when the route or rule is gone, or
when anything besides routes and endpoints changes (a policy, Service, Secret
or Gateway may be what made the rule unacceptable): the rule is then tried
again, and quarantined again if Envoy still refuses it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from lychgate.api.base import Model, ObjectKey
from lychgate.api.gateway import GRPCRoute, HTTPRoute
from lychgate.store import Store

# Kinds whose changes do not lift a quarantine: routes are judged by their own
# rule's fingerprint, endpoints never change what Envoy accepts, and these kinds
# change often.
_OWN_INPUT_KINDS = frozenset({"HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute",
                              "EndpointSlice", "Pod"})
_ROUTE_KINDS = {"httproute": HTTPRoute, "grpcroute": GRPCRoute}

RuleKey = tuple[ObjectKey, int]  # the route, the rule's index


@dataclass(frozen=True)
class Entry:
    """One quarantined rule."""

    fingerprint: str  # of the rule as it was refused
    epoch: int  # the store revision of the last non-route change when refused
    gateway: str
    error: str  # Envoy's message
    envoy_routes: tuple[str, ...]  # the route entries Envoy refused
    found_by: str  # "preflight" (strict validation) or "nack" (a proxy rejected it)
    since: float

    def reason(self) -> str:
        how = "strict validation found that Envoy rejects it" if self.found_by == "preflight" \
            else f"the proxy of Gateway {self.gateway} rejected it"
        return (f"quarantined: {how} ({self.error}); it answers 500 until the rule is fixed, "
                "and the rest of the listener is served")


def rule_of(envoy_route: str) -> tuple[str, str, str, int] | None:
    """(kind, namespace, name, rule) from an Envoy route name
    "httproute/NS/NAME/rule/I/match/J"; None for routes lychgate did not name so."""
    parts = envoy_route.split("/")
    if len(parts) != 7 or parts[0] not in _ROUTE_KINDS or parts[3] != "rule" or not parts[4].isdigit():
        return None
    return _ROUTE_KINDS[parts[0]].KIND, parts[1], parts[2], int(parts[4])


def fingerprint(rule: Model) -> str:
    return hashlib.blake2b(rule.model_dump_json().encode(), digest_size=8).hexdigest()


class Quarantine:
    def __init__(self) -> None:
        self._by_route: dict[ObjectKey, dict[int, Entry]] = {}
        self._dirty: set[ObjectKey] = set()

    def add(self, store: Store, envoy_route: str, error: str, gateway: str, found_by: str) -> bool:
        """Quarantine the rule an Envoy route entry came from; False when it is
        not a rule of a route in the store, or already quarantined as it is."""
        parsed = rule_of(envoy_route)
        if parsed is None:
            return False
        kind, ns, name, index = parsed
        key = ObjectKey(kind, ns, name)
        rules = _rules(store, key)
        if rules is None or index >= len(rules):
            return False
        entries = self._by_route.setdefault(key, {})
        current, now = fingerprint(rules[index]), epoch(store)
        old = entries.get(index)
        if old is not None and old.fingerprint == current and old.epoch == now:
            if envoy_route not in old.envoy_routes:
                entries[index] = dataclasses.replace(old, envoy_routes=(*old.envoy_routes, envoy_route))
            return False
        entries[index] = Entry(current, now, gateway, error, (envoy_route,), found_by, time.time())
        self._dirty.add(key)
        return True

    def prune(self, store: Store) -> set[ObjectKey]:
        """Lift the entries whose input changed; the routes to compile again
        (those and the ones quarantined since the last call)."""
        now = epoch(store) if self._by_route else 0
        for key, entries in list(self._by_route.items()):
            rules = _rules(store, key)
            for index, entry in list(entries.items()):
                if rules is None or index >= len(rules) or entry.epoch != now \
                        or fingerprint(rules[index]) != entry.fingerprint:
                    del entries[index]
                    self._dirty.add(key)
            if not entries:
                del self._by_route[key]
        dirty, self._dirty = self._dirty, set()
        return dirty

    def rules_of(self, key: ObjectKey) -> Mapping[int, Entry]:
        """The quarantined rules of one route, by index."""
        return self._by_route.get(key, {})

    def entries(self) -> Iterator[tuple[ObjectKey, int, Entry]]:
        for key in sorted(self._by_route):
            for index, entry in sorted(self._by_route[key].items()):
                yield key, index, entry

    def counts(self) -> Counter[str]:
        """Quarantined rules by Gateway."""
        return Counter(e.gateway for entries in self._by_route.values() for e in entries.values())

    def as_items(self) -> list[dict[str, object]]:
        """For /snapshots/krt and `lychgate debug`."""
        return [{"kind": key.kind, "namespace": key.namespace, "name": key.name, "rule": index,
                 "gateway": e.gateway, "foundBy": e.found_by, "error": e.error,
                 "envoyRoutes": list(e.envoy_routes), "since": e.since}
                for key, index, e in self.entries()]


def _rules(store: Store, key: ObjectKey) -> list[Model] | None:
    route = store.get_key(key)
    return list(route.spec.rules) if isinstance(route, HTTPRoute | GRPCRoute) else None


def epoch(store: Store) -> int:
    """The store revision of the last change to anything but routes and endpoints."""
    return store.last_change(exclude=_OWN_INPUT_KINDS)
