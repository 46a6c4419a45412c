"""Core Kubernetes kinds lychgate reads: Namespace, Service, EndpointSlice, Secret, ConfigMap, Pod.

These are Kubernetes' API, not lychgate's: the API server is the authority on their
shape, and a real object must never be refused because it carries a field lychgate
does not read (`clusterIP`, `binaryData`, `sessionAffinity`, a field a newer Kubernetes
adds). So, unlike lychgate's own kinds, whose unknown fields are errors, the core kinds
accept any field: the fields lychgate reads are typed and validated, every other one
is carried untouched. tests/unit/test_core_kinds.py parses a core object holding every
field of Kubernetes' OpenAPI schema to keep it so.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import ConfigDict, Field

from lychgate.api.base import Model, Resource


class CoreModel(Model):
    """A part of a core object: the fields lychgate reads are typed, any other is kept."""

    model_config = ConfigDict(extra="allow")


class CoreResource(Resource):
    """A core Kubernetes object (see the module's docstring for why any field is accepted)."""

    model_config = ConfigDict(extra="allow")


class Namespace(CoreResource):
    KIND: ClassVar[str] = "Namespace"
    NAMESPACED: ClassVar[bool] = False
    spec: CoreModel | None = None


class ServicePort(CoreModel):
    name: str | None = None
    port: int = Field(ge=1, le=65535)
    target_port: int | str | None = None
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    app_protocol: str | None = None
    node_port: int | None = None


class ServiceSpec(CoreModel):
    """Only ports, type, selector and externalName matter to routing; the rest is carried as is."""

    type: str = "ClusterIP"
    ports: list[ServicePort] = Field(default_factory=list)
    selector: dict[str, str] = Field(default_factory=dict)
    external_name: str | None = None


class Service(CoreResource):
    KIND: ClassVar[str] = "Service"
    spec: ServiceSpec = Field(default_factory=ServiceSpec)

    def port(self, number: int) -> ServicePort | None:
        return next((p for p in self.spec.ports if p.port == number), None)


class EndpointConditions(CoreModel):
    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class Endpoint(CoreModel):
    addresses: list[str] = Field(min_length=1)
    conditions: EndpointConditions = Field(default_factory=EndpointConditions)


class EndpointPort(CoreModel):
    name: str | None = None
    port: int | None = Field(None, ge=1, le=65535)
    protocol: str = "TCP"
    app_protocol: str | None = None


class EndpointSlice(CoreResource):
    KIND: ClassVar[str] = "EndpointSlice"
    GROUP: ClassVar[str] = "discovery.k8s.io"
    address_type: Literal["IPv4", "IPv6", "FQDN"] = "IPv4"
    endpoints: list[Endpoint] = Field(default_factory=list)
    ports: list[EndpointPort] = Field(default_factory=list)

    SERVICE_LABEL: ClassVar[str] = "kubernetes.io/service-name"

    @property
    def service_name(self) -> str | None:
        return self.metadata.labels.get(self.SERVICE_LABEL)


class Secret(CoreResource):
    KIND: ClassVar[str] = "Secret"
    type: str = "Opaque"
    data: dict[str, str] = Field(default_factory=dict)
    string_data: dict[str, str] = Field(default_factory=dict)
    immutable: bool | None = None


class Pod(CoreResource):
    """Read for InferencePools, which select model-server Pods by label.

    Its status is an input (the Pod's IP and readiness), so the sources keep it.
    """

    KIND: ClassVar[str] = "Pod"
    spec: CoreModel | None = None

    @property
    def ip(self) -> str | None:
        status = self.status or {}
        ips = [p.get("ip") for p in status.get("podIPs") or [] if isinstance(p, dict)]
        return status.get("podIP") or next((ip for ip in ips if ip), None)

    @property
    def ready(self) -> bool:
        status = self.status or {}
        for cond in status.get("conditions") or []:
            if isinstance(cond, dict) and cond.get("type") == "Ready":
                return bool(cond.get("status") == "True")
        return bool(status.get("phase", "Running") == "Running")


class ConfigMap(CoreResource):
    """Read for CA certificates (BackendTLSPolicy `caCertificateRefs`)."""

    KIND: ClassVar[str] = "ConfigMap"
    data: dict[str, str] = Field(default_factory=dict)
    binary_data: dict[str, str] = Field(default_factory=dict)
    immutable: bool | None = None
