"""The overload manager and client connection limit every proxy starts with (docs/edge.md).

Envoy's edge guide: a proxy facing the internet watches its heap and sheds
load before the kernel kills it, and caps the connections it holds. Both live
in the bootstrap, so they are GatewayParameters settings
(`spec.kube.envoyContainer.bootstrap.overload`), locally and in Kubernetes.

The heap limit is 80% of the Envoy container's memory limit
(`envoyContainer.resources.limits.memory`; the rest is Envoy's binary,
thread stacks and allocator slack), 1 GiB when there is none. As the heap
fills, Envoy in turn shrinks its idle timeouts and resets the streams holding
the most buffered memory (from 85%), returns free memory to the system, stops
keep-alive (95%), and answers new requests 503 (98%). New connections are
still accepted there and answered 503: a refused connection tells a client
nothing, and the connection limit caps them anyway.

The connection limit defaults to one connection per 32 KiB of heap (the
buffer each connection may hold, xds/translator/edge.py): 32,768 for 1 GiB.
Past it Envoy closes new connections as it accepts them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lychgate.api.lychgate import GatewayParameters
from lychgate.xds.translator.edge import BUFFER_LIMIT_BYTES

DEFAULT_HEAP_BYTES = 1 << 30
HEAP_SHARE = 0.8  # of the container's memory limit
MIN_CONNECTIONS = 1024  # the derived limit never goes below this

HEAP = "envoy.resource_monitors.fixed_heap"
CONNECTIONS = "envoy.resource_monitors.global_downstream_max_connections"
_TYPES = "type.googleapis.com/envoy"

_QUANTITY = re.compile(r"^\+?(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E))?$")
_FACTOR = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


@dataclass(frozen=True)
class Limits:
    heap_bytes: int
    max_connections: int


def quantity_bytes(value: int | str) -> int:
    """A Kubernetes quantity ("512Mi", "1G", "1e9", 1073741824) in bytes; 0 for anything else
    (a negative or malformed value: the API model and parameters.problem() refuse those)."""
    m = _QUANTITY.match(str(value).strip())
    if m is None:
        return 0
    number, exponent, suffix = m.groups()
    return int(float(number) * (10 ** int(exponent) if exponent else _FACTOR[suffix]))


def limits(params: GatewayParameters | None, fd_limit: int | None = None) -> Limits:
    """The proxy's heap and connection limits. `fd_limit`: the file descriptors Envoy may open
    (local mode); the default connection limit then leaves half for its backend connections."""
    envoy = params.spec.kube.envoy_container if params else None
    overload = envoy.bootstrap.overload if envoy else None
    heap = quantity_bytes(overload.max_heap_size) if overload and overload.max_heap_size is not None else 0
    if not heap:
        memory = envoy.resources.limits.get("memory") if envoy and envoy.resources else None
        heap = int(quantity_bytes(memory) * HEAP_SHARE) if memory is not None else 0
    heap = heap or DEFAULT_HEAP_BYTES
    if overload and overload.max_downstream_connections is not None:
        return Limits(heap, overload.max_downstream_connections)
    connections = max(MIN_CONNECTIONS, heap // BUFFER_LIMIT_BYTES)
    if fd_limit is not None:
        connections = min(connections, fd_limit // 2)
    return Limits(heap, connections)


def _trigger(monitor: str, value: float | tuple[float, float]) -> dict[str, Any]:
    if isinstance(value, tuple):
        return {"name": monitor, "scaled": {"scaling_threshold": value[0], "saturation_threshold": value[1]}}
    return {"name": monitor, "threshold": {"value": value}}


def overload_manager(lim: Limits) -> dict[str, Any]:
    """The bootstrap's `overload_manager`: the heap monitor and its actions, and the connection limit."""
    pressure = (0.85, 0.95)  # scaled actions: from nothing at 85% of the heap to all at 95%
    return {
        "refresh_interval": "0.25s",
        "resource_monitors": [
            {"name": HEAP, "typed_config": {
                "@type": f"{_TYPES}.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig",
                "max_heap_size_bytes": lim.heap_bytes}},
            # Proactive: Envoy counts connections as it accepts them and closes those past the limit.
            {"name": CONNECTIONS, "typed_config": {
                "@type": f"{_TYPES}.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig",
                "max_active_downstream_connections": lim.max_connections}},
        ],
        "actions": [
            {"name": "envoy.overload_actions.reduce_timeouts", "triggers": [_trigger(HEAP, pressure)],
             "typed_config": {
                 "@type": f"{_TYPES}.config.overload.v3.ScaleTimersOverloadActionConfig",
                 "timer_scale_factors": [
                     {"timer": "HTTP_DOWNSTREAM_CONNECTION_IDLE", "min_scale": {"value": 10}},
                     {"timer": "HTTP_DOWNSTREAM_STREAM_IDLE", "min_scale": {"value": 10}},
                 ]}},
            {"name": "envoy.overload_actions.reset_high_memory_stream", "triggers": [_trigger(HEAP, pressure)]},
            {"name": "envoy.overload_actions.shrink_heap", "triggers": [_trigger(HEAP, 0.95)]},
            {"name": "envoy.overload_actions.disable_http_keepalive", "triggers": [_trigger(HEAP, 0.95)]},
            {"name": "envoy.overload_actions.stop_accepting_requests", "triggers": [_trigger(HEAP, 0.98)]},
        ],
        # Streams are tracked for reset_high_memory_stream from 1 MiB buffered (2^20).
        "buffer_factory_config": {"minimum_account_to_track_power_of_two": 20},
    }
