"""Lambda Backends → Envoy's aws_lambda filter: off by default in a listener
whose routes invoke a function, turned on per route with that function's ARN,
invocation mode, payload mode, Host and credentials; the filter signs the
invocation (SigV4) and turns the function's JSON answer into the response."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.aws_lambda.v3 import aws_lambda_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.host_flags import any_host
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route

FILTER = "envoy.filters.http.aws_lambda"
# The filter needs an ARN even while off; every route that turns it on brings its own.
_PLACEHOLDER_ARN = "arn:aws:lambda:us-east-1:000000000000:function:lychgate-unused"


def config(fn: ir.AwsLambda) -> aws_lambda_pb2.Config:
    out = aws_lambda_pb2.Config(
        arn=fn.arn, payload_passthrough=fn.passthrough, host_rewrite=fn.host,
        invocation_mode=aws_lambda_pb2.Config.ASYNCHRONOUS if fn.asynchronous else aws_lambda_pb2.Config.SYNCHRONOUS)
    if fn.credentials is not None:
        access, secret, token = fn.credentials
        out.credentials.CopyFrom(aws_lambda_pb2.Credentials(
            access_key_id=access, secret_access_key=secret, session_token=token or ""))
    return out


def _invokes_here(vh: ir.VirtualHost) -> bool:
    return any(isinstance(r.action, ir.Forward) and r.action.aws_lambda is not None for r in vh.routes)


def _invokes(listener: ir.HTTPListener) -> bool:
    return any_host(listener, _invokes_here)


class AwsLambda(Feature):
    name = "aws_lambda"
    order = 95  # last before the router: everything else sees the request as the client sent it

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if _invokes(listener):
            add_disabled_filter(hcm, FILTER, aws_lambda_pb2.Config(arn=_PLACEHOLDER_ARN))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if isinstance(route.action, ir.Forward) and route.action.aws_lambda is not None:
            enable_on_route(out, FILTER, aws_lambda_pb2.PerRouteConfig(invoke_config=config(route.action.aws_lambda)))


register(AwsLambda())
