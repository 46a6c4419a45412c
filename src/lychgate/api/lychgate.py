"""lychgate's own kinds (gateway.lychgate.dev/v1alpha1)."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from lychgate.api import kube_types as k8s
from lychgate.api.base import Model, Resource
from lychgate.api.format_dict import JsonObject
from lychgate.api.stats import StatsConfig
from lychgate.api.status import NoStatus

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

# Overlay patches: free-form by nature (a strategic merge patch of any object).
KubeObject = dict[str, Any]


class LogFormat(Model):
    """Envoy's application log format (`--log-format`): a format string, or JSON fields."""

    # Passed on as --log-format text, which Envoy takes whatever it says (api/format_dict.py).
    json_: JsonObject | None = Field(None, alias="json")
    text: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> LogFormat:
        if (self.json_ is None) == (self.text is None):
            raise ValueError("exactly one of json, text must be set")
        return self


class IoUring(Model):
    enabled: bool | None = None


class DnsResolver(Model):
    udp_max_queries: int | None = Field(
        None, ge=0, description="UDP queries on one UDP channel before another is opened (0: no limit).")


class Overload(Model):
    """lychgate's own (kgateway has no such field): the proxy's load shedding limits, docs/edge.md."""

    max_heap_size: Quantity | None = Field(
        None, description="Heap Envoy sheds load at (503s from 98%); default 80% of "
        "envoyContainer.resources.limits.memory, else 1Gi.")
    max_downstream_connections: int | None = Field(
        None, ge=1, le=2147483647, description="Client connections the proxy holds; more are closed as they "
        "are accepted. Default: one per 32 KiB of the heap limit (32768 for 1Gi).")


class EnvoyBootstrap(Model):
    """What Envoy starts with: its log level (all components) and per-component levels."""

    log_level: EnvoyLogLevel = "info"
    component_log_levels: dict[str, EnvoyLogLevel] = Field(default_factory=dict)
    log_format: LogFormat | None = None
    dns_resolver: DnsResolver | None = Field(None, description="Envoy's c-ares DNS resolver, for every cluster.")
    enable_readiness_probe_proxy_protocol: bool | None = Field(
        None, description="The readiness port expects a PROXY protocol header (a load balancer adds it).")
    io_uring: IoUring | None = Field(
        None, description="enabled: Envoy's default socket interface uses io_uring (Linux 5.11+) for network I/O.")
    overload: Overload | None = Field(None, description="The overload manager's heap limit and the connection limit.")


class Image(Model):
    """A container image, part by part; unset parts keep those of the default proxy image."""

    registry: str | None = None
    repository: str | None = None
    tag: str | None = None
    digest: str | None = None
    pull_policy: PullPolicy | None = None


class ResourceClaim(Model):
    """One of the Pod's resource claims (dynamic resource allocation) the container uses."""

    name: str = Field(min_length=1)
    request: str | None = None


class ResourceRequirements(Model):
    """Requests and limits of a container (cpu, memory, ...), and its resource claims."""

    limits: dict[str, Quantity] = Field(default_factory=dict)
    requests: dict[str, Quantity] = Field(default_factory=dict)
    claims: list[ResourceClaim] = Field(default_factory=list)


class EnvoyContainer(Model):
    """The Envoy container of the proxy Pod."""

    bootstrap: EnvoyBootstrap = Field(default_factory=EnvoyBootstrap)
    image: Image | None = None
    resources: ResourceRequirements | None = None
    security_context: k8s.SecurityContext | None = Field(
        None, description="A core/v1 SecurityContext, merged over lychgate's defaults key by key."
    )
    env: list[k8s.EnvVar] = Field(default_factory=list, description="Extra environment variables.")
    extra_args: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        default_factory=list, max_length=32,
        description="More Envoy arguments; --log-level, --component-log-level and --disable-hot-restart are lychgate's.")
    extra_volume_mounts: list[k8s.VolumeMount] = Field(default_factory=list, description="core/v1 VolumeMounts.")


class ProxyDeployment(Model):
    """The proxy's Deployment."""

    replicas: int | None = Field(None, ge=0, description="Number of proxy Pods (default 1).")
    strategy: k8s.DeploymentStrategy | None = Field(None, description="An apps/v1 DeploymentStrategy.")


class LocalObjectReference(Model):
    name: str = Field(min_length=1)


