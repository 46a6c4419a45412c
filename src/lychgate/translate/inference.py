"""InferencePool backends (Gateway API Inference Extension) → IR, and the pools' status.

An HTTPRoute backendRef of group `inference.networking.k8s.io`, kind
`InferencePool` becomes:

- a cluster `inferencepool/<ns>/<name>` of the ready Pods the pool's selector
  picks, on its target port, whose load balancer honours the endpoint the
  picker names (Envoy's override_host policy, xds/translator/inference.py);
- a cluster `epp/<ns>/<name>` for the pool's endpoint picker (EPP) Service,
  spoken to over gRPC (Envoy ext_proc);
- an `ir.EndpointPicker` on the rule's Forward action, so the xDS translator
  puts the pool's ext_proc filter on the route.

When the picker cannot be reached, the pool's failureMode decides: FailOpen
lets the request through without a pick (any ready endpoint serves it),
FailClose answers 503. Envoy can fail open only while no part of the request
body has gone to the picker (FULL_DUPLEX_STREAMED keeps no copy): a picker
whose server stopped fails the stream only once the connection is refused,
after the body went, and the request would be lost. So a FailOpen pool's
picker cluster is watched (`fail_open_watch`): a TCP health check and an
ejection on the first connection failure take the picker out, and with no
panic routing the stream then fails as it opens, before any body is sent.

Serving InferencePools is switched by `inferenceExtension.enabled`; while it
is off, such a backendRef is unresolved (ResolvedRefs=False, InvalidKind) with
a message saying how to switch it on. translate() sets the switch for the
duration of a pass (`serving`), so route compilation needs no extra argument.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.core import Pod, Service
from lychgate.api.gateway import GROUP as GATEWAY_GROUP
from lychgate.api.gateway import HTTPRoute
from lychgate.api.inference import GROUP, InferencePool
from lychgate.store import Store
from lychgate.translate.conditions import condition

KIND = "InferencePool"
CONTROLLER_NAME = "gateway.lychgate.dev/lychgate"
ENABLE_HINT = "set inferenceExtension.enabled=true (lychgate run --inference-extension) to route to InferencePools"

_ENABLED: ContextVar[bool] = ContextVar("lychgate_inference_enabled", default=False)


@contextlib.contextmanager
def serving(enabled: bool) -> Iterator[None]:
    """InferencePool backends are resolved (True) or refused (False) inside the block."""
    token = _ENABLED.set(enabled)
    try:
        yield
    finally:
        _ENABLED.reset(token)


def is_pool_ref(group: str, kind: str) -> bool:
    return group == GROUP and kind == KIND


def pool_cluster_name(namespace: str, name: str) -> str:
    return f"inferencepool/{namespace}/{name}"


@dataclasses.dataclass(frozen=True)
class PoolBackend:
    """A resolved pool: its endpoint cluster, its picker's cluster, the picker itself."""

    cluster: ir.Cluster
    picker_cluster: ir.Cluster
    picker: ir.EndpointPicker


