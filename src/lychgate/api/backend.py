"""Backend (gateway.lychgate.dev/v1alpha1): a destination that is not a Service.

Field for field kgateway's `Backend` (api/v1alpha1/kgateway/backend_types.go):
`static` hosts and ports outside the cluster, a `dynamicForwardProxy` that goes
wherever the request's Host names, an `aws.lambda` function (or `aws.ec2`
instances found by tag, which lychgate loads but refuses to serve), a `gcp`
service called with the Google identity token of the proxy's service account,
`priorityGroups` (failover between groups of other Backends), `ai` (LLM providers,
api/ai.py) and `mcp` (MCP servers served as one, api/mcp.py).
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
from lychgate.api.rules import exactly_one_of
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


class AwsTagKeyValueFilter(Model):
    key: str = Field(min_length=1, max_length=128)
    value: str = Field(min_length=1, max_length=256)


class AwsTagFilter(Model):
    """Instances carrying tag `key` (any value), or the tag `keyValue.key` with `keyValue.value`."""

    key: str | None = Field(None, min_length=1, max_length=128)
    key_value: AwsTagKeyValueFilter | None = None

    RULES = (exactly_one_of("key", "key_value"),)


class AwsEc2(Model):
    """kgateway's EC2 discovery: running instances of the region matching every filter.
    Loaded so kgateway manifests load; translation refuses it (translate/aws_lambda.py)."""

    port: int = Field(80, ge=1, le=65535)
    address_type: Literal["PrivateIP", "PublicIP"] = "PrivateIP"
    filters: list[AwsTagFilter] | None = Field(None, max_length=16)


class AwsBackend(Model):
    lambda_: AwsLambda | None = Field(None, alias="lambda")
    ec2: AwsEc2 | None = None
    # kgateway's older place of the account: lambda.accountId is read first
    account_id: AccountId | None = None
    auth: AwsAuth | None = None
    region: str = Field("us-east-1", min_length=1, max_length=63, pattern=r"^[a-z0-9-]+$")

    RULES = (exactly_one_of("lambda_", "ec2"),)

    @model_validator(mode="after")
    def _account(self) -> AwsBackend:
        if self.lambda_ is not None and self.lambda_.account_id is None and self.account_id is None:
            raise ValueError("lambda.accountId (or the older accountId) must be specified")
        return self

    @property
    def function(self) -> AwsLambda:
        """`lambda`, for code that serves only Lambda Backends (ec2 is refused first)."""
        assert self.lambda_ is not None
        return self.lambda_

    @property
    def account(self) -> str:
        """The function's account: `lambda.accountId`, else the older `accountId`, as kgateway reads them."""
        account = self.function.account_id or self.account_id
        assert account is not None
        return account


class GcpBackend(Model):
    """A Google Cloud service (Cloud Run, Cloud Functions...) at `host`:443 over TLS,
    called with an identity token for `audience` (translate/gcp.py)."""

    host: str = Field(min_length=1, description="The service's host name: where requests go, its SNI and Host.")
    audience: str | None = Field(None, min_length=1, description='The identity token\'s audience; '
                                                                 'default "https://<host>".')

    @property
    def audience_url(self) -> str:
        return self.audience or f"https://{self.host}"


class PriorityGroup(Model):
    """One failover level: Backends (same namespace, not priority groups themselves)
    balanced together while any of them is healthy."""

    backend_refs: list[LocalObjectReference] = Field(min_length=1)


BackendType = Literal["AI", "AWS", "Static", "DynamicForwardProxy", "GCP", "PriorityGroups", "MCP"]


class BackendSpec(Model):
    type: BackendType | None = Field(None, description="Deprecated: inferred from the configuration given.")
    ai: AIBackend | None = Field(None, description="LLM providers behind an OpenAI-compatible endpoint.")
    aws: AwsBackend | None = None
    static: StaticBackend | None = None
    dynamic_forward_proxy: DynamicForwardProxyBackend | None = None
    gcp: GcpBackend | None = Field(None, description="A Google Cloud service called with the proxy's identity token.")
    mcp: MCPBackend | None = Field(None, description="MCP servers behind one MCP endpoint.")
    priority_groups: list[PriorityGroup] | None = Field(
        None, min_length=1, description="Ordered failover levels: traffic goes to the first group whose Backends "
                                        "are healthy (health from the BackendConfigPolicy healthCheck or "
                                        "outlierDetection on this Backend).")

    RULES = (exactly_one_of("ai", "aws", "static", "dynamic_forward_proxy", "gcp", "mcp", "priority_groups"),)

    @model_validator(mode="after")
    def _type(self) -> BackendSpec:
        # The deprecated `type` names the one configuration RULES let through.
        if self.type is not None and self.type != self.kind:
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
        if self.gcp is not None:
            return "GCP"
        return "DynamicForwardProxy" if self.dynamic_forward_proxy is not None else "PriorityGroups"


class Backend(Resource):
    """A backend outside the cluster's Services that routes can send traffic to."""

    KIND: ClassVar[str] = "Backend"
    STATUS: ClassVar[type[Model] | None] = ConditionsStatus
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1alpha1",)
    spec: BackendSpec
