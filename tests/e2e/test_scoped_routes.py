"""A route table split into scopes (xds/translator/scoped.py), through real Envoy.

The threshold is lowered to 8 hosts so a small table is split (70 hosts: the
two wildcard routes copied into every scope must stay a small share): Envoy's Lua
filter hashes each request's Host into a scope as the translator hashed the
route hostnames, and every request must still reach what the whole table would
route it to: exact hosts in any case and with a port, wildcard hosts, the
catch-all, hosts added and removed while running, WebSocket upgrades only
where the backend speaks WebSocket.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import aiohttp
import httpx
import pytest

from lychgate.xds.translator.scoped import SCOPES
from tests.e2e.test_http_features import Stack
from tests.harness import EchoBackends, Lychgate

pytestmark = pytest.mark.e2e

HOSTS = [f"h{i}.scoped.example" for i in range(70)]


def route(name: str, host: str, backend: str) -> str:
    """An exact host gets a /ws rule (to the WebSocket Service for v3) and a rule for
    the rest; a wildcard or catch-all route one rule, as it is copied into every scope."""
    rules = [f"{{backendRefs: [{{name: {backend}, port: 80}}]}}"]
    if host and "*" not in host:
        ws = "ws" if backend == "v3" else backend
        rules.insert(0, f"{{matches: [{{path: {{type: PathPrefix, value: /ws}}}}], backendRefs: [{{name: {ws}, port: 80}}]}}")
    return f"""
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {{name: {name}}}
        spec:
          parentRefs: [{{name: gw}}]
          hostnames: {f'["{host}"]' if host else "[]"}
          rules: [{", ".join(rules)}]
    """


@pytest.fixture
def stack(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    monkeypatch.setenv("LYCHGATE_ROUTE_SCOPE_THRESHOLD", "8")
    lg = Lychgate(tmp_path_factory.mktemp("scoped"))
    loop = EchoBackends()
    try:
        for i, host in enumerate(HOSTS):
            lg.write(f"route-{i}.yaml", route(f"r{i}", host, ("v1", "v2", "v3")[i % 3]))
        # Two wildcard routes in every scope may not outweigh the exact routes (2 per host).
        assert 2 * len(HOSTS) >= SCOPES * 2, "the wildcard routes would keep the table whole"
        lg.write("wild.yaml", route("wild", "*.wild.example", "v2"))
        lg.write("any.yaml", route("any", "", "v1"))
        yield Stack(lg, loop)
    finally:
        lg.close()
        loop.close()


def pod(stack: Stack, host: str, path: str = "/") -> str | int:
    return stack.lg.pod(stack.addr, path, host=host)


def test_every_request_reaches_what_the_whole_table_routes_it_to(stack: Stack) -> None:
    lg = stack.lg
    lg.wait_pod(stack.addr, "v2", host=HOSTS[1])
    # Envoy holds scopes, not one table.
    admin = lg.proxies()["default/gw"]["admin"]
    dump = httpx.get(f"http://{admin}/config_dump").json()
    [scopes] = [c for c in dump["configs"] if c["@type"].endswith("ScopedRoutesConfigDump")]
    names = {c["name"] for d in scopes["dynamic_scoped_route_configs"] for c in d["scoped_route_configs"]}
    assert {f"http-8080/{i}" for i in range(SCOPES)} <= names
    for i, host in enumerate(HOSTS):
        assert pod(stack, host) == ("v1", "v2", "v3")[i % 3], host
    assert pod(stack, HOSTS[4].upper()) == "v2"  # Host is case-insensitive
    assert pod(stack, f"{HOSTS[5]}:8080") == "v3"  # and its port is ignored
    assert pod(stack, "a.wild.example") == "v2"
    assert pod(stack, "unknown.example") == "v1"  # the catch-all route, in every scope
    # The scope key header is ours: backends never see it.
    seen = stack.backends["v2"].seen[-1]
    assert "x-lychgate-scope" not in seen.headers
    # `lychgate debug` finds every translated route on the proxy, scopes and all.
    report = json.loads(lg.cli("debug", "-o", "json").stdout)
    [config] = [f for f in report["findings"] if f["step"] == "config"]
    assert config["ok"], config


def test_hosts_come_and_go_while_running(stack: Stack) -> None:
    lg = stack.lg
    lg.wait_pod(stack.addr, "v2", host=HOSTS[1])
    lg.write("new.yaml", route("new", "new.scoped.example", "v3"))
    lg.wait_pod(stack.addr, "v3", host="new.scoped.example")
    lg.delete(f"route-{1}.yaml")
    lg.wait_pod(stack.addr, "v1", host=HOSTS[1])  # the catch-all takes over
    assert pod(stack, HOSTS[2]) == "v3"  # the other hosts keep serving


def test_websocket_upgrades_only_where_the_backend_speaks_websocket(stack: Stack) -> None:
    lg = stack.lg
    ws_host, plain_host = HOSTS[2], HOSTS[0]  # route to the ws Service, and to a plain one
    lg.wait_pod(stack.addr, "v3", host=ws_host)

    async def talk(host: str) -> str:
        async with aiohttp.ClientSession() as session, session.ws_connect(
            f"http://{stack.addr}:8080/ws", headers={"host": host}, timeout=aiohttp.ClientWSTimeout(ws_close=5)
        ) as ws:
            await ws.send_str("hello")
            return await ws.receive_str(timeout=5)

    assert asyncio.run(talk(ws_host)) == "hello"
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        asyncio.run(talk(plain_host))
    assert refused.value.status == 403