class PoolProblem(ValueError):
    """Why a pool cannot be routed to: (ResolvedRefs reason, message naming the field)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def resolve_pool(store: Store, namespace: str, name: str) -> PoolBackend:
    """The pool's clusters and picker; raises PoolProblem when it cannot serve.

    Cross-namespace permission (ReferenceGrant) is the caller's to check, as for Services.
    """
    # Imported here: references.py calls this module for InferencePool backendRefs.
    from lychgate.translate.references import resolve_service

    where = f"{namespace}/{name}"
    if not _ENABLED.get():
        raise PoolProblem("InvalidKind", f"backendRef {GROUP}/{KIND} {where}: InferencePool backends are "
                                         f"not served; {ENABLE_HINT}")
    pool = store.get(InferencePool, namespace, name)
    if pool is None:
        raise PoolProblem("BackendNotFound", f"{KIND} {where} not found")
    epp = pool.spec.endpoint_picker_ref
    field = f"{KIND} {where}: spec.endpointPickerRef"
    if epp is None:
        raise PoolProblem("BackendNotFound", f"{field} is not set: a pool needs an endpoint picker to be routed to")
    if epp.group not in ("", "core") or epp.kind != "Service":
        raise PoolProblem("BackendNotFound", f"{field}: {epp.group or 'core'}/{epp.kind} is not supported; "
                                             "use a Service")
    if epp.port is None:
        raise PoolProblem("BackendNotFound", f"{field}.port is required for a Service")
    res = resolve_service(store, from_kind=KIND, from_group=GROUP, from_namespace=namespace, group="",
                          kind="Service", namespace=namespace, name=epp.name, port=epp.port.number)
    if res.cluster is None:
        raise PoolProblem("BackendNotFound", f"{field}: {res.message}")
    # Its own name: the picker speaks gRPC whatever the Service port says, and a
    # route to the same Service as a plain backend must not share this cluster.
    picker_cluster = dataclasses.replace(res.cluster, name=f"epp/{namespace}/{name}", protocol="h2c",
                                         tls=picker_tls(store, namespace, epp.name, epp.port.number, res.cluster.tls))
    if epp.failure_mode == "FailOpen":
        picker_cluster = dataclasses.replace(picker_cluster, config=fail_open_watch(picker_cluster.config))
    cluster = ir.Cluster(
        name=pool_cluster_name(namespace, name),
        endpoints=tuple(pool_endpoints(store, pool)),
        protocol="h2c" if pool.spec.app_protocol == "kubernetes.io/h2c" else "http1",
        endpoint_override=True,
    )
    picker = ir.EndpointPicker(pool=where, cluster=picker_cluster.name,
                               fail_open=epp.failure_mode == "FailOpen")
    return PoolBackend(cluster, picker_cluster, picker)


# Half a second between checks: the longest a stopped picker can cost a request its body.
_WATCH = ir.HealthCheck(timeout_ms=500, interval_ms=500, unhealthy_threshold=1, healthy_threshold=1, tcp=True)
# One refused connection ejects the picker at once (the request that met it is lost,
# the next ones fail open); it comes back when a health check passes.
_EJECT = ir.OutlierDetection(split_external_local_origin_errors=True, consecutive_local_origin_failure=1,
                             enforcing_consecutive_local_origin_failure=100, max_ejection_percent=100,
                             interval_ms=500, base_ejection_time_ms=500)


def fail_open_watch(config: ir.BackendConfig | None) -> ir.BackendConfig:
    """A FailOpen picker's cluster: unreachable pickers are known before a stream opens.
    A BackendConfigPolicy's own health check or outlier detection on the picker's Service wins."""
    config = config or ir.BackendConfig()
    lb = config.load_balancing or ir.LoadBalancing(algorithm="round_robin")
    return dataclasses.replace(
        config, health_check=config.health_check or _WATCH,
        outlier_detection=config.outlier_detection or _EJECT,
        # No panic routing: a picker out of the healthy set is not asked, so the stream fails at once.
        load_balancing=dataclasses.replace(lb, healthy_panic_threshold=0))


def picker_tls(store: Store, namespace: str, service: str, port: int,
               policy: ir.UpstreamTLS | None) -> ir.UpstreamTLS | None:
    """How the proxy speaks to a picker: TLS, as the reference picker serves by default
    with a self-signed certificate, so not verified (as kgateway does); verified when a
    BackendTLSPolicy targets the picker's Service; plaintext when the Service port says
    `appProtocol: kubernetes.io/h2c` (a picker run with --secure-serving=false)."""
    if policy is not None:
        return dataclasses.replace(policy, alpn=("h2",))
    svc = store.get(Service, namespace, service)
    svc_port = svc.port(port) if svc is not None else None
    if svc_port is not None and (svc_port.app_protocol or "").lower() == "kubernetes.io/h2c":
        return None
    # No SNI either, as kgateway: there is no name to check, and the picker's certificate has none.
    return ir.UpstreamTLS(sni="", ca=None, sans=(), verify=False, alpn=("h2",))


def pickers(vhosts: Iterable[ir.VirtualHost]) -> tuple[ir.EndpointPicker, ...]:
    """The endpoint pickers the routes of a listener use, by pool."""
    found: dict[str, ir.EndpointPicker] = {}
    for vh in vhosts:
        for r in vh.routes:
            if isinstance(r.action, ir.Forward):
                found.update((p.pool, p) for p in r.action.pickers)
    return tuple(found[k] for k in sorted(found))


def pool_endpoints(store: Store, pool: InferencePool) -> list[ir.Endpoint]:
    """Ready Pods of the pool's namespace whose labels match its selector, on each of its
    target ports (several ports: one model server per port, e.g. data-parallel ranks)."""
    wanted = pool.spec.selector.match_labels.items()
    out: list[ir.Endpoint] = []
    for pod in sorted(store.list(Pod, pool.namespace), key=lambda p: p.name):
        labels = pod.metadata.labels
        ip = pod.ip
        if ip and pod.ready and all(labels.get(k) == v for k, v in wanted):
            out.extend(ir.Endpoint(ip, port.number) for port in pool.spec.target_ports)
    return out


# --- status ------------------------------------------------------------------------


def _pool_refs(route: HTTPRoute) -> set[tuple[str, str]]:
    return {
        (ref.namespace or route.namespace, ref.name)
        for rule in route.spec.rules for ref in rule.backend_refs
        if is_pool_ref(ref.group, ref.kind)
    }


def pool_status(
    store: Store, attached: Iterable[tuple[HTTPRoute, Iterable[tuple[str, str]]]],
    out: dict[ObjectKey, dict[str, Any]],
) -> None:
    """status.parents of every InferencePool: one entry per Gateway of ours whose
    attached HTTPRoutes use the pool. `attached`: each route with its Gateways."""
    if not _ENABLED.get():
        return
    users: dict[tuple[str, str], dict[tuple[str, str], set[str]]] = defaultdict(lambda: defaultdict(set))
    for route, gateways in attached:
        refs = _pool_refs(route)
        for gw in gateways:
            for ref in refs:
                users[ref][gw].add(f"{route.namespace}/{route.name}")
    for pool in store.list(InferencePool):
        gen = pool.generation
        try:
            resolve_pool(store, pool.namespace, pool.name)
            resolved = condition("ResolvedRefs", True, "ResolvedRefs", "the endpoint picker Service resolves", gen)
        except PoolProblem as err:
            resolved = condition("ResolvedRefs", False, "InvalidExtensionRef", str(err), gen)
        parents = []
        for (gw_ns, gw_name), routes in sorted(users.get((pool.namespace, pool.name), {}).items()):
            used_by = f"used by HTTPRoute(s) {', '.join(sorted(routes))} attached to this Gateway"
            if pool.spec.endpoint_picker_ref is None:
                accepted = condition("Accepted", False, "EndpointPickerRefMissing",
                                     f"{used_by}, but spec.endpointPickerRef is not set", gen)
            else:
                accepted = condition("Accepted", True, "Accepted", used_by, gen)
            parents.append({
                "parentRef": {"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": gw_ns, "name": gw_name},
                "controllerName": CONTROLLER_NAME,
                "conditions": [accepted, resolved],
            })
        if parents:
            out[pool.key] = {"parents": parents}
