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

if TYPE_CHECKING:
    from lychgate.translate.policies.attachment import Resolved, Target

# (gateway namespace, gateway name, listener, route kind, route namespace, route name,
#  namespace and name of the route the rule comes from (a delegated child's), rule index,
#  the parent rules that delegated it)
ResolutionKey = tuple[str, str, str, str, str, str, str, str, int, tuple[ir.DelegationHop, ...]]
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


class _Use:
    __slots__ = ("gateway", "records", "resolved", "route", "users")

    def __init__(self, resolved: Resolved, records: tuple[Record, ...], route: ObjectKey, gateway: str,
                 owner: Owner) -> None:
        self.resolved = resolved
        self.records = records
        self.route = route
        self.gateway = gateway
        # The owner using it, or a set of them once there are several: nearly every rule is
        # used by one virtual host, and a set for each held 1 MiB at 5,000 routes.
        self.users: Owner | set[Owner] = owner


class Ledger:
    """Resolutions in use, and the tallies of their marks."""

    def __init__(self) -> None:
        self._uses: dict[ResolutionKey, _Use] = {}
        self._owners: dict[Owner, list[ResolutionKey]] = {}
        self.by_target: dict[tuple[str, Target], Tally] = {}
        self.by_route: dict[ObjectKey, dict[str, Tally]] = {}
        # gateway ref -> cluster name -> (cluster, resolutions using it): extension and
        # backend clusters the Gateway's policies need
        self._clusters: dict[str, dict[str, tuple[ir.Cluster, int]]] = {}
        # What the tallies changed for since the status was last written.
        self.touched_policies: set[str] = set()
        self.touched_routes: set[ObjectKey] = set()

    def lookup(self, owner: Owner, key: ResolutionKey) -> Resolved | None:
        """The resolution in use under `key`, now also used by `owner`."""
        use = self._uses.get(key)
        if use is None:
            return None
        users = use.users
        if isinstance(users, set):
            if owner not in users:
                users.add(owner)
                self._owners.setdefault(owner, []).append(key)
        elif users != owner:
            use.users = {users, owner}
            self._owners.setdefault(owner, []).append(key)
        return use.resolved

    def add(self, owner: Owner, key: ResolutionKey, route: ObjectKey, gateway: str, resolved: Resolved,
            records: tuple[Record, ...]) -> None:
        use = self._uses[key] = _Use(resolved, records, route, gateway, owner)
        self._owners.setdefault(owner, []).append(key)
        self._count(use, 1)

    def release(self, owners: Iterable[Owner]) -> None:
        """These owners are rebuilt or gone: the resolutions only they used are dropped."""
        for owner in owners:
            for key in self._owners.pop(owner, ()):
                use = self._uses[key]
                users = use.users
                if isinstance(users, set):
                    users.discard(owner)
                    if users:
                        continue
                # (a single owner is this one: its keys are those it used)
                del self._uses[key]
                self._count(use, -1)

    def release_where(self, keep: Callable[[Owner], bool]) -> None:
        """Release every owner for which `keep(owner)` is false (rare: a route table dropped)."""
        self.release([o for o in self._owners if not keep(o)])

    def clusters(self, gateway: str) -> dict[str, ir.Cluster]:
        return {name: cluster for name, (cluster, _) in self._clusters.get(gateway, {}).items()}

    def _count(self, use: _Use, sign: int) -> None:
        for policy, target, mark in use.records:
            _bump(self.by_target, (policy, target), mark, sign)
            _bump(self.by_route.setdefault(use.route, {}), policy, mark, sign)
            if not self.by_route[use.route]:
                del self.by_route[use.route]
            self.touched_policies.add(policy)
        if use.records:
            self.touched_routes.add(use.route)
        if use.resolved.clusters:
            mine = self._clusters.setdefault(use.gateway, {})
            for name, cluster in use.resolved.clusters.items():
                kept, users = mine.get(name, (cluster, 0))
                users += sign
                if users:  # the newest value of a name is kept (all its users agree)
                    mine[name] = (cluster if sign > 0 else kept, users)
                else:
                    del mine[name]


def _bump(tallies: dict[K, Tally], key: K, mark: Mark, sign: int) -> None:
    tally = tallies.setdefault(key, {})
    n = tally.get(mark, 0) + sign
    if n:
        tally[mark] = n
    else:
        del tally[mark]
        if not tally:
            del tallies[key]
