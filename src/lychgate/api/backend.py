"""Backend (gateway.lychgate.dev/v1alpha1): a destination that is not a Service.

Field for field kgateway's `Backend` (api/v1alpha1/kgateway/backend_types.go):
`static` hosts and ports outside the cluster, a `dynamicForwardProxy` that goes
wherever the request's Host names, an `aws.lambda` function, `priorityGroups`
(failover between groups of other Backends), `ai` (LLM providers, api/ai.py) and
`mcp` (MCP servers served as one, api/mcp.py).
Routes name it as a backendRef (`group: gateway.lychgate.dev, kind: Backend`); so
do GatewayExtensions. `type` is deprecated in kgateway and inferred from the one
configuration given.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from lychgate.api.ai import AIBackend
from lychgate.api.backend_common import AwsAuth, Host
from lychgate.api.base import Model, Resource
from lychgate.api.lychgate import GROUP, LocalObjectReference
from lychgate.api.mcp import MCPBackend
from lychgate.api.status import ConditionsStatus

# Groups a reference to a Backend may name: ours, and kgateway's so its manifests load unchanged.
GROUPS = frozenset({GROUP, "gateway.kgateway.dev"})

AppProtocol = Literal["http2", "grpc", "grpc-web", "kubernetes.io/h2c", "kubernetes.io/ws"]


class StaticBackend(Model):
    hosts: list[Host] = Field(min_length=1)
    app_protocol: AppProtocol | None = None


class DynamicForwardProxyBackend(Model):
    enable_tls: bool | None = Field(
        None, description="TLS to the requested host, verified against the system CAs with its name as SNI and SAN.")


AccountId = Annotated[str, Field(min_length=1, max_length=12, pattern=r"^[0-9]{12}$")]


class AwsLambda(Model):
    account_id: AccountId | None = None
    endpoint_url: str | None = Field(None, alias="endpointURL", max_length=2048,
                                     pattern=r"^https?://[-a-zA-Z0-9@:%.+~#?&/=]+$")
    function_name: str = Field(pattern=r"^[A-Za-z0-9-_]{1,140}$")
    invocation_mode: Literal["Sync", "Async"] = "Sync"
    qualifier: str = Field("$LATEST", pattern=r"^(\$LATEST|[0-9]+|[A-Za-z0-9-_]{1,128})$")
    payload_transform_mode: Literal["None", "Envoy"] = "Envoy"


class AwsBackend(Model):
    lambda_: AwsLambda = Field(alias="lambda")
    # kgateway's older place of the account: lambda.accountId is read first
    account_id: AccountId | None = None
    auth: AwsAuth | None = None
    region: str = Field("us-east-1", min_length=1, max_length=63, pattern=r"^[a-z0-9-]+$")

    @model_validator(mode="after")
    def _account(self) -> AwsBackend:
        if self.lambda_.account_id is None and self.account_id is None:
            raise ValueError("lambda.accountId (or the older accountId) must be specified")
        return self

    @property
    def account(self) -> str:
        """The function's account: `lambda.accountId`, else the older `accountId`, as kgateway reads them."""
        account = self.lambda_.account_id or self.account_id
        assert account is not None
        return account


class PriorityGroup(Model):
    """One failover level: Backends (same namespace, not priority groups themselves)
    balanced together while any of them is healthy."""

    backend_refs: list[LocalObjectReference] = Field(min_length=1)


BackendType = Literal["AI", "AWS", "Static", "DynamicForwardProxy", "PriorityGroups", "MCP"]


class BackendSpec(Model):
    type: BackendType | None = Field(None, description="Deprecated: inferred from the configuration given.")
    ai: AIBackend | None = Field(None, description="LLM providers behind an OpenAI-compatible endpoint.")
    aws: AwsBackend | None = None
    static: StaticBackend | None = None
    dynamic_forward_proxy: DynamicForwardProxyBackend | None = None
    mcp: MCPBackend | None = Field(None, description="MCP servers behind one MCP endpoint.")
    priority_groups: list[PriorityGroup] | None = Field(
        None, min_length=1, description="Ordered failover levels: traffic goes to the first group whose Backends "
                                        "are healthy (health from the BackendConfigPolicy healthCheck or "
                                        "outlierDetection on this Backend).")

    @model_validator(mode="after")
    def _one(self) -> BackendSpec:
        given = [t for t, v in (("AI", self.ai), ("AWS", self.aws), ("Static", self.static),
                                ("DynamicForwardProxy", self.dynamic_forward_proxy),
                                ("PriorityGroups", self.priority_groups), ("MCP", self.mcp)) if v is not None]
        if len(given) != 1:
            raise ValueError("exactly one of ai, aws, static, dynamicForwardProxy, mcp, or priorityGroups must be "
                             "specified")
        if self.type is not None and self.type != given[0]:
            raise ValueError("backend configuration must match the specified type")
        return self

    @property
    def kind(self) -> BackendType:
        if self.ai is not None:
            return "AI"
        if self.aws is not None:
            return "AWS"
        if self.static is not None:
            return "Static"
        if self.mcp is not None:
            return "MCP"
        return "DynamicForwardProxy" if self.dynamic_forward_proxy is not None else "PriorityGroups"


class Backend(Resource):
    """A backend outside the cluster's Services that routes can send traffic to."""

    KIND: ClassVar[str] = "Backend"
    STATUS: ClassVar[type[Model] | None] = ConditionsStatus
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1alpha1",)
    spec: BackendSpec
