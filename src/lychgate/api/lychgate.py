"""lychgate's own kinds (gateway.lychgate.dev/v1alpha1)."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from lychgate.api.base import Model, Resource
from lychgate.api.stats import StatsConfig

GROUP = "gateway.lychgate.dev"

EnvoyLogLevel = Literal["trace", "debug", "info", "warn", "error", "critical", "off"]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]

# A Kubernetes resource quantity ("100m", "128Mi", 2): what a container's resources take.
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")


def _quantity(value: int | str) -> int | str:
    if isinstance(value, str) and not _QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (such as 500m, 128Mi or 2)")
    return value


Quantity = Annotated[int | str, AfterValidator(_quantity)]

# Kubernetes objects passed through to the proxy's Pod as they are (a core/v1
# SecurityContext, Affinity, Toleration, ...): the API server validates them when
# the Deployment is written, and a rejection shows in the Gateway's status.
KubeObject = dict[str, Any]


class LogFormat(Model):
    """Envoy's application log format (`--log-format`): a format string, or JSON fields."""

    json_: dict[str, Any] | None = Field(None, alias="json")
    text: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> LogFormat:
        if (self.json_ is None) == (self.text is None):
            raise ValueError("exactly one of json, text must be set")
        return self


class EnvoyBootstrap(Model):
    """What Envoy starts with: its log level (all components) and per-component levels."""

    log_level: EnvoyLogLevel = "info"
    component_log_levels: dict[str, EnvoyLogLevel] = Field(default_factory=dict)
    log_format: LogFormat | None = None


class Image(Model):
    """A container image, part by part; unset parts keep those of the default proxy image."""

    registry: str | None = None
    repository: str | None = None
    tag: str | None = None
    digest: str | None = None
    pull_policy: PullPolicy | None = None


class ResourceRequirements(Model):
    """Requests and limits of a container (cpu, memory, ...)."""

    limits: dict[str, Quantity] = Field(default_factory=dict)
    requests: dict[str, Quantity] = Field(default_factory=dict)


class EnvoyContainer(Model):
    """The Envoy container of the proxy Pod."""

    bootstrap: EnvoyBootstrap = Field(default_factory=EnvoyBootstrap)
    image: Image | None = None
    resources: ResourceRequirements | None = None
    security_context: KubeObject | None = Field(
        None, description="A core/v1 SecurityContext, merged over lychgate's defaults key by key."
    )
    env: list[KubeObject] = Field(default_factory=list, description="Extra environment variables.")
    extra_args: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        default_factory=list, max_length=32,
        description="More Envoy arguments; --log-level, --component-log-level and --disable-hot-restart are lychgate's.")
    extra_volume_mounts: list[KubeObject] = Field(default_factory=list, description="core/v1 VolumeMounts.")


class ProxyDeployment(Model):
    """The proxy's Deployment."""

    replicas: int | None = Field(None, ge=0, description="Number of proxy Pods (default 1).")
    strategy: KubeObject | None = Field(None, description="An apps/v1 DeploymentStrategy.")


class LocalObjectReference(Model):
    name: str = Field(min_length=1)


class PodTemplate(Model):
    """The proxy's Pod template."""

    extra_labels: dict[str, str] = Field(default_factory=dict)
    extra_annotations: dict[str, str] = Field(default_factory=dict)
    security_context: KubeObject | None = Field(
        None, description="A core/v1 PodSecurityContext, merged over lychgate's defaults key by key."
    )
    image_pull_secrets: list[LocalObjectReference] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: KubeObject | None = None
    tolerations: list[KubeObject] = Field(default_factory=list)
    topology_spread_constraints: list[KubeObject] = Field(default_factory=list)
    termination_grace_period_seconds: int | None = Field(None, ge=0, le=31536000)
    priority_class_name: str | None = None
    graceful_shutdown: GracefulShutdown | None = None
    startup_probe: KubeObject | None = Field(None, description="A core/v1 Probe for the Envoy container.")
    readiness_probe: KubeObject | None = Field(None, description="Replaces lychgate's readiness probe.")
    liveness_probe: KubeObject | None = None
    extra_volumes: list[KubeObject] = Field(default_factory=list, description="core/v1 Volumes.")


class GracefulShutdown(Model):
    """Before Envoy stops: fail its health check (the Pod leaves the Service's
    endpoints) and wait `sleepTimeSeconds` for requests in flight."""

    enabled: bool | None = None
    sleep_time_seconds: int | None = Field(None, ge=0, le=31536000)


class ProxyService(Model):
    """The Service in front of the proxy (named after the Gateway)."""

    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] | None = Field(
        None, description="Service type (default LoadBalancer)."
    )
    cluster_ip: str | None = Field(None, alias="clusterIP")
    extra_labels: dict[str, str] = Field(default_factory=dict)
    extra_annotations: dict[str, str] = Field(default_factory=dict)
    external_traffic_policy: Literal["Cluster", "Local"] | None = None
    load_balancer_class: str | None = None
    load_balancer_source_ranges: list[str] = Field(default_factory=list)
    ports: list[ServicePortConfig] = Field(default_factory=list, description="Per Gateway port: its nodePort.")
    ip_families: list[Literal["IPv4", "IPv6"]] = Field(default_factory=list, max_length=2, alias="ipFamilies")
    ip_family_policy: Literal["SingleStack", "PreferDualStack", "RequireDualStack"] | None = None


class ServicePortConfig(Model):
    port: int = Field(ge=1, le=65535, description="A Gateway listener port.")
    node_port: int | None = Field(None, ge=1, le=65535)


class ProxyServiceAccount(Model):
    """The proxy's ServiceAccount."""

    extra_labels: dict[str, str] = Field(default_factory=dict)
    extra_annotations: dict[str, str] = Field(default_factory=dict)


class OverlayMetadata(Model):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class ResourceOverlay(Model):
    """Changes laid over a generated object: labels and annotations added, `spec`
    merged as a strategic merge patch (lists of named items merge by name)."""

    metadata: OverlayMetadata | None = None
    spec: KubeObject | None = None


class KubernetesProxyConfig(Model):
    """`spec.kube`: shapes the proxy's Deployment, Pod and Service (kgateway field names)."""

    deployment: ProxyDeployment | None = None
    envoy_container: EnvoyContainer = Field(default_factory=EnvoyContainer)
    pod_template: PodTemplate | None = None
    service: ProxyService | None = None
    service_account: ProxyServiceAccount | None = None
    stats: StatsConfig | None = None
    omit_default_security_context: bool | None = Field(
        None, description="Render no securityContext but the ones given (platforms such as OpenShift set their own).")
    # Overlays apply after everything else: the class's, then the Gateway's.
    deployment_overlay: ResourceOverlay | None = None
    service_overlay: ResourceOverlay | None = None
    service_account_overlay: ResourceOverlay | None = None
    # Present: the object is created for the proxy (its selector or target filled in).
    pod_disruption_budget: ResourceOverlay | None = None
    horizontal_pod_autoscaler: ResourceOverlay | None = None
    vertical_pod_autoscaler: ResourceOverlay | None = None


class GatewayParametersSpec(Model):
    kube: KubernetesProxyConfig = Field(default_factory=KubernetesProxyConfig)


class GatewayParameters(Resource):
    """Infrastructure of the proxies of the Gateways that refer to it (or of a whole class)."""

    KIND: ClassVar[str] = "GatewayParameters"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1alpha1",)
    spec: GatewayParametersSpec = Field(default_factory=GatewayParametersSpec)
