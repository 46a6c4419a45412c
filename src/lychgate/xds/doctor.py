"""Finding what Envoy refused, and quarantining the rules it came from.

Strict validation asks Envoy before anything is sent (xds/validate.py). In the
standard level a running proxy may still reject (NACK) what translation did not
catch: the proxy then keeps its last configuration, and without help no later
change to that listener would ever reach it. Either way the culprit route
entries are found with `envoy --mode validate` (the proxies' own binary,
bisecting over the entries, the new ones first) and their rules are quarantined
(translate/quarantine.py): the next pass serves them as 500s with a status that
carries Envoy's message, and the proxy converges on everything else, with no
user action and no proxy restart.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from lychgate.admin import metrics
from lychgate.log import component_logger
from lychgate.store import Store
from lychgate.translate.quarantine import Quarantine
from lychgate.xds import types
from lychgate.xds.cache import Snapshot, decode, route_hash
from lychgate.xds.server import ProxyConnection
from lychgate.xds.translator import Resources
from lychgate.xds.translator.route_matcher import routes_of
from lychgate.xds.validate import Blocked, Preflight, routes_using

log = component_logger("xds")

# A rejected resource is checked together with what it needs: routes inside
# listeners, listeners with their routes, clusters with their endpoints.
_COMPANION = {types.ROUTE: types.LISTENER, types.LISTENER: types.ROUTE, types.CLUSTER: types.ENDPOINT}


class Doctor:
    def __init__(self, store: Store, quarantine: Quarantine, validator: Callable[[], Preflight]) -> None:
        self.store = store
        self.quarantine = quarantine
        self._make_validator = validator
        self._validator: Preflight | None = None
        self._accepted: dict[str, Snapshot] = {}  # gateway -> last snapshot whose routes a proxy ACKed
        self._diagnosed: dict[str, set[tuple[str, str]]] = {}  # gateway -> (type, version) looked at
        self._tasks: set[asyncio.Task[None]] = set()

    # --- quarantine ------------------------------------------------------------

    def quarantine_blocked(self, ref: str, blocked: list[Blocked], resources: Resources, found_by: str) -> bool:
        """Quarantine the rules behind what Envoy refuses: the route entries it
        blames, or the routes that use a refused cluster. True when any is new."""
        added = False
        for b in blocked:
            culprits = b.routes or (routes_using(resources, b.name) if b.type_url == types.CLUSTER else ())
            for name in culprits:
                if self.quarantine.add(self.store, name, b.error, ref, found_by):
                    added = True
                    log.error("quarantined %s of Gateway %s: Envoy rejects it: %s", name, ref, b.error)
        return added

    def record(self, gateways: set[str]) -> None:
        """Keep the quarantine gauge of each Gateway current (one walk of the entries a pass)."""
        counts = self.quarantine.counts()
        for ref in gateways:
            metrics.QUARANTINED.labels(ref).set(counts.get(ref, 0))

    def forget(self, ref: str) -> None:
        self._accepted.pop(ref, None)
        self._diagnosed.pop(ref, None)
        with contextlib.suppress(KeyError):
            metrics.QUARANTINED.remove(ref)

    # --- proxy feedback ------------------------------------------------------------

    def acked(self, conn: ProxyConnection, type_url: str, snapshot: Snapshot | None) -> None:
        """A proxy ACKed: a later rejection is news again, and routes it ACKed are known good."""
        seen = self._diagnosed.get(conn.gateway)
        if seen:
            self._diagnosed[conn.gateway] = {(t, v) for t, v in seen if t != type_url}
        state = conn.types.get(type_url)
        if (type_url == types.ROUTE and snapshot is not None and state is not None
                and state.version_acked == snapshot.version(types.ROUTE)):
            self._accepted[conn.gateway] = snapshot

    def rejected(self, conn: ProxyConnection, snapshot: Snapshot | None, found: Callable[[], None]) -> None:
        """A proxy NACKed: when it refused the current snapshot, find out why in
        the background and call `found` once rules are quarantined."""
        if snapshot is None:
            return
        seen = self._diagnosed.setdefault(conn.gateway, set())
        for type_url, state in conn.types.items():
            if state.nack is None or (type_url not in _COMPANION and type_url != types.ENDPOINT):
                continue
            version = state.nack["version"]
            if version != snapshot.version(type_url) or (type_url, version) in seen:
                continue  # an older version, or one already looked at
            seen.add((type_url, version))
            task = asyncio.create_task(self._diagnose(conn.gateway, snapshot, type_url, found))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _diagnose(self, ref: str, snapshot: Snapshot, type_url: str, found: Callable[[], None]) -> None:
        try:
            suspects, known_good = _suspects(snapshot, self._accepted.get(ref), type_url)
            if self._validator is None:
                self._validator = self._make_validator()
            blocked = await self._validator.check(suspects, known_good)
            # A refused cluster is blamed on the routes using it: only then are all routes decoded.
            users = any(b.type_url == types.CLUSTER and not b.routes for b in blocked)
            if self.quarantine_blocked(ref, blocked, _resources(snapshot) if users else suspects, "nack"):
                found()
            else:
                log.warning("the proxy of Gateway %s rejected %s version %s and validation could not "
                            "attribute it to a route rule; it keeps its last accepted configuration",
                            ref, types.SHORT.get(type_url, type_url), snapshot.version(type_url))
        except Exception:
            metrics.ERRORS.labels("doctor").inc()
            log.exception("diagnosing a rejection by the proxy of Gateway %s failed", ref)


def _resources(snapshot: Snapshot, only: dict[str, set[str]] | None = None) -> Resources:
    out = Resources()
    for type_url, byname in snapshot.resources.items():
        for name, packed in byname.items():
            if only is None or name in only.get(type_url, ()):
                out.add(type_url, name, decode(type_url, packed))
    return out


def _suspects(snapshot: Snapshot, accepted: Snapshot | None, type_url: str) -> tuple[Resources, frozenset[str]]:
    """The resources a rejection of `type_url` can come from (those that changed
    since a proxy last accepted routes, with all they are checked with), and the
    hashes of the route entries accepted then."""
    now, before = snapshot.hashes.get(type_url, {}), accepted.hashes.get(type_url, {}) if accepted else {}
    changed = {n for n, h in now.items() if before.get(n) != h}
    if type_url == types.ENDPOINT:
        only = {types.CLUSTER: changed, types.ENDPOINT: changed}
    else:
        companion = _COMPANION[type_url]
        only = {type_url: changed, companion: set(snapshot.resources.get(companion, {}))}
    known_good: set[str] = set()
    if accepted is not None and type_url == types.ROUTE:
        for name in changed & accepted.resources.get(types.ROUTE, {}).keys():
            for vh in decode(types.ROUTE, accepted.resources[types.ROUTE][name]).virtual_hosts:
                known_good.update(route_hash(r) for r in routes_of(vh))
    return _resources(snapshot, only), frozenset(known_good)
