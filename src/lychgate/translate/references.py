"""Cross-object references: ReferenceGrants and Service backends.

A reference that cannot be followed becomes a `Resolution` with the Gateway API
reason and a message that names the missing piece, never an exception.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Literal

from lychgate import ir
from lychgate.api.backend import Backend
from lychgate.api.core import Service
from lychgate.api.lychgate import GROUP
from lychgate.store import Store
from lychgate.translate import backend_config, backends, gcp, inference, priority_groups
from lychgate.translate.backendtls import policy_for
from lychgate.translate.grants import grant_allows
from lychgate.translate.service_endpoints import service_endpoints

H2C_APP_PROTOCOLS = frozenset({"kubernetes.io/h2c", "h2c", "http2", "grpc"})
WEBSOCKET_APP_PROTOCOLS = frozenset({"kubernetes.io/ws"})


def _protocol(app_protocol: str | None) -> Literal["http1", "h2c", "ws"]:
    """The upstream protocol a Service port's appProtocol asks for (GEP-1911)."""
    value = (app_protocol or "").lower()
    if value in H2C_APP_PROTOCOLS:
        return "h2c"
    if value in WEBSOCKET_APP_PROTOCOLS:
        return "ws"
    return "http1"


@dataclass(frozen=True)
class Resolution:
    cluster: ir.Cluster | None
    reason: str = "ResolvedRefs"
    message: str = ""
    # An InferencePool: the endpoint picker its rule must ask, and the picker's cluster.
    picker: ir.EndpointPicker | None = None
    extra_clusters: tuple[ir.Cluster, ...] = ()

    @property
    def ok(self) -> bool:
        return self.cluster is not None


def cluster_name(namespace: str, service: str, port: int) -> str:
    # kgateway's names (kube_<namespace>_<service>_<port>): its users read them in config
    # dumps and Envoy's stats. Kubernetes names hold no "_", so the parts stay apart.
    # Interned: every route's backends hold the name.
    return sys.intern(f"kube_{namespace}_{service}_{port}")


def resolve_service(
    store: Store,
    *,
    from_kind: str,
    from_namespace: str,
    group: str,
    kind: str,
    namespace: str,
    name: str,
    port: int | None,
    from_group: str = "gateway.networking.k8s.io",
) -> Resolution:
    """Resolve a backendRef to a cluster with the Service's ready endpoints."""
    where = f"{namespace}/{name}"
    if inference.is_pool_ref(group, kind):
        return _resolve_pool(store, from_group, from_kind, from_namespace, namespace, name)
    if backends.is_backend_ref(group, kind):
        cluster, reason, message = backends.resolve(store, from_group, from_kind, from_namespace, group, namespace, name)
        if cluster is not None and cluster.discovery == "priority_groups":
            backend = store.get(Backend, namespace, name)
            assert backend is not None
            return priority_groups.resolve(store, backend, cluster)
        if cluster is not None and cluster.config is not None and cluster.config.tunnel is not None:
            return _tunneled(store, cluster, cluster.config.tunnel)
        return Resolution(cluster, reason, message)
    if group not in ("", "core") or kind != "Service":
        return Resolution(None, "InvalidKind", f"backendRef {group or 'core'}/{kind} {where} is not a supported kind; use a Service")
    if not grant_allows(store, from_group, from_kind, from_namespace, "", "Service", namespace, name):
        return Resolution(
            None,
            "RefNotPermitted",
            f"Service {where} is in another namespace and no ReferenceGrant in {namespace} "
            f"allows {from_kind} from {from_namespace} to refer to it",
        )
    service = store.get(Service, namespace, name)
    if service is None:
        return Resolution(None, "BackendNotFound", f"Service {where} not found")
    if port is None:
        return Resolution(None, "BackendNotFound", f"backendRef to Service {where} needs a port")
    service_port = service.port(port)
    if service_port is None:
        ports = ", ".join(str(p.port) for p in service.spec.ports) or "none"
        return Resolution(None, "BackendNotFound", f"Service {where} has no port {port} (ports: {ports})")
    endpoints = tuple(service_endpoints(store, service, service_port))
    tls = policy_for(store, service, service_port.name)
    if tls is not None and tls[1].tls is None:
        # The policy asks for TLS but its CA is unusable: never fall back to
        # plaintext; the Service has no usable endpoint (its policy says why).
        endpoints = ()
    return Resolution(
        ir.Cluster(
            name=cluster_name(namespace, name, port),
            endpoints=endpoints,
            protocol=_protocol(service_port.app_protocol),
            tls=tls[1].tls if tls is not None else None,
            config=backend_config.for_service(store, service, service_port.name, port),
        )
    )


def _tunneled(store: Store, cluster: ir.Cluster, tunnel: ir.TunnelConfig) -> Resolution:
    """A Backend whose BackendConfigPolicy sends it through a CONNECT proxy (kgateway's
    `tunnel`): one static host, a proxy that resolves and is not tunneled itself."""
    _, namespace, name, _ = cluster.name.split("_", 3)
    where = f"{namespace}/{name}"
    if cluster.discovery not in ("static", "dns") or cluster.aws_lambda is not None or len(cluster.endpoints) != 1:
        return Resolution(None, "InvalidKind", f"Backend {where}: tunnel: only a Static Backend with exactly one "
                                               "host can be tunneled")
    proxy_where = f"{tunnel.proxy_namespace}/{tunnel.proxy_name}"
    proxy = resolve_service(store, from_group=GROUP, from_kind="BackendConfigPolicy",
                            from_namespace=namespace, group=tunnel.proxy_group, kind=tunnel.proxy_kind,
                            namespace=tunnel.proxy_namespace, name=tunnel.proxy_name, port=tunnel.proxy_port)
    if proxy.cluster is None:
        return Resolution(None, proxy.reason, f"Backend {where}: tunnel proxy {proxy_where}: {proxy.message}")
    if gcp.is_gcp(proxy.cluster):  # the CONNECT to it would carry no identity token
        return Resolution(None, "InvalidKind", f"Backend {where}: BackendConfigPolicy tunnel.proxy.backendRef: "
                                               f"{gcp.not_here(tunnel.proxy_namespace, tunnel.proxy_name, 'a tunnel proxy')}")
    if proxy.cluster.tunnel is not None:
        return Resolution(None, "InvalidKind", f"Backend {where}: tunnel proxy {proxy_where} is itself tunneled")
    target = cluster.endpoints[0]
    host = f"[{target.address}]" if ":" in target.address else target.address
    return Resolution(dataclasses.replace(cluster, tunnel=ir.Tunnel(
        proxy=proxy.cluster, authority=f"{host}:{target.port}", host=target.address, headers=tunnel.headers)),
        extra_clusters=(proxy.cluster, *proxy.extra_clusters))


def _resolve_pool(
    store: Store, from_group: str, from_kind: str, from_namespace: str, namespace: str, name: str
) -> Resolution:
    if not grant_allows(store, from_group, from_kind, from_namespace, inference.GROUP, inference.KIND,
                        namespace, name):
        return Resolution(
            None, "RefNotPermitted",
            f"{inference.KIND} {namespace}/{name} is in another namespace and no ReferenceGrant in "
            f"{namespace} allows {from_kind} from {from_namespace} to refer to it",
        )
    try:
        pool = inference.resolve_pool(store, namespace, name)
    except inference.PoolProblem as err:
        return Resolution(None, err.reason, str(err))
    return Resolution(pool.cluster, picker=pool.picker, extra_clusters=(pool.picker_cluster,))
