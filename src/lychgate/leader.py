"""Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it.

Every replica serves xDS; only the leader writes (status, proxy objects). The
Lease names its holder and when it last renewed. A replica takes the Lease when
it is free or when its record has not changed for leaseDurationSeconds as
measured on this replica's own clock (so clocks need not agree). Updates carry
the resourceVersion they read, so two replicas racing for it cannot both win.

The leader renews every retry period. `is_leader()` is true only until
`renew_deadline` after the start of the last successful renewal, and a timer
fires at that moment: a leader that cannot reach the API server stops writing
before any other replica may take over (renew_deadline < lease_duration), even
if its event loop is busy. On shutdown the leader releases the Lease so another
replica takes over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import socket
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lychgate.kubeapi import LEASE, describe_error, error_code, plain
from lychgate.log import component_logger

log = component_logger("controlplane")


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class AlwaysLeader:
    """Leader election switched off: this replica writes."""

    identity = "always"

    def __init__(self) -> None:
        self.on_started: list[Callable[[], None]] = []
        self.on_stopped: list[Callable[[], None]] = []

    def is_leader(self) -> bool:
        return True

    async def run(self, stop: asyncio.Event) -> None:
        for cb in self.on_started:
            cb()
        await stop.wait()


class LeaderElector:
    def __init__(
        self,
        client: Any,
        namespace: str,
        name: str,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError(
                "leader election needs retry period < renew deadline < lease duration, got "
                f"{retry_period}s, {renew_deadline}s and {lease_duration}s")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started: list[Callable[[], None]] = []
        self.on_stopped: list[Callable[[], None]] = []
        self.transitions = 0  # how often this replica became leader
        self._leading = False
        self._valid_until = 0.0
        self._expiry: asyncio.TimerHandle | None = None
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._last_error = ""

    def is_leader(self) -> bool:
        return self._leading and time.monotonic() < self._valid_until

    @property
    def lease(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def run(self, stop: asyncio.Event) -> None:
        log.info("leader election: %s competes for Lease %s", self.identity, self.lease)
        try:
            while not stop.is_set():
                started = time.monotonic()
                if await self._try_acquire_or_renew():
                    self._renewed(started)
                elif self._leading and time.monotonic() >= self._valid_until:
                    self._lose("the Lease could not be renewed in time")
                delay = self.retry_period if self._leading else self.retry_period * random.uniform(1.0, 1.2)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=delay)
        finally:
            was_leading = self._leading
            self._lose("shutting down")
            if was_leading:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(self._release()), timeout=2.0)

    # --- state ----------------------------------------------------------------------

    def _renewed(self, started: float) -> None:
        self._valid_until = started + self.renew_deadline
        if self._expiry is not None:
            self._expiry.cancel()
        loop = asyncio.get_running_loop()
        # call_at uses the loop's clock; translate from time.monotonic().
        self._expiry = loop.call_at(loop.time() + (self._valid_until - time.monotonic()), self._check_expiry)
        if not self._leading:
            self._leading = True
            self.transitions += 1
            log.info("leader election: %s is now the leader (Lease %s)", self.identity, self.lease)
            for cb in self.on_started:
                cb()

    def _check_expiry(self) -> None:
        if self._leading and time.monotonic() >= self._valid_until:
            self._lose(f"no successful renewal within {self.renew_deadline:g}s")

    def _lose(self, why: str) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if not self._leading:
            return
        self._leading = False
        self._valid_until = 0.0
        log.log(logging.INFO if why == "shutting down" else logging.WARNING,
                "leader election: %s stopped leading (%s)", self.identity, why)
        for cb in self.on_stopped:
            cb()

    # --- the Lease --------------------------------------------------------------------

    async def _try_acquire_or_renew(self) -> bool:
        try:
            return await self._attempt()
        except Exception as err:
            message = describe_error(err)
            if message != self._last_error:
                log.warning("leader election: cannot read or write Lease %s: %s", self.lease, message)
            self._last_error = message
            return False

    def _spec(self, old: dict[str, Any]) -> dict[str, Any]:
        now = _micro_time()
        spec = dict(old)
        if old.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + (1 if old else 0)
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = max(1, math.ceil(self.lease_duration))
        spec["renewTime"] = now
        return spec

    async def _attempt(self) -> bool:
        try:
            lease = plain(await self.client.get(LEASE.cls, self.name, namespace=self.namespace))
        except Exception as err:
            if error_code(err) != 404:
                raise
            body = {"apiVersion": LEASE.api_version, "kind": LEASE.kind,
                    "metadata": {"name": self.name, "namespace": self.namespace}, "spec": self._spec({})}
            try:
                await self.client.create(LEASE.cls(body), namespace=self.namespace)
            except Exception as create_err:
                if error_code(create_err) == 409:
                    return False  # another replica created it first
                raise
            self._last_error = ""
            return True
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"),
                  spec.get("leaseTransitions"))
        now = time.monotonic()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and now < self._observed_at + duration:
            return False  # held by another replica that renews it
        lease["spec"] = self._spec(spec)
        try:
            await self.client.replace(LEASE.cls(lease), namespace=self.namespace)
        except Exception as err:
            if error_code(err) == 409:
                return False  # someone else wrote it since we read it
            raise
        self._last_error = ""
        return True

    async def _release(self) -> None:
        lease = plain(await self.client.get(LEASE.cls, self.name, namespace=self.namespace))
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self.identity:
            return
        lease["spec"] = {**spec, "holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": _micro_time()}
        await self.client.replace(LEASE.cls(lease), namespace=self.namespace)
        log.info("leader election: %s released Lease %s", self.identity, self.lease)
