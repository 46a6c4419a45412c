"""The backend a GatewayExtension (or a JWT or OAuth2 provider) calls: a Service,
or a lychgate Backend as kgateway lets `backendRef` name one (translate/backends.py:
static hosts, by address or by a name Envoy resolves)."""

from __future__ import annotations

from lychgate.api.gateway import BackendObjectReference
from lychgate.api.lychgate import GROUP
from lychgate.store import Store
from lychgate.translate import backends
from lychgate.translate.references import Resolution, resolve_service


def is_backend(group: str, kind: str) -> bool:
    return backends.is_backend_ref(group, kind)


def resolve(store: Store, from_kind: str, from_namespace: str, ref: BackendObjectReference) -> Resolution:
    return resolve_service(store, from_group=GROUP, from_kind=from_kind, from_namespace=from_namespace,
                           group=ref.group, kind=ref.kind, namespace=ref.namespace or from_namespace,
                           name=ref.name, port=ref.port)
