"""BackendConfigPolicy `tunnel` with a real Envoy and a real CONNECT proxy on loopback:
requests reach a Backend whose name resolves nowhere only through the proxy (which
logs the CONNECT); a proxy that refuses the credentials, or is not there, answers 503."""

from __future__ import annotations

import pytest

from tests.harness import free_port
from tests.policies import connect_proxy
from tests.policies.conftest import Stack, condition, lychgate_object
from tests.policies.servers import body_of

pytestmark = pytest.mark.e2e

AUTH = "Basic dXNlcjpwYXNz"


def backend(name: str, host: str, port: int) -> str:
    return lychgate_object("Backend", name, f"  static:\n    hosts: [{{host: {host}, port: {port}}}]")


def tunnel_policy(name: str, proxy: str, secret: str) -> str:
    return lychgate_object("BackendConfigPolicy", name, f"""  targetRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: {name}}}]
  tunnel:
    proxy: {{backendRef: {{group: gateway.lychgate.dev, kind: Backend, name: {proxy}}}}}
    headers: [{{name: Proxy-Authorization, secretRef: {{name: {secret}, key: authorization}}}}]""")


def secret(name: str, value: str) -> str:
    # a trailing newline, as a file-made Secret has: it is not sent
    return f"apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}}}\nstringData:\n  authorization: |\n    {value}\n"


def to_backend(name: str) -> str:
    return f"- backendRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: {name}}}]"


def test_tunnel_through_connect_proxy(stack: Stack) -> None:
    app = stack.servers.echo("behind-proxy")
    proxy = connect_proxy.start(stack.servers, {"destination.internal:8080": ("127.0.0.1", app.port)}, AUTH)
    stack.write("tunnel.yaml",
                secret("proxy-creds", AUTH), secret("wrong-creds", "Basic d3Jvbmc6Y3JlZHM="),
                backend("connect-proxy", "127.0.0.1", proxy.port),
                backend("connect-proxy-down", "127.0.0.1", free_port()),  # nothing listens there
                backend("tunnel-http", "destination.internal", 8080),
                tunnel_policy("tunnel-http", "connect-proxy", "proxy-creds"),
                backend("tunnel-rejected", "destination.internal", 8080),
                tunnel_policy("tunnel-rejected", "connect-proxy", "wrong-creds"),
                backend("tunnel-proxy-down", "destination.internal", 8080),
                tunnel_policy("tunnel-proxy-down", "connect-proxy-down", "proxy-creds"),
                stack.route("tunnel-http", "http.tunnel.example.com", to_backend("tunnel-http")),
                stack.route("tunnel-rejected", "rejected.tunnel.example.com", to_backend("tunnel-rejected")),
                stack.route("tunnel-proxy-down", "down.tunnel.example.com", to_backend("tunnel-proxy-down")))
    resp = stack.wait("http.tunnel.example.com", lambda r: r.status_code == 200, what="the tunneled Backend")
    assert body_of(resp)["pod"] == "behind-proxy"
    assert ("destination.internal:8080", 200) in proxy.log  # it went through the proxy
    # the proxy says 407 to the wrong credentials: Envoy cannot open the tunnel
    rejected = stack.wait("rejected.tunnel.example.com", lambda r: r.status_code == 503)
    assert rejected.status_code == 503 and ("destination.internal:8080", 407) in proxy.log
    assert stack.wait("down.tunnel.example.com", lambda r: r.status_code == 503).status_code == 503
    for name in ("tunnel-http", "tunnel-rejected", "tunnel-proxy-down"):
        ancestors = stack.status("BackendConfigPolicy", name)["ancestors"]
        assert condition(ancestors[0]["conditions"], "Accepted")["status"] == "True"
