"""The backend a GatewayExtension (or a JWT or OAuth2 provider) calls: a Service,
or a lychgate Backend as kgateway lets `backendRef` name one (translate/backends.py:
static hosts, by address or by a name Envoy resolves). Envoy calls it on its own
account, so a GCP Backend, whose identity token comes with routed requests only, is
refused here for every such caller."""

from __future__ import annotations

from lychgate.api.gateway import BackendObjectReference
from lychgate.api.lychgate import GROUP
from lychgate.store import Store
from lychgate.translate import backends, gcp
from lychgate.translate.references import Resolution, resolve_service


def is_backend(group: str, kind: str) -> bool:
    return backends.is_backend_ref(group, kind)


def resolve(store: Store, from_kind: str, from_namespace: str, ref: BackendObjectReference,
            use: str = "the backend of an extension") -> Resolution:
    """The cluster `ref` names; `use` says what it is for, in the refusal of a GCP Backend."""
    namespace = ref.namespace or from_namespace
    res = resolve_service(store, from_group=GROUP, from_kind=from_kind, from_namespace=from_namespace,
                          group=ref.group, kind=ref.kind, namespace=namespace, name=ref.name, port=ref.port)
    if gcp.is_gcp(res.cluster):
        return Resolution(None, "InvalidKind", gcp.not_here(namespace, ref.name, use))
    return res
