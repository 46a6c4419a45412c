"""Parts of kgateway's Backend that its AI types reuse: a host and port (a static
Backend's hosts, an AI prompt guard's webhook) and AWS credentials (a Lambda or
EC2 Backend's, a Bedrock provider's)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from lychgate.api.base import Model
from lychgate.api.lychgate import LocalObjectReference


class Host(Model):
    host: str = Field(min_length=1, description="Host name or IP address.")
    port: int = Field(ge=1, le=65535)


class AwsAssumeRole(Model):
    """kgateway's STS role chaining: the ambient credentials assume this role.
    Loaded so kgateway manifests load; translation refuses it (translate/aws_lambda.py)."""

    role_arn: str = Field(min_length=1, max_length=2048, pattern=r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$")


class AwsAuth(Model):
    """Credentials from a Secret of the Backend's namespace (`type: Secret`: keys
    `accessKey`, `secretKey` and optionally `sessionToken`), or an IAM role to assume
    (`type: AssumeRole`, which lychgate refuses at translation)."""

    type: Literal["Secret", "AssumeRole"]
    secret_ref: LocalObjectReference | None = None
    assume_role: AwsAssumeRole | None = None

    @model_validator(mode="after")
    def _by_type(self) -> AwsAuth:
        # kgateway's four CEL rules, in its words
        if self.secret_ref is not None and self.type != "Secret":
            raise ValueError("secretRef must be nil if the type is not 'Secret'")
        if self.secret_ref is None and self.type == "Secret":
            raise ValueError("secretRef must be specified when type is 'Secret'")
        if self.assume_role is not None and self.type != "AssumeRole":
            raise ValueError("assumeRole must be nil if the type is not 'AssumeRole'")
        if self.assume_role is None and self.type == "AssumeRole":
            raise ValueError("assumeRole must be specified when type is 'AssumeRole'")
        return self
