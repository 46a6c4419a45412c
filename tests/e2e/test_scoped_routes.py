"""A route table split into scopes (xds/translator/scoped.py), through real Envoy.

The threshold is lowered to 8 hosts so a small table is split (70 hosts: the
two wildcard routes copied into every scope must stay a small share): Envoy's
connection manager hashes each request's Host into a scope key (an early header
mutation with a CEL expression) as the translator hashed the route hostnames,
and every request must still reach what the whole table would route it to:
exact hosts in any case and with a port, wildcard hosts, the catch-all, hosts
added and removed while running, WebSocket upgrades only where the backend
speaks WebSocket, and all of it again once the table has grown a bit of key
(more scopes). A static Envoy with the same scope key answers its scope number
for any Host, to hold Envoy's hash and the translator's together.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import httpx
import pytest
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from google.protobuf import json_format

from lychgate.deploy.local import envoy_binary
from lychgate.xds.translator import scoped
from lychgate.xds.translator.listener import ads_source
from lychgate.xds.translator.scoped import SCOPE_ROUTES
from tests.e2e.test_http_features import Stack
from tests.harness import EchoBackends, Lychgate, free_port, wait_for

pytestmark = pytest.mark.e2e

HOSTS = [f"h{i}.scoped.example" for i in range(70)]
BITS = 1  # 140 routes: the fewest scopes, 2


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
        assert 2 * len(HOSTS) >= (1 << BITS) * 2, "the wildcard routes would keep the table whole"
        assert 2 * len(HOSTS) <= SCOPE_ROUTES << BITS
        lg.write("wild.yaml", route("wild", "*.wild.example", "v2"))
        lg.write("any.yaml", route("any", "", "v1"))
        yield Stack(lg, loop)
    finally:
        lg.close()
        loop.close()


def pod(stack: Stack, host: str, path: str = "/") -> str | int:
    return stack.lg.pod(stack.addr, path, host=host)


def scope_names(stack: Stack) -> set[str]:
    """The scopes Envoy holds for the table of port 8080."""
    admin = stack.lg.proxies()["default/gw"]["admin"]
    dump = httpx.get(f"http://{admin}/config_dump").json()
    [scopes] = [c for c in dump["configs"] if c["@type"].endswith("ScopedRoutesConfigDump")]
    return {c["name"] for d in scopes["dynamic_scoped_route_configs"] for c in d["scoped_route_configs"]
            if c["name"].startswith("http-8080/")}


def test_every_request_reaches_what_the_whole_table_routes_it_to(stack: Stack) -> None:
    lg = stack.lg
    lg.wait_pod(stack.addr, "v2", host=HOSTS[1])
    # Envoy holds scopes, not one table.
    assert scope_names(stack) == {f"http-8080/{i}" for i in range(1 << BITS)}
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


def test_a_table_that_doubles_keeps_its_scopes_and_routes_as_before(stack: Stack) -> None:
    """Past SCOPE_ROUTES routes a scope a growing table keeps its key (a new key
    would change the listener under draining connections): the scopes grow,
    and every request still goes where the whole table would send it."""
    lg = stack.lg
    lg.wait_pod(stack.addr, "v2", host=HOSTS[1])
    before = scope_names(stack)
    assert before == {f"http-8080/{i}" for i in range(1 << BITS)}
    # 2 routes a host: past SCOPE_ROUTES routes in each scope
    grown = [f"g{i}.scoped.example" for i in range(SCOPE_ROUTES - len(HOSTS) + 10)]
    lg.write("grown.yaml", "---".join(textwrap.dedent(route(f"g{i}", host, "v3")) for i, host in enumerate(grown)))
    lg.wait_pod(stack.addr, "v3", host=grown[-1], timeout=30)
    assert scope_names(stack) == before
    for i, host in enumerate(HOSTS):
        assert pod(stack, host) == ("v1", "v2", "v3")[i % 3], host
    assert all(pod(stack, host) == "v3" for host in grown[::25])
    assert pod(stack, HOSTS[4].upper()) == "v2"
    assert pod(stack, f"{grown[7].upper()}:8080") == "v3"
    assert pod(stack, "a.wild.example") == "v2"
    assert pod(stack, "unknown.example") == "v1"


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



def test_a_policy_on_a_route_of_a_split_table_applies_to_that_route_only(stack: Stack) -> None:
    """Policies turn filters on per route; Envoy finds the scope before it builds
    the filter chain, so they apply in a split table as in a whole one."""
    lg = stack.lg
    # Two hosts in one scope: the policy on the first must not reach the second.
    i, j = next((i, j) for i in range(len(HOSTS)) for j in range(i + 1, len(HOSTS))
                if scoped.bucket(HOSTS[i], BITS) == scoped.bucket(HOSTS[j], BITS))
    limited, neighbour = HOSTS[i], HOSTS[j]
    lg.write("limit.yaml", f"""
        apiVersion: gateway.lychgate.dev/v1alpha1
        kind: TrafficPolicy
        metadata: {{name: limit}}
        spec:
          targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r{i}}}]
          rateLimit:
            local:
              tokenBucket: {{maxTokens: 2, tokensPerFill: 1, fillInterval: 1h}}
    """)
    lg.wait_pod(stack.addr, 429, host=limited, timeout=20)
    assert pod(stack, limited.upper()) == 429  # whatever the case of the Host
    # The table is still split, and the routes beside it (same scope or not) are not limited.
    admin = lg.proxies()["default/gw"]["admin"]
    dump = httpx.get(f"http://{admin}/config_dump").json()
    assert any(c["@type"].endswith("ScopedRoutesConfigDump") and c.get("dynamic_scoped_route_configs")
               for c in dump["configs"])
    other = next(h for h in HOSTS if scoped.bucket(h, BITS) != scoped.bucket(limited, BITS))
    for host in (neighbour, other, "unknown.example"):
        assert all(pod(stack, host) != 429 for _ in range(4)), host


def _scope_numbers_manager(bits: int) -> hcm_pb.HttpConnectionManager:
    """lychgate's scope key of `bits` bits on a connection manager whose scope i answers "i"."""
    table = scoped.scoped_routes("key", ads_source())
    table.ClearField("scoped_rds")
    for i in range(1 << bits):
        scope = table.scoped_route_configurations_list.scoped_route_configurations.add(
            name=scoped.scope_name("key", i))
        scope.key.fragments.add(string_key=scoped.scope_name("key", i))
        host = scope.route_configuration.virtual_hosts.add(name="any", domains=["*"])
        answer = host.routes.add()
        answer.match.prefix = "/"
        answer.direct_response.status = 200
        answer.direct_response.body.inline_string = str(i)
    hcm = hcm_pb.HttpConnectionManager(stat_prefix="key", scoped_routes=table)
    hcm.early_header_mutation_extensions.append(scoped.scope_key_mutation("key", bits))
    hcm.http_filters.add(name="envoy.filters.http.router").typed_config.Pack(router_pb2.Router())
    return hcm


