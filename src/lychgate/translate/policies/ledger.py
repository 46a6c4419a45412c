"""Where each TrafficPolicy reached and what it did there, kept from pass to pass.

A *resolution* is one route rule under one Gateway listener, with the effective
policy the rule gets (PolicyIndex._resolve) and a *mark* per policy attachment
that reached it: applied, merged, overridden, failed closed. Virtual hosts (and
waypoint services) use resolutions; a resolution lives while one of its users
lives, and its marks are counted into tallies per (policy, target) and per
(route, policy), from which policy status is written (policies/outcomes.py).

So a pass that rebuilds one virtual host recounts only that host's route rules,
and policy status never needs a walk over every route (translate/aggregate.py
says which virtual hosts a change reaches).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.interned import Interned

if TYPE_CHECKING:
    from lychgate.translate.policies.attachment import Resolved, Target

# (gateway namespace, gateway name, listener): one tuple shared by its keys (Ledger.key)
Where = tuple[str, str, str]
# (where, route, rule index) for a route's own rule; a delegated child's rule adds the
# namespace and name of the route it comes from and the parent rules that delegated it.
# Built by Ledger.key, which shares `where` and the route's ObjectKey among the keys:
# ten fields per rule, and an ObjectKey per rule counted, held 0.9 MiB at 5,000 routes.
ResolutionKey = tuple[Where, ObjectKey, int] | tuple[Where, ObjectKey, int, str, str, tuple[ir.DelegationHop, ...]]
# A virtual host ((gateway, route table, host), translate/aggregate.py) or ("mesh", gateway).
Owner = tuple[Hashable, ...]
Tally = dict["Mark", int]
K = TypeVar("K")


@dataclass(frozen=True)
class Mark:
    """What resolving one route rule did to one policy attachment."""

    failed_closed: bool = False
    blocked_by: frozenset[str] = frozenset()  # other invalid policies that made the rule answer 500
    applied: frozenset[str] = frozenset()  # fields this policy's value set
    merged_into: tuple[tuple[str, str], ...] = ()  # (field, winner policy)
    merged_with: tuple[tuple[str, frozenset[str]], ...] = ()  # (field, policies merged into this value)
    lost: tuple[tuple[str, str], ...] = ()  # (field, why it did not apply)


Record = tuple[str, "Target", Mark]  # policy key, the attachment's target, what happened
# A route's tallies: (policy, mark, count) sorted, one tuple for equal ones (Ledger._route_pool).
RouteTallies = tuple[tuple[str, Mark, int], ...]


class _Use:
    """A resolution in use. Its route and Gateway are read from its key when counted
    (ResolutionKey: they are in it), not kept beside it: 5,000 route rules under a
    Gateway-wide policy held a key, a string and a use each."""

    __slots__ = ("found", "users")

    def __init__(self, found: tuple[Resolved, tuple[Record, ...]], owner: Owner) -> None:
        self.found = found  # (resolution, records): shared by the rules under the same policies
        # The owner using it, or a set of them once there are several: nearly every rule is
        # used by one virtual host, and a set for each held 1 MiB at 5,000 routes.
        self.users: Owner | set[Owner] = owner


class Ledger:
    """Resolutions in use, and the tallies of their marks."""

    def __init__(self) -> None:
        self._uses: dict[ResolutionKey, _Use] = {}
        # owner -> the keys it uses: one key as itself (nearly every virtual host has one
        # route rule), a list of them once there are more
        self._owners: dict[Owner, ResolutionKey | list[ResolutionKey]] = {}
        self.by_target: dict[tuple[str, Target], Tally] = {}
        # route -> what each policy did on its rules (route_tallies): a tuple shared by the
        # routes alike (a Gateway-wide policy's), where two dicts per route held 1.5 MiB at
        # 5,000 routes
        self.by_route: dict[ObjectKey, RouteTallies] = {}
        self._route_pool: Interned[RouteTallies] = Interned()
        # gateway ref -> cluster name -> (cluster, resolutions using it): extension and
        # backend clusters the Gateway's policies need
        self._clusters: dict[str, dict[str, tuple[ir.Cluster, int]]] = {}
        # What the tallies changed for since the status was last written.
        self.touched_policies: set[str] = set()
        self.touched_routes: set[ObjectKey] = set()
        # The `where` tuples and route keys the resolution keys share (key()), each kept
        # while a key holds it.
        self._wheres: Interned[Where] = Interned()
        self._routes: Interned[ObjectKey] = Interned()

    def key(self, where: Where, route: ObjectKey, src: ir.RouteSource) -> ResolutionKey:
        """The key of a route rule's resolution, sharing its parts with the other keys."""
        where = self._wheres(where)
        route = self._routes(route)
        if src.delegated_by or src.name != route.name or src.namespace != route.namespace:
            return (where, route, src.rule, src.namespace, src.name, src.delegated_by)
        return (where, route, src.rule)

    def lookup(self, owner: Owner, key: ResolutionKey) -> Resolved | None:
        """The resolution in use under `key`, now also used by `owner`."""
        use = self._uses.get(key)
        if use is None:
            return None
        users = use.users
        if isinstance(users, set):
            if owner not in users:
                users.add(owner)
                self._own(owner, key)
        elif users != owner:
            use.users = {users, owner}
            self._own(owner, key)
        return use.found[0]

    def add(self, owner: Owner, key: ResolutionKey, found: tuple[Resolved, tuple[Record, ...]]) -> None:
        """`found` (a resolution and its records) is in use under `key`, by `owner`."""
        use = self._uses[key] = _Use(found, owner)
        self._own(owner, key)
        self._count(key, use, 1)

    def _own(self, owner: Owner, key: ResolutionKey) -> None:
        keys = self._owners.get(owner)
        if keys is None:
            self._owners[owner] = key
        elif isinstance(keys, list):
            keys.append(key)
        else:
            self._owners[owner] = [keys, key]

    def release(self, owners: Iterable[Owner]) -> None:
        """These owners are rebuilt or gone: the resolutions only they used are dropped."""
        for owner in owners:
            keys = self._owners.pop(owner, None)
            if keys is None:
                continue
            for key in keys if isinstance(keys, list) else (keys,):
                use = self._uses[key]
                users = use.users
                if isinstance(users, set):
                    users.discard(owner)
                    if users:
                        continue
                # (a single owner is this one: its keys are those it used)
                del self._uses[key]
                self._count(key, use, -1)

    def release_where(self, keep: Callable[[Owner], bool]) -> None:
        """Release every owner for which `keep(owner)` is false (rare: a route table dropped)."""
        self.release([o for o in self._owners if not keep(o)])

    def clusters(self, gateway: str) -> dict[str, ir.Cluster]:
        return {name: cluster for name, (cluster, _) in self._clusters.get(gateway, {}).items()}

    def route_tallies(self, route: ObjectKey) -> dict[str, Tally]:
        """What each policy did on the route's rules: policy -> mark -> how many rules."""
        out: dict[str, Tally] = {}
        for policy, mark, n in self.by_route.get(route, ()):
            out.setdefault(policy, {})[mark] = n
        return out

    def _count(self, key: ResolutionKey, use: _Use, sign: int) -> None:
        resolved, records = use.found
        if records:
            route = key[1]
            counts = {(p, m): n for p, m, n in self.by_route.get(route, ())}
            for policy, target, mark in records:
                _bump(self.by_target, (policy, target), mark, sign)
                n = counts.get((policy, mark), 0) + sign
                if n:
                    counts[(policy, mark)] = n
                else:
                    del counts[(policy, mark)]
                self.touched_policies.add(policy)
            if counts:
                tallies = tuple(sorted(((p, m, n) for (p, m), n in counts.items()), key=_by_policy))
                self.by_route[route] = self._route_pool(tallies)
            else:
                self.by_route.pop(route, None)
            self.touched_routes.add(route)
        if resolved.clusters:
            mine = self._clusters.setdefault(f"{key[0][0]}/{key[0][1]}", {})
            for name, cluster in resolved.clusters.items():
                kept, users = mine.get(name, (cluster, 0))
                users += sign
                if users:  # the newest value of a name is kept (all its users agree)
                    mine[name] = (cluster if sign > 0 else kept, users)
                else:
                    del mine[name]


def _by_policy(entry: tuple[str, Mark, int]) -> tuple[str, int]:
    """A stable order of a route's tallies (marks do not order: by their hash within a policy)."""
    return entry[0], hash(entry[1])


def _bump(tallies: dict[K, Tally], key: K, mark: Mark, sign: int) -> None:
    tally = tallies.setdefault(key, {})
    n = tally.get(mark, 0) + sign
    if n:
        tally[mark] = n
    else:
        del tally[mark]
        if not tally:
            del tallies[key]
