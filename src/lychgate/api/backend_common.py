"""Parts of kgateway's Backend that its AI types reuse: a host and port (a static
Backend's hosts, an AI prompt guard's webhook) and AWS credentials from a Secret
(a Lambda Backend's, a Bedrock provider's)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from lychgate.api.base import Model
from lychgate.api.lychgate import LocalObjectReference


class Host(Model):
    host: str = Field(min_length=1, description="Host name or IP address.")
    port: int = Field(ge=1, le=65535)


class AwsAuth(Model):
    """Credentials from a Secret of the Backend's namespace: keys `accessKey`,
    `secretKey` and optionally `sessionToken`."""

    type: Literal["Secret"]
    secret_ref: LocalObjectReference | None = None

    @model_validator(mode="after")
    def _secret(self) -> AwsAuth:
        if self.secret_ref is None:
            raise ValueError("secretRef must be specified when type is 'Secret'")
        return self
