"""`aws.lambda` Backends: the function's ARN, the endpoint that serves it and the
credentials Envoy signs the invocation with (SigV4).

The function is served at `lambda.<region>.amazonaws.com:443` over TLS (system
CAs), or at `lambda.endpointURL` (for testing against a local endpoint). Without
`auth`, Envoy finds credentials itself (environment, web identity, EKS Pod
Identity); with `auth.type: Secret` they come from the Secret's `accessKey`,
`secretKey` and optional `sessionToken`.

Two kgateway shapes load but are refused here (`refusal`), so the Backend is not
Accepted and its routes answer 500: `aws.ec2` (kgateway's controller lists the
region's instances through the EC2 API and serves those matching the tag filters;
lychgate calls no AWS API) and `auth.type: AssumeRole` (STS role chaining: Envoy
1.40's aws_lambda filter signs only with fixed credentials or its default chain,
and lychgate calls no STS itself).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from lychgate import ir
from lychgate.api.backend import Backend
from lychgate.api.core import Secret
from lychgate.store import Store
from lychgate.translate.secrets import secret_value


class LambdaProblem(ValueError):
    """Why a Lambda Backend cannot be served (shown on the Backend and its routes)."""


EC2_REFUSED = ("discovering EC2 instances needs the AWS EC2 API (DescribeInstances), which lychgate does not "
               "call; route to the instances through a static Backend or a Service instead")
ASSUME_ROLE_REFUSED = ("lychgate does not assume IAM roles: that needs AWS STS, which lychgate does not call, and "
                       "Envoy's aws_lambda filter signs only with fixed credentials or its default credential chain; "
                       "use type: Secret, or give the proxy the role's credentials (web identity, Pod Identity)")


def refusal(backend: Backend) -> str:
    """What of an `aws` Backend lychgate refuses to serve, naming the field, or ""."""
    aws = backend.spec.aws
    assert aws is not None
    if aws.ec2 is not None:
        return f"spec.aws.ec2: {EC2_REFUSED}"
    if aws.auth is not None and aws.auth.assume_role is not None:
        return f"spec.aws.auth.assumeRole: {ASSUME_ROLE_REFUSED}"
    return ""


def endpoint(backend: Backend) -> tuple[str, str, int]:
    """(scheme, host, port) of the Lambda endpoint."""
    aws = backend.spec.aws
    assert aws is not None
    fn = aws.function
    if fn.endpoint_url is None:
        return "https", f"lambda.{aws.region}.amazonaws.com", 443
    url = urlsplit(fn.endpoint_url)
    if not url.hostname:
        raise LambdaProblem(f"aws.lambda.endpointURL {fn.endpoint_url!r} names no host")
    return url.scheme, url.hostname, url.port or (443 if url.scheme == "https" else 80)


def function(store: Store, backend: Backend) -> ir.AwsLambda:
    aws = backend.spec.aws
    assert aws is not None
    fn = aws.function
    arn = f"arn:aws:lambda:{aws.region}:{aws.account}:function:{fn.function_name}"
    if fn.qualifier != "$LATEST":
        arn += f":{fn.qualifier}"
    credentials = None
    if aws.auth is not None and aws.auth.secret_ref is not None:
        name = aws.auth.secret_ref.name
        secret = store.get(Secret, backend.namespace, name)
        if secret is None:
            raise LambdaProblem(f"aws.auth.secretRef: Secret {backend.namespace}/{name} not found")
        access, key = secret_value(secret, "accessKey"), secret_value(secret, "secretKey")
        if not access or not key:
            raise LambdaProblem(f"aws.auth.secretRef: Secret {backend.namespace}/{name} needs accessKey and secretKey")
        credentials = (access, key, secret_value(secret, "sessionToken") or None)
    scheme, host, port = endpoint(backend)
    default_port = 443 if scheme == "https" else 80
    return ir.AwsLambda(arn=arn, host=host if port == default_port else f"{host}:{port}",
                        asynchronous=fn.invocation_mode == "Async", passthrough=fn.payload_transform_mode == "None",
                        credentials=credentials)
