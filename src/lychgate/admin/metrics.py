"""Prometheus metrics of the control plane, served at /metrics (default 127.0.0.1:9092).

Everything registers in REGISTRY, a CollectorRegistry of our own rather than
prometheus_client's global one: the global registry refuses a second metric of
the same name, so a test that builds a fresh registry, or a library that
registers its own collectors globally, cannot clash with ours, and /metrics
shows exactly what lychgate exports (plus the process/GC collectors added below).
Several control planes in one process (tests) share these objects; the
`gateway` label keeps their series apart where it matters.

The pipeline updates the module-level objects directly, e.g.

    from lychgate.admin import metrics
    with metrics.TRANSLATION_DURATION.time():
        ...
    metrics.XDS_PUSHES.labels(type_url=url, gateway="ns/name").inc()

Label values: `gateway` is "namespace/name"; `type_url` is the full xDS type URL
("type.googleapis.com/envoy.config.listener.v3.Listener").
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

REGISTRY = CollectorRegistry(auto_describe=True)
"""The registry /metrics serves. Register lychgate's metrics here, never globally."""

# Process CPU/memory/fds, Python GC and version: the same collectors the global
# registry has by default, registered here because we do not serve the global one.
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

TRANSLATION_DURATION = Histogram(
    "lychgate_translation_duration_seconds",
    "Time to translate the stored objects into IR and xDS resources, one observation per run.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=REGISTRY,
)
"""Histogram: seconds per translation run (Gateway API -> IR -> xDS). Use `.time()`."""

SNAPSHOT_BYTES = Gauge(
    "lychgate_xds_snapshot_bytes",
    "Serialized size of the current xDS snapshot of a Gateway, by resource type.",
    ["gateway", "type_url"],
    registry=REGISTRY,
)
"""Gauge{gateway, type_url}: bytes of the serialized resources of that type in the snapshot."""

SNAPSHOT_RESOURCES = Gauge(
    "lychgate_xds_snapshot_resources",
    "Number of resources in the current xDS snapshot of a Gateway, by resource type.",
    ["gateway", "type_url"],
    registry=REGISTRY,
)
"""Gauge{gateway, type_url}: resource count of that type in the snapshot."""

XDS_PUSHES = Counter(
    "lychgate_xds_pushes",
    "xDS responses sent to proxies.",
    ["type_url", "gateway"],
    registry=REGISTRY,
)
"""Counter{type_url, gateway}: DiscoveryResponses sent (exposed as ..._total)."""

XDS_ACKS = Counter(
    "lychgate_xds_acks",
    "xDS responses acknowledged by proxies.",
    ["type_url", "gateway"],
    registry=REGISTRY,
)
"""Counter{type_url, gateway}: ACKs received (exposed as ..._total)."""

XDS_NACKS = Counter(
    "lychgate_xds_nacks",
    "xDS responses rejected by proxies (NACK, with error_detail).",
    ["type_url", "gateway"],
    registry=REGISTRY,
)
"""Counter{type_url, gateway}: NACKs received (exposed as ..._total)."""

CONNECTED_PROXIES = Gauge(
    "lychgate_xds_connected_proxies",
    "Proxies with an open xDS stream, by Gateway.",
    ["gateway"],
    registry=REGISTRY,
)
"""Gauge{gateway}: open ADS streams. inc() on connect, dec() on disconnect."""

OBJECTS = Gauge(
    "lychgate_objects",
    "Objects held in the store, by kind.",
    ["kind"],
    registry=REGISTRY,
)
"""Gauge{kind}: objects currently in the store (kind as in the object, e.g. "HTTPRoute")."""

STATUS_WRITES = Counter(
    "lychgate_status_writes",
    "Status updates written back (API server in kube mode, memory in files mode).",
    ["kind", "result"],
    registry=REGISTRY,
)
"""Counter{kind, result}: status writes; result is "success", "conflict" or "error"."""

ERRORS = Counter(
    "lychgate_errors",
    "Errors by pipeline component (the names of lychgate.log.COMPONENTS).",
    ["component"],
    registry=REGISTRY,
)
"""Counter{component}: errors that were logged and survived (the component went on)."""

BLOCKED_SNAPSHOTS = Counter(
    "lychgate_xds_blocked_snapshots",
    "Snapshots withheld from proxies because strict preflight validation rejected them.",
    ["gateway"],
    registry=REGISTRY,
)
"""Counter{gateway}: snapshots blocked by validation.level=strict (spec §7.2)."""

QUARANTINED = Gauge(
    "lychgate_xds_quarantined",
    "Route rules answering 500 because Envoy rejected them (strict preflight or a proxy NACK).",
    ["gateway"],
    registry=REGISTRY,
)
"""Gauge{gateway}: rules in quarantine (translate/quarantine.py); 0 when all is served."""
