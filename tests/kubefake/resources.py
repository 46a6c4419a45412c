"""Which resources the stand-in API server serves, and how each behaves.

A real API server knows a resource from its built-in type registry or from a
CustomResourceDefinition. Here a `ResourceType` carries the facts the server's
behaviour depends on: scope, served versions, whether `/status` is a separate
subresource, whether `metadata.generation` is maintained, and which lists are
associative (list-map keys) for server-side apply and strategic merge patch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .defaults import Allocator

# A list's merge semantics: a tuple of map keys (x-kubernetes-list-type: map),
# "set" (x-kubernetes-list-type: set), or absent from the table (atomic).
ListKind = tuple[str, ...] | Literal["set"]
ListTable = Mapping[tuple[str, ...], ListKind]

# Defaulting hook: (resource type, new object, old object or None, allocator) -> None,
# mutating the new object in place, like the API server's defaulting and
# PrepareForCreate/PrepareForUpdate.
Defaulter = Callable[["ResourceType", dict[str, Any], "dict[str, Any] | None", "Allocator"], None]


@dataclass(frozen=True, eq=False)  # identity hash: list_types is a dict
class ResourceType:
    group: str
    versions: tuple[str, ...]  # served versions; the first one is the storage version
    kind: str
    plural: str
    namespaced: bool = True
    status: bool = False  # has a /status subresource
    builtin: bool = False  # a compiled-in type (not a CRD): see `list_item_gvk`, SMP support
    generation: bool = True  # metadata.generation maintained (not for e.g. ConfigMap)
    name_format: Literal["subdomain", "label"] = "subdomain"
    list_types: ListTable = field(default_factory=dict)
    field_labels: tuple[str, ...] = ()  # field selectors beyond metadata.name/namespace
    defaulter: Defaulter | None = None
    short_names: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    @property
    def storage_version(self) -> str:
        return self.versions[0]

    @property
    def list_item_gvk(self) -> bool:
        # Built-in lists are encoded from typed Go lists whose items carry no
        # apiVersion/kind; custom resource lists are unstructured and keep them.
        return not self.builtin

    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


# --- list semantics shared by many types -------------------------------------------------

_META_LISTS: dict[tuple[str, ...], ListKind] = {
    ("metadata", "ownerReferences"): ("uid",),
    ("metadata", "finalizers"): "set",
}


def _pod_spec_lists(prefix: tuple[str, ...]) -> dict[tuple[str, ...], ListKind]:
    out: dict[tuple[str, ...], ListKind] = {}
    for containers in ("containers", "initContainers"):
        c = (*prefix, containers)
        out[c] = ("name",)
        out[(*c, "ports")] = ("containerPort", "protocol")
        out[(*c, "env")] = ("name",)
        out[(*c, "volumeMounts")] = ("mountPath",)
    out[(*prefix, "volumes")] = ("name",)
    out[(*prefix, "imagePullSecrets")] = ("name",)
    return out


def _conditions(*parents: tuple[str, ...]) -> dict[tuple[str, ...], ListKind]:
    return {(*p, "conditions"): ("type",) for p in parents}


def _header_filters(prefix: tuple[str, ...]) -> dict[tuple[str, ...], ListKind]:
    out: dict[tuple[str, ...], ListKind] = {}
    for base in (prefix, (*prefix, "backendRefs")):
        for mod in ("requestHeaderModifier", "responseHeaderModifier"):
            out[(*base, "filters", mod, "add")] = ("name",)
            out[(*base, "filters", mod, "set")] = ("name",)
            out[(*base, "filters", mod, "remove")] = "set"
    return out


def _lists(*tables: Mapping[tuple[str, ...], ListKind]) -> dict[tuple[str, ...], ListKind]:
    out: dict[tuple[str, ...], ListKind] = dict(_META_LISTS)
    for t in tables:
        out.update(t)
    return out


# Taken from the x-kubernetes-list-type markers of the Gateway API v1.6 CRDs (the
# subset a controller writes: listeners, conditions, header matches and modifiers).
_ROUTE_LISTS = _lists(
    _conditions(("status", "parents")),
    _header_filters(("spec", "rules")),
    {("spec", "rules", "matches", "headers"): ("name",)},
    {("spec", "rules", "matches", "queryParams"): ("name",)},
)
_GATEWAY_LISTS = _lists(
    _conditions(("status",), ("status", "listeners")),
    {
        ("spec", "listeners"): ("name",),
        ("status", "listeners"): ("name",),
        ("spec", "tls", "frontend", "perPort"): ("port",),
    },
)
_POLICY_LISTS = _lists(
    _conditions(("status",), ("status", "ancestors")),
    {("spec", "targetRefs"): ("group", "kind", "name")},
)
_PLAIN_CR_LISTS = _lists(_conditions(("status",)))


def list_types_from_schema(schema: Mapping[str, Any]) -> dict[tuple[str, ...], ListKind]:
    """Read x-kubernetes-list-type/-map-keys from a CRD's openAPIV3Schema."""
    out: dict[tuple[str, ...], ListKind] = dict(_META_LISTS)

    def walk(s: Mapping[str, Any], path: tuple[str, ...]) -> None:
        t = s.get("type")
        if t == "object":
            for k, v in (s.get("properties") or {}).items():
                walk(v, (*path, k))
        elif t == "array":
            lt = s.get("x-kubernetes-list-type")
            if lt == "map":
                out[path] = tuple(s.get("x-kubernetes-list-map-keys") or ())
            elif lt == "set":
                out[path] = "set"
            walk(s.get("items") or {}, path)

    walk(schema, ())
    return out


