"""The backend a GatewayExtension calls: a Service, or a static lychgate Backend.

kgateway lets `backendRef` name a `gateway.kgateway.dev` Backend as well as a
Service; here that is a `gateway.lychgate.dev` Backend of type Static. Its hosts
become the cluster's endpoints directly (the Backend's own ports; the
backendRef's port is not needed), so they must be IP addresses: endpoints
pushed over EDS cannot be resolved by DNS.
"""

from __future__ import annotations

import ipaddress

from lychgate import ir
from lychgate.api.gateway import BackendObjectReference
from lychgate.api.lychgate import GROUP, Backend
from lychgate.store import Store
from lychgate.translate.grants import grant_allows
from lychgate.translate.references import Resolution, resolve_service


def is_backend(group: str, kind: str) -> bool:
    return group == GROUP and kind == "Backend"


def resolve(store: Store, from_kind: str, from_namespace: str, ref: BackendObjectReference) -> Resolution:
    namespace = ref.namespace or from_namespace
    if not is_backend(ref.group, ref.kind):
        return resolve_service(store, from_group=GROUP, from_kind=from_kind, from_namespace=from_namespace,
                               group=ref.group, kind=ref.kind, namespace=namespace, name=ref.name, port=ref.port)
    where = f"{namespace}/{ref.name}"
    if not grant_allows(store, GROUP, from_kind, from_namespace, GROUP, "Backend", namespace, ref.name):
        return Resolution(None, "RefNotPermitted",
                          f"Backend {where} is in another namespace and no ReferenceGrant in {namespace} "
                          f"allows {from_kind} from {from_namespace} to refer to it")
    backend = store.get(Backend, namespace, ref.name)
    if backend is None:
        return Resolution(None, "BackendNotFound", f"Backend {where} not found")
    static = backend.spec.static
    if backend.spec.type != "Static" or static is None:
        return Resolution(None, "BackendNotFound", f"Backend {where} is not of type Static")
    endpoints = []
    for host in static.hosts:
        try:
            ipaddress.ip_address(host.host)
        except ValueError:
            return Resolution(None, "BackendNotFound",
                              f"Backend {where}: host {host.host!r} is not an IP address, which an "
                              "extension's Backend needs")
        endpoints.append(ir.Endpoint(host.host, host.port))
    return Resolution(ir.Cluster(name=f"backend/{namespace}/{ref.name}", endpoints=tuple(endpoints)))
