"""The Clusters a Gateway's routes use, kept in step with the routes (translate/aggregate.py).

Routes that resolve the same Service carry equal Cluster values, so a Gateway
serves one Cluster per name: that of its oldest user still attached. A pass
used to find it for every name of the Gateway, and to sort the names, however
few routes changed: at 3,000 Clusters that was a millisecond of every change
(cProfile of a one-route pass). Here each name's Cluster is kept as routes come
and go, and the sorted names only when a name comes or goes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lychgate import ir
from lychgate.api.base import ObjectKey


@dataclass
class ClusterUsers:
    """One Gateway's Clusters: the routes using each name, and the Cluster served for it."""

    users: dict[str, dict[ObjectKey, ir.Cluster]] = field(default_factory=dict)
    served: dict[str, ir.Cluster] = field(default_factory=dict)  # name -> its oldest user's Cluster
    _sorted: list[str] | None = None  # the names in order; None: to sort again

    def add(self, route: ObjectKey, cluster: ir.Cluster) -> None:
        users = self.users.get(cluster.name)
        if users is None:
            users = self.users[cluster.name] = {}
            self.served[cluster.name] = cluster
            self._sorted = None
        users[route] = cluster
        if next(iter(users)) == route:  # the oldest user's own Cluster again (a route re-added)
            self.served[cluster.name] = cluster

    def remove(self, route: ObjectKey, name: str) -> None:
        users = self.users.get(name)
        if users is None or users.pop(route, None) is None:
            return
        if users:
            self.served[name] = next(iter(users.values()))  # (unchanged unless it was the oldest)
        else:
            del self.users[name], self.served[name]
            self._sorted = None

    def names(self) -> list[str]:
        """The names in sorted order (not to be mutated)."""
        if self._sorted is None:
            self._sorted = sorted(self.served)
        return self._sorted
