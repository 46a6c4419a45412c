"""lychgate's own kinds (gateway.lychgate.dev/v1alpha1)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from lychgate.api.base import Model, OpenModel, Resource

GROUP = "gateway.lychgate.dev"

EnvoyLogLevel = Literal["trace", "debug", "info", "warn", "error", "critical", "off"]


class EnvoyBootstrap(Model):
    log_level: EnvoyLogLevel = "info"
    component_log_levels: dict[str, EnvoyLogLevel] = Field(default_factory=dict)


class EnvoyContainer(OpenModel):
    """Envoy container settings; `bootstrap` is interpreted, the rest is passed on."""

    bootstrap: EnvoyBootstrap = Field(default_factory=EnvoyBootstrap)


class KubernetesProxyConfig(OpenModel):
    """`spec.kube`: shapes the proxy's Deployment, Pod and Service (kgateway field names)."""

    envoy_container: EnvoyContainer = Field(default_factory=EnvoyContainer)


class GatewayParametersSpec(OpenModel):
    kube: KubernetesProxyConfig = Field(default_factory=KubernetesProxyConfig)


class GatewayParameters(Resource):
    KIND: ClassVar[str] = "GatewayParameters"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1alpha1",)
    spec: GatewayParametersSpec = Field(default_factory=GatewayParametersSpec)