class PodTemplate(Model):
    """The proxy's Pod template."""

    extra_labels: dict[str, str] = Field(default_factory=dict)
    extra_annotations: dict[str, str] = Field(default_factory=dict)
    security_context: k8s.PodSecurityContext | None = Field(
        None, description="A core/v1 PodSecurityContext, merged over lychgate's defaults key by key."
    )
    image_pull_secrets: list[LocalObjectReference] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: k8s.Affinity | None = None
    tolerations: list[k8s.Toleration] = Field(default_factory=list)
    topology_spread_constraints: list[k8s.TopologySpreadConstraint] = Field(default_factory=list)
    termination_grace_period_seconds: int | None = Field(None, ge=0, le=31536000)
    priority_class_name: str | None = None
    graceful_shutdown: GracefulShutdown | None = None
    startup_probe: k8s.Probe | None = Field(None, description="A core/v1 Probe for the Envoy container.")
    readiness_probe: k8s.Probe | None = Field(None, description="Replaces lychgate's readiness probe.")
    liveness_probe: k8s.Probe | None = None
    extra_volumes: list[k8s.Volume] = Field(default_factory=list, description="core/v1 Volumes.")


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


class PodDisruptionBudget(ResourceOverlay):
    """A PodDisruptionBudget for the proxy's Pods: lychgate fills in `spec.selector`."""

    spec: k8s.PodDisruptionBudgetSpec | None = None


class HorizontalPodAutoscaler(ResourceOverlay):
    """A HorizontalPodAutoscaler (autoscaling/v2) of the proxy's Deployment: lychgate fills in
    `spec.scaleTargetRef`; `maxReplicas` is the user's to give (in this or a lower layer)."""

    spec: k8s.HorizontalPodAutoscalerSpec | None = None


class VerticalPodAutoscaler(ResourceOverlay):
    """A VerticalPodAutoscaler (autoscaling.k8s.io/v1) of the proxy's Deployment: lychgate fills in
    `spec.targetRef`. The cluster needs the VPA's CRD (the Kubernetes autoscaler project's)."""

    spec: k8s.VerticalPodAutoscalerSpec | None = None


class SdsBootstrap(Model):
    log_level: Literal["debug", "info", "warn", "error", "panic", "fatal"] | None = None


class SdsContainer(Model):
    """The SDS sidecar: serves the Istio workload certificates to Envoy (rendered with `istio`)."""

    image: Image | None = None
    security_context: k8s.SecurityContext | None = None
    resources: ResourceRequirements | None = None
    bootstrap: SdsBootstrap | None = None


class IstioContainer(Model):
    """The istio-proxy sidecar: fetches the workload certificates from istiod (it runs no Envoy)."""

    image: Image | None = None
    security_context: k8s.SecurityContext | None = None
    resources: ResourceRequirements | None = None
    log_level: Literal["debug", "info", "warning", "error"] | None = None
    istio_discovery_address: str | None = Field(None, min_length=1)
    istio_meta_mesh_id: str | None = Field(None, min_length=1)
    istio_meta_cluster_id: str | None = Field(None, min_length=1)


class IstioIntegration(Model):
    """Present: the proxy Pod joins the Istio mesh (istio-proxy and SDS sidecars, as kgateway renders them)."""

    istio_proxy_container: IstioContainer | None = None
    custom_sidecars: list[k8s.Container] = Field(
        default_factory=list, description="Deprecated in kgateway: containers added to the proxy Pod as written.")


class AgentGateway(Model):
    """kgateway's agentgateway data plane: lychgate runs Envoy, so `enabled: true` is refused."""

    enabled: bool | None = None
    log_level: str | None = None
    image: Image | None = None
    security_context: k8s.SecurityContext | None = None
    resources: ResourceRequirements | None = None
    env: list[k8s.EnvVar] = Field(default_factory=list)
    custom_config_map_name: str | None = None


class CustomLabel(Model):
    """A label of the AI extension's request metrics, read from the request's dynamic metadata."""

    name: str = Field(min_length=1)
    metadata_namespace: Literal["envoy.filters.http.jwt_authn", "io.solo.transformation"] | None = Field(
        None, description="Default: envoy.filters.http.jwt_authn (the JWT's claims).")
    metadata_key: str = Field(min_length=1, description="Such as principal:sub.")
    key_delimiter: str | None = Field(None, description="Splits metadataKey (default :).")