# --- the catalogue --------------------------------------------------------------------


def _builtin(*args: Any, **kwargs: Any) -> ResourceType:
    kwargs["builtin"] = True
    return ResourceType(*args, **kwargs)


def builtin_types() -> list[ResourceType]:
    """Kubernetes' own types a Gateway controller touches."""
    from . import defaults  # local import: defaults imports this module's types

    pod_lists = _lists(_pod_spec_lists(("spec",)), _conditions(("status",)))
    deploy_lists = _lists(_pod_spec_lists(("spec", "template", "spec")), _conditions(("status",)))
    return [
        _builtin("", ("v1",), "Namespace", "namespaces", namespaced=False, status=True,
                     generation=False, name_format="label", defaulter=defaults.namespace,
                     field_labels=("status.phase",), short_names=("ns",)),
        _builtin("", ("v1",), "Service", "services", status=True, generation=False,
                     name_format="label", defaulter=defaults.service,
                     list_types=_lists({("spec", "ports"): ("port", "protocol")}),
                     short_names=("svc",)),
        _builtin("", ("v1",), "Secret", "secrets", generation=False,
                     defaulter=defaults.secret, field_labels=("type",)),
        _builtin("", ("v1",), "ConfigMap", "configmaps", generation=False,
                     short_names=("cm",)),
        _builtin("", ("v1",), "ServiceAccount", "serviceaccounts", generation=False,
                     list_types=_lists({("secrets",): ("name",)}), short_names=("sa",)),
        _builtin("", ("v1",), "Endpoints", "endpoints", generation=False),
        _builtin("", ("v1",), "Event", "events", generation=False,
                     field_labels=("involvedObject.kind", "involvedObject.namespace",
                                   "involvedObject.name", "involvedObject.uid",
                                   "involvedObject.apiVersion", "reason", "type"),
                     short_names=("ev",)),
        _builtin("", ("v1",), "Pod", "pods", status=True, defaulter=defaults.pod,
                     list_types=pod_lists,
                     field_labels=("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                                   "spec.serviceAccountName", "status.phase", "status.podIP"),
                     short_names=("po",)),
        _builtin("apps", ("v1",), "Deployment", "deployments", status=True,
                     defaulter=defaults.deployment, list_types=deploy_lists,
                     short_names=("deploy",)),
        _builtin("discovery.k8s.io", ("v1",), "EndpointSlice", "endpointslices",
                     defaulter=defaults.endpoint_slice),
        _builtin("coordination.k8s.io", ("v1",), "Lease", "leases", generation=False),
        _builtin("events.k8s.io", ("v1",), "Event", "events", generation=False),
        _builtin("policy", ("v1",), "PodDisruptionBudget", "poddisruptionbudgets",
                     status=True, short_names=("pdb",)),
        _builtin("autoscaling", ("v2",), "HorizontalPodAutoscaler", "horizontalpodautoscalers",
                     status=True, generation=False, short_names=("hpa",)),
        _builtin("apiextensions.k8s.io", ("v1",), "CustomResourceDefinition",
                     "customresourcedefinitions", namespaced=False, status=True,
                     short_names=("crd",)),
    ]


GATEWAY_API = "gateway.networking.k8s.io"
LYCHGATE_API = "gateway.lychgate.dev"
INFERENCE_API = "inference.networking.k8s.io"


def custom_types() -> list[ResourceType]:
    """The CRDs lychgate watches. Served versions follow the Gateway API v1.6
    experimental channel (a superset of standard), storage version first."""
    gw = GATEWAY_API
    return [
        ResourceType(gw, ("v1", "v1beta1"), "GatewayClass", "gatewayclasses", namespaced=False,
                     list_types=_lists(_conditions(("status",)),
                                       {("status", "supportedFeatures"): ("name",)}),
                     short_names=("gc",), status=True),
        ResourceType(gw, ("v1", "v1beta1"), "Gateway", "gateways", list_types=_GATEWAY_LISTS,
                     short_names=("gtw",), status=True),
        ResourceType(gw, ("v1", "v1beta1"), "HTTPRoute", "httproutes", list_types=_ROUTE_LISTS, status=True),
        ResourceType(gw, ("v1",), "GRPCRoute", "grpcroutes", list_types=_ROUTE_LISTS, status=True),
        ResourceType(gw, ("v1", "v1alpha2", "v1alpha3"), "TLSRoute", "tlsroutes",
                     list_types=_ROUTE_LISTS, status=True),
        ResourceType(gw, ("v1", "v1alpha2"), "TCPRoute", "tcproutes", list_types=_ROUTE_LISTS, status=True),
        ResourceType(gw, ("v1", "v1alpha2"), "UDPRoute", "udproutes", list_types=_ROUTE_LISTS, status=True),
        # ReferenceGrant is stored as v1beta1 and has no status at all.
        ResourceType(gw, ("v1beta1", "v1"), "ReferenceGrant", "referencegrants",
                     list_types=_lists(), short_names=("refgrant",)),
        ResourceType(gw, ("v1", "v1alpha3"), "BackendTLSPolicy", "backendtlspolicies",
                     list_types=_POLICY_LISTS, short_names=("btlspolicy",), status=True),
        ResourceType(gw, ("v1",), "ListenerSet", "listenersets", list_types=_GATEWAY_LISTS,
                     short_names=("lset",), status=True),
        ResourceType(LYCHGATE_API, ("v1alpha1",), "GatewayParameters", "gatewayparameters",
                     list_types=_PLAIN_CR_LISTS, short_names=("gwp",), status=True),
        ResourceType(LYCHGATE_API, ("v1alpha1",), "TrafficPolicy", "trafficpolicies",
                     list_types=_POLICY_LISTS, status=True),
        ResourceType(LYCHGATE_API, ("v1alpha1",), "GatewayExtension", "gatewayextensions",
                     list_types=_PLAIN_CR_LISTS, status=True),
        ResourceType(LYCHGATE_API, ("v1alpha1",), "BackendConfigPolicy", "backendconfigpolicies",
                     list_types=_POLICY_LISTS, status=True),
        ResourceType(LYCHGATE_API, ("v1alpha1",), "DirectResponse", "directresponses",
                     list_types=_POLICY_LISTS, status=True),
        ResourceType(LYCHGATE_API, ("v1alpha1",), "Backend", "backends",
                     list_types=_lists(_conditions(("status",), ("status", "parents"))), status=True),
        # Not lychgate's: the VPA CRD, written when GatewayParameters ask for a VerticalPodAutoscaler.
        ResourceType("autoscaling.k8s.io", ("v1",), "VerticalPodAutoscaler", "verticalpodautoscalers",
                     status=True),
        ResourceType(INFERENCE_API, ("v1",), "InferencePool", "inferencepools",
                     list_types=_lists(_conditions(("status", "parents"))), status=True),
    ]


def crd_object(rt: ResourceType) -> dict[str, Any]:
    """The CustomResourceDefinition a real cluster would hold for `rt`."""
    versions = []
    for i, v in enumerate(rt.versions):
        ver: dict[str, Any] = {
            "name": v,
            "served": True,
            "storage": i == 0,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }
        if rt.status:
            ver["subresources"] = {"status": {}}
        versions.append(ver)
    names: dict[str, Any] = {
        "kind": rt.kind,
        "listKind": rt.list_kind,
        "plural": rt.plural,
        "singular": rt.singular,
    }
    if rt.short_names:
        names["shortNames"] = list(rt.short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{rt.plural}.{rt.group}"},
        "spec": {"group": rt.group, "names": names, "scope": "Namespaced" if rt.namespaced else "Cluster",
                 "versions": versions},
    }


def type_from_crd(crd: Mapping[str, Any]) -> ResourceType:
    """The ResourceType a CRD object defines (what the apiextensions server would serve)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    served = [v for v in spec.get("versions") or [] if v.get("served", True)]
    served.sort(key=lambda v: not v.get("storage", False))  # storage version first
    if not served:
        raise ValueError("CRD serves no version")
    storage = served[0]
    schema = ((storage.get("schema") or {}).get("openAPIV3Schema")) or {}
    return ResourceType(
        group=spec.get("group", ""),
        versions=tuple(v["name"] for v in served),
        kind=names.get("kind", ""),
        plural=names.get("plural", ""),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        status="status" in (storage.get("subresources") or {}),
        list_types=list_types_from_schema(schema) if schema else _PLAIN_CR_LISTS,
        short_names=tuple(names.get("shortNames") or ()),
    )


class Registry:
    """Resource types by (group, plural), plus lookups the HTTP layer needs."""

    def __init__(self, types: Iterable[ResourceType] = ()) -> None:
        self._types: dict[tuple[str, str], ResourceType] = {}
        for t in types:
            self.add(t)

    def add(self, rt: ResourceType) -> None:
        self._types[rt.key] = rt

    def remove(self, group: str, plural: str) -> ResourceType | None:
        return self._types.pop((group, plural), None)

    def get(self, group: str, plural: str) -> ResourceType | None:
        return self._types.get((group, plural))

    def served(self, group: str, version: str, plural: str) -> ResourceType | None:
        rt = self._types.get((group, plural))
        return rt if rt is not None and version in rt.versions else None

    def group_versions(self) -> dict[str, list[str]]:
        """group -> served versions, preferred (storage) version first."""
        out: dict[str, list[str]] = {}
        for rt in self._types.values():
            vs = out.setdefault(rt.group, [])
            for v in rt.versions:
                if v not in vs:
                    vs.append(v)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self._types.values() if rt.group == group and version in rt.versions]

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for rt in self._types.values():
            if rt.group == group and rt.kind == kind and version in rt.versions:
                return rt
        return None

    def resolve(self, name: str) -> ResourceType:
        """kubectl-style lookup: `deployments`, `deployments.apps`, `deploy`, `Gateway`."""
        matches = []
        for rt in self._types.values():
            names = {rt.plural, rt.singular, rt.kind, *rt.short_names}
            if name in names or name in {f"{n}.{rt.group}" for n in names}:
                matches.append(rt)
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise KeyError(f"unknown resource {name!r}")
        # Prefer the core group on ambiguity (`events`), as kubectl does.
        core = [m for m in matches if m.group == ""]
        if len(core) == 1:
            return core[0]
        raise KeyError(f"ambiguous resource {name!r}: {[m.qualified() for m in matches]}")

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._types.values()))
