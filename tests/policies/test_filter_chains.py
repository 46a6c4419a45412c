"""Which filters a listener carries, and what happens to open connections when that
changes: real Envoy, a real ext_authz server, keep-alive clients (httpx).

A listener without policies carries no policy filter; its first policy adds them,
which makes Envoy drain the connections of the old filter chain. Those must never
reach a backend without the new policy (xds/translator/chain_routes.py)."""

from __future__ import annotations

import httpx
import pytest

from tests.harness import wait_for
from tests.policies.conftest import Stack
from tests.policies.test_ext_auth import ext, policy

pytestmark = pytest.mark.e2e

DENY_WITHOUT_TOKEN = "  extAuth:\n    extensionRef: {name: chains}\n"


def http_filters(stack: Stack) -> list[str]:
    """The HTTP filters of the active http-8080 listener in Envoy, once it is not warming."""
    admin = stack.lg.proxies()["default/gw"]["admin"]
    dump = stack.lg.client.get(f"http://{admin}/config_dump?resource=dynamic_listeners").json()
    [listener] = [c for c in dump["configs"] if c["name"] == "http-8080"]
    if "warming_state" in listener:
        return []
    [chain] = listener["active_state"]["listener"]["filter_chains"]
    return [f["name"] for f in chain["filters"][0]["typed_config"]["http_filters"]]


def local_port(resp: httpx.Response) -> int:
    return int(resp.extensions["network_stream"].get_extra_info("client_addr")[1])


def test_a_listeners_first_policy_never_lets_an_open_connection_past_it(stack: Stack) -> None:
    stack.write("chains-route.yaml", stack.route("chains", "chains.example.com"))
    stack.wait("chains.example.com", lambda r: r.status_code == 200)
    # No policy anywhere on the listener: the router is all it runs.
    assert wait_for(lambda: http_filters(stack) == ["envoy.filters.http.router"], 10, "a bare listener")

    auth = stack.servers.auth("chains")
    stack.service("auth-chains", auth.port)
    url = f"http://{stack.addr}:8080/"
    host = {"host": "chains.example.com"}
    with httpx.Client(timeout=5) as old:
        first = old.get(url, headers=host)
        assert first.status_code == 200
        opened_before = local_port(first)
        stack.write("chains-auth.yaml", ext("chains", "auth-chains", auth.port),
                    policy("chains", "chains", DENY_WITHOUT_TOKEN))
        wait_for(lambda: any(f.startswith("envoy.filters.http.ext_authz") for f in http_filters(stack)), 10,
                 "the listener to carry the ext_authz filter")
        # The connection opened before runs the old chain, without ext_authz: it is
        # answered 503 and closed, never forwarded unauthenticated.
        stale = old.get(url, headers=host)
        assert stale.status_code == 503, stale.text
        assert "send the request again" in stale.text
        assert stale.headers.get("connection") == "close"  # Envoy drains it at once
        # The client's next request opens a connection on the new chain: authenticated.
        again = old.get(url, headers=host)
        assert again.status_code == 403 and local_port(again) != opened_before
        assert old.get(url, headers={**host, "authorization": "Bearer good"}).status_code == 200


def test_a_cors_filter_enters_the_chain_with_the_first_cors_route(stack: Stack) -> None:
    rules = """\
    - filters:
      - type: CORS
        cors: {allowOrigins: ["https://app.example.com"], allowMethods: [GET]}
      backendRefs: [{name: app, port: 80}]
    """
    stack.write("cors-route.yaml", stack.route("cors", "cors.example.com", rules))
    preflight = {"origin": "https://app.example.com", "access-control-request-method": "GET"}
    answer = stack.wait("cors.example.com", lambda r: "access-control-allow-origin" in r.headers,
                        method="OPTIONS", headers=preflight)
    assert answer.headers["access-control-allow-origin"] == "https://app.example.com"
    assert "envoy.filters.http.cors" in http_filters(stack)
