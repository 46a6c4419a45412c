"""Writes computed status to the API server's status subresources.

Subscribed to `ControlPlane.on_status`: it receives the keys whose computed
status changed, and writes each one while this replica leads. A write

- merges with what is on the object: entries of `status.parents` /
  `status.ancestors` written by other controllers (another controllerName) and
  condition types lychgate never sets are kept; lychgate's own are replaced;
- keeps `lastTransitionTime` of a condition whose status did not change, so a
  restarted controller computing the same status writes nothing;
- is skipped when the merged status equals the object's (nothing is written
  unless something changed);
- is a JSON merge patch carrying the resourceVersion it was computed from, so a
  concurrent change makes it fail with 409; the writer then reads the object
  afresh, merges again and retries.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

from lightkube.types import PatchType

from lychgate.api.base import ObjectKey
from lychgate.api.lychgate import GROUP as LYCHGATE_GROUP
from lychgate.api.registry import BY_KIND
from lychgate.kubeapi import ApiResource, Backoff, describe_error, error_code, for_model, plain
from lychgate.log import component_logger
from lychgate.status.store import StatusStore
from lychgate.translate.gateway import CONTROLLER_NAME

log = component_logger("status")

# Condition types lychgate may set on an object it owns (Gateway, GatewayClass, a
# policy), plus GEP-713's <Policy>Affected: one of these that lychgate no longer
# computes is removed; any other type on the object belongs to someone else and stays.
OWN_CONDITION_TYPES = frozenset({
    "Accepted", "Programmed", "Ready", "ResolvedRefs", "PartiallyInvalid", "Conflicted",
    "Attached", "Overlapped", "Merged", "Applied",
})


def _own_condition(type_: Any) -> bool:
    return isinstance(type_, str) and (type_ in OWN_CONDITION_TYPES or type_.endswith("Affected"))
# Per-controller lists: an entry belongs to the controller its controllerName names.
CONTROLLER_LISTS = (("parents", "parentRef"), ("ancestors", "ancestorRef"))
# Gateway API's bounds on those lists (RouteStatus.parents, PolicyStatus.ancestors): the API
# server refuses a status over them, so other controllers' entries leave ours less room.
LIST_LIMITS = {"parents": 32, "ancestors": 16}
MAX_ATTEMPTS = 5
CONCURRENCY = 8
# Kinds lychgate reads but never writes status to.
NO_STATUS = frozenset({"Namespace", "Service", "EndpointSlice", "Secret", "ReferenceGrant",
                       "GatewayParameters"})

Status = dict[str, Any]


def _ident(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _condition_lists(status: Status) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    if isinstance(status.get("conditions"), list):
        yield "", status["conditions"]
    for group, ident in (("listeners", "name"), *CONTROLLER_LISTS):
        for item in status.get(group) or []:
            if isinstance(item, dict) and isinstance(item.get("conditions"), list):
                yield f"{group}/{_ident(item.get(ident))}", item["conditions"]


def _keep_transition_times(current: Status, desired: Status) -> None:
    """In place: desired conditions whose status is unchanged keep current's lastTransitionTime."""
    old = {(path, c.get("type")): c for path, conds in _condition_lists(current)
           for c in conds if isinstance(c, dict)}
    for path, conds in _condition_lists(desired):
        for c in conds:
            prev = old.get((path, c.get("type")))
            if prev is not None and prev.get("status") == c.get("status") and prev.get("lastTransitionTime"):
                c["lastTransitionTime"] = prev["lastTransitionTime"]


def merge_status(current: Status | None, desired: Status | None) -> Status | None:
    """The status the object should have; None: not lychgate's to write."""
    cur = copy.deepcopy(current or {})
    has_lists = any(k in cur for k, _ in CONTROLLER_LISTS)
    if desired is None:
        if not has_lists:
            return None  # a Gateway or class lychgate no longer owns: leave it as it is
        desired = {}
    want = copy.deepcopy(desired)
    _keep_transition_times(cur, want)
    out: Status = {}
    for key, value in cur.items():
        if key not in want and key not in ("conditions", "parents", "ancestors", "listeners", "addresses"):
            out[key] = value  # someone else's field
    foreign_conds = [c for c in cur.get("conditions") or []
                     if isinstance(c, dict) and not _own_condition(c.get("type"))
                     and c.get("type") not in {d.get("type") for d in want.get("conditions") or []}]
    for key, value in want.items():
        if key not in ("conditions", "parents", "ancestors"):
            out[key] = value
    conditions = list(want.get("conditions") or []) + foreign_conds
    if conditions:
        out["conditions"] = conditions
    for key, _ in CONTROLLER_LISTS:
        foreign = [e for e in cur.get(key) or []
                   if isinstance(e, dict) and e.get("controllerName") != CONTROLLER_NAME]
        ours = list(want.get(key) or [])
        if key in cur or ours:
            out[key] = foreign + ours[:max(0, LIST_LIMITS[key] - len(foreign))]
    return out


