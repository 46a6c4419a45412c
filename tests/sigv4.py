"""SigV4 checked as AWS checks it, for the stand-ins of AWS services (Lambda, Bedrock):
the signature recomputed with botocore (AWS's own signing code) from the request as it
arrived: its method, the path as sent, the headers it says it signed, its body."""

from __future__ import annotations

from aiohttp import web
from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.compat import HTTPHeaders  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]


class _SignedHeaders(SigV4Auth):
    """botocore's SigV4, over exactly the headers the request says it signed (botocore
    itself would leave out user-agent, which Envoy signs)."""

    def __init__(self, names: list[str], credentials: Credentials, service: str, region: str) -> None:
        super().__init__(credentials, service, region)
        self.names = names

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        out = HTTPHeaders()
        for name in self.names:
            out[name] = request.headers[name]
        return out


def expected_signature(request: web.Request, body: bytes, signed: list[str], credentials: Credentials,
                       service: str, region: str) -> str:
    """The signature AWS computes for the request with these credentials (the timestamp
    is the request's x-amz-date)."""
    aws = AWSRequest(method=request.method, url=f"http://{request.headers['host']}{request.raw_path}",
                     data=body, headers={n: request.headers.get(n, "") for n in signed})
    aws.context["timestamp"] = request.headers.get("x-amz-date", "")
    signer = _SignedHeaders(signed, credentials, service, region)
    return str(signer.signature(signer.string_to_sign(aws, signer.canonical_request(aws)), aws))