class AiExtensionStats(Model):
    custom_labels: list[CustomLabel] = Field(default_factory=list)


class OTelTracesSampler(Model):
    type: Literal["alwaysOn", "alwaysOff", "traceidratio", "parentbasedAlwaysOn", "parentbasedAlwaysOff",
                  "parentbasedTraceidratio"] | None = None
    arg: str | None = Field(None, pattern=r"^(0(\.\d+)?|1(\.0+)?)$", description="The ratio, 0 to 1.")


class AiExtensionTrace(Model):
    """kgateway's OTLP trace export of its AI extension; refused here: lychgate's sends no traces."""

    endpoint: str = Field(min_length=1, max_length=253, pattern=r"^(([^:/?#]+):)(//([^/?#]*))([^?#]*)(\?([^#]*))?(#(.*))?",
                          description="An absolute URI, such as http://otel-collector.monitoring:4317.")
    sampler: OTelTracesSampler | None = None
    timeout: str | None = Field(None, max_length=32, pattern=r"^([0-9]{1,5}(h|m|s|ms)){1,4}$")
    protocol: Literal["grpc", "http/protobuf", "http/json"] | None = None
    transport_security: Literal["secure", "insecure"] | None = None


class AiExtension(Model):
    """The AI extension beside Envoy in the proxy Pod (kgateway's `aiExtension`): it
    translates, guards and counts the requests of AI Backends."""

    enabled: bool | None = Field(
        None, description="Deploy the extension before any route uses an AI Backend. A Gateway whose routes use "
                          "one always has it (false does not remove it: those routes could not be served).")
    image: Image | None = None  # over lychgate's own (the controller's): it runs `lychgate ai-extension`
    security_context: k8s.SecurityContext | None = None
    resources: ResourceRequirements | None = None
    env: list[k8s.EnvVar] = Field(default_factory=list)
    ports: list[k8s.ContainerPort] = Field(
        default_factory=list, description="core/v1 ContainerPorts. The one named ai-monitoring is where the "
                                          "extension serves its token metrics (default 9092).")
    stats: AiExtensionStats | None = Field(
        None, description="customLabels are refused: the extension's metrics are labelled by gateway, route, "
                          "backend, provider and model.")
    tracing: AiExtensionTrace | None = None


class KubernetesProxyConfig(Model):
    """`spec.kube`: shapes the proxy's Deployment, Pod and Service (kgateway field names)."""

    deployment: ProxyDeployment | None = None
    envoy_container: EnvoyContainer = Field(default_factory=EnvoyContainer)
    sds_container: SdsContainer | None = None
    istio: IstioIntegration | None = None
    agentgateway: AgentGateway | None = Field(None, alias="agentgateway")
    ai_extension: AiExtension | None = None
    floating_user_id: bool | None = Field(
        None, description="No runAsUser in the rendered securityContexts: the platform picks the user (OpenShift).")
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
    pod_disruption_budget: PodDisruptionBudget | None = None
    horizontal_pod_autoscaler: HorizontalPodAutoscaler | None = None
    vertical_pod_autoscaler: VerticalPodAutoscaler | None = None


class SelfManaged(Model):
    """`selfManaged: {}` (kgateway's empty SelfManagedGateway): no settings of its own."""


class GatewayParametersSpec(Model):
    kube: KubernetesProxyConfig = Field(default_factory=KubernetesProxyConfig)
    self_managed: SelfManaged | None = Field(
        None, description="Present: lychgate deploys nothing for these Gateways (no Deployment, Service or local "
                          "Envoy); it serves their xDS and status, and the user runs the proxy.")

    @model_validator(mode="after")
    def _one_platform(self) -> GatewayParametersSpec:
        if self.self_managed is not None and "kube" in self.model_fields_set:
            raise ValueError("exactly one of kube, selfManaged may be set")
        return self


class GatewayParameters(Resource):
    """Infrastructure of the proxies of the Gateways that refer to it (or of a whole class)."""

    KIND: ClassVar[str] = "GatewayParameters"
    STATUS: ClassVar[type[Model] | None] = NoStatus
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1alpha1",)
    spec: GatewayParametersSpec = Field(default_factory=GatewayParametersSpec)