def merge_patch(old: Any, new: Any) -> Any:
    """The RFC 7386 merge patch that turns old into new (null deletes a key)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {k: None for k in old.keys() - new.keys()}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = merge_patch(old[key], value)
    return patch


class StatusWriter:
    def __init__(
        self,
        client: Any,
        status: StatusStore,
        raw: Callable[[ObjectKey], dict[str, Any] | None],
        is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        self.client = client
        self.status = status
        self.raw = raw
        self.is_leader = is_leader
        self.writes = 0
        self.conflicts = 0
        self.failures: dict[ObjectKey, str] = {}
        self._pending: set[ObjectKey] = set()
        self._wake = asyncio.Event()
        self._work: asyncio.Task[None] | None = None
        self._backoff = Backoff(base=0.5, cap=30.0)
        self._resources: dict[str, ApiResource | None] = {}

    # --- inputs ---------------------------------------------------------------------

    async def on_status(self, keys: set[ObjectKey]) -> None:
        """ControlPlane.on_status: these objects' computed status changed."""
        self._pending |= {k for k in keys if self._resource(k.kind) is not None}
        self._wake.set()

    def resync(self) -> None:
        """Compare every object with its computed status (after gaining leadership)."""
        self._pending |= {k for k in self.status if self._resource(k.kind) is not None}
        self._wake.set()

    def stop_writing(self) -> None:
        """Abandon writes in flight at once (leadership lost, shutdown)."""
        if self._work is not None and not self._work.done():
            self._work.cancel()

    def _resource(self, kind: str) -> ApiResource | None:
        if kind not in self._resources:
            model = BY_KIND.get(kind)
            self._resources[kind] = None if model is None or kind in NO_STATUS else for_model(model)
        return self._resources[kind]

    # --- running --------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                await self._wait(stop)
                if stop.is_set():
                    break
                self._wake.clear()
                if not self.is_leader():
                    self._pending.clear()  # the next leader writes them; resync() when we lead
                    continue
                keys, self._pending = sorted(self._pending), set()
                self._work = asyncio.create_task(self._write_all(keys))
                try:
                    await self._work
                except asyncio.CancelledError:
                    me = asyncio.current_task()
                    if stop.is_set() or (me is not None and me.cancelling()):
                        raise
                    log.info("leadership lost: abandoned %d status writes in flight", len(keys))
        finally:
            self.stop_writing()

    async def _wait(self, stop: asyncio.Event) -> None:
        waiters = [asyncio.create_task(self._wake.wait()), asyncio.create_task(stop.wait())]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    async def _write_all(self, keys: list[ObjectKey]) -> None:
        sem = asyncio.Semaphore(CONCURRENCY)
        retry: set[ObjectKey] = set()

        async def one(key: ObjectKey) -> None:
            async with sem:
                if not self.is_leader():
                    return
                try:
                    await self.write(key)
                    self.failures.pop(key, None)
                except Exception as err:
                    message = describe_error(err)
                    if self.failures.get(key) != message:
                        log.warning("writing the status of %s failed (%s); retrying", key, message)
                    self.failures[key] = message
                    retry.add(key)

        await asyncio.gather(*(one(k) for k in keys))
        if retry:
            self._pending |= retry
            delay = self._backoff.next()
            asyncio.get_running_loop().call_later(delay, self._wake.set)
        else:
            self._backoff.reset()

    async def write(self, key: ObjectKey) -> bool:
        """Bring one object's status in line; True when something was written."""
        res = self._resource(key.kind)
        if res is None:
            return False
        raw = self.raw(key)
        if raw is None:
            return False  # gone, or not discovered: nothing to write to
        for _ in range(MAX_ATTEMPTS):
            current = raw.get("status") or {}
            rv = (raw.get("metadata") or {}).get("resourceVersion")
            desired = self.status.get(key)
            if desired is None and res.group == LYCHGATE_GROUP:
                # lychgate's own kinds are always its to write: nothing computed means none of its
                # conditions (a DirectResponse whose refused version was fixed: status/invalid.py).
                desired = {}
            merged = merge_status(current, desired)
            if merged is None or merged == current:
                return False
            if not self.is_leader():
                return False
            body: dict[str, Any] = {"status": merge_patch(current, merged)}
            if rv:
                body["metadata"] = {"resourceVersion": rv}
            self.writes += 1  # requests sent (a write cancelled in flight may still land)
            try:
                await self.client.patch(res.status_cls, key.name, body, patch_type=PatchType.MERGE,
                                        **res.namespace_arg(key.namespace))
            except Exception as err:
                code = error_code(err)
                if code == 404:
                    return False  # deleted meanwhile
                if code == 409:
                    self.conflicts += 1
                    log.debug("status of %s: conflict, reading it afresh", key)
                    try:
                        raw = plain(await self.client.get(res.cls, key.name,
                                                          **res.namespace_arg(key.namespace)))
                    except Exception as get_err:
                        if error_code(get_err) == 404:
                            return False
                        raise
                    continue
                if code == 422:
                    # The API server's schema refuses it: retrying the same write cannot help.
                    log.error("the API server refused the status of %s: %s", key, describe_error(err))
                    return False
                raise
            log.debug("wrote the status of %s", key)
            return True
        raise RuntimeError(f"status of {key} kept conflicting after {MAX_ATTEMPTS} attempts")
