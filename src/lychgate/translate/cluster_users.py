"""The Clusters a Gateway's routes use, kept in step with the routes (translate/aggregate.py).

Routes that resolve the same Service carry equal Cluster values, so a Gateway
serves one Cluster per name: that of its oldest user still attached. A pass
used to find it for every name of the Gateway, and to sort the names, however
few routes changed: at 3,000 Clusters that was a millisecond of every change
(cProfile of a one-route pass). Here each name's Cluster is kept as routes come
and go, and the sorted names only when a name comes or goes for good: a changed
route is removed and added again within a pass, so a name its removal leaves
without users is only let go when the Clusters are next read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lychgate import ir
from lychgate.api.base import ObjectKey


@dataclass
class ClusterUsers:
    """One Gateway's Clusters: the routes using each name, and the Cluster served for it."""

    users: dict[str, dict[ObjectKey, ir.Cluster]] = field(default_factory=dict)
    _served: dict[str, ir.Cluster] = field(default_factory=dict)  # name -> its oldest user's Cluster
    _emptied: set[str] = field(default_factory=set)  # names whose last user left this pass
    _sorted: list[str] | None = None  # the names in order; None: to sort again

    def add(self, route: ObjectKey, cluster: ir.Cluster) -> None:
        users = self.users.get(cluster.name)
        if users is None:
            users = self.users[cluster.name] = {}
            self._sorted = None
        users[route] = cluster
        if next(iter(users)) == route:  # the oldest user (or the only one, come back)
            self._served[cluster.name] = cluster

    def remove(self, route: ObjectKey, name: str) -> None:
        users = self.users.get(name)
        if users is None or users.pop(route, None) is None:
            return
        if users:
            self._served[name] = next(iter(users.values()))  # (unchanged unless it was the oldest)
        else:
            self._emptied.add(name)

    @property
    def served(self) -> dict[str, ir.Cluster]:
        """name -> the Cluster served for it (names left without users this pass included)."""
        return self._served

    def clusters(self) -> tuple[dict[str, ir.Cluster], list[str]]:
        """name -> Cluster, and the names in sorted order (neither to be mutated)."""
        for name in self._emptied:
            if not self.users.get(name):
                del self.users[name], self._served[name]
                self._sorted = None
        self._emptied.clear()
        if self._sorted is None:
            self._sorted = sorted(self._served)
        return self._served, self._sorted