@pytest.mark.parametrize("bits", [2, scoped.MAX_BITS])
def test_envoy_hashes_a_host_into_the_scope_the_translator_puts_it_in(tmp_path: Path, bits: int) -> None:
    port = free_port()
    manager = json_format.MessageToDict(_scope_numbers_manager(bits))
    manager["@type"] = "type.googleapis.com/" + hcm_pb.HttpConnectionManager.DESCRIPTOR.full_name
    bootstrap = {"static_resources": {"listeners": [{
        "name": "key", "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                        "typed_config": manager}]}]}]}}
    (tmp_path / "envoy.json").write_text(json.dumps(bootstrap))
    envoy = subprocess.Popen([envoy_binary(), "-c", str(tmp_path / "envoy.json"), "--disable-hot-restart",
                              "--base-id", str(port), "-l", "error"], stderr=(tmp_path / "envoy.log").open("wb"))
    rng = random.Random(11)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-."
    hosts = [f"h{i}.scoped.example" for i in range(70)]
    hosts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(300)]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            wait_for(lambda: client.get("/", headers={"host": "a"}).status_code == 200, 20, "the static Envoy")
            for host in hosts:
                for sent in (host, host.upper(), f"{host}:8080"):
                    answer = client.get("/", headers={"host": sent})
                    assert answer.text == str(scoped.bucket(host, bits)), sent
            # A Host no exact host can match goes to scope 0, where the wildcard
            # hosts and the catch-all are too.
            for other in ("a_b.example", "[::1]:8080"):
                assert client.get("/", headers={"host": other}).text == "0", other
    finally:
        envoy.terminate()
        envoy.wait(10)
