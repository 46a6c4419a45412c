"""A route table split into scopes (xds/translator/scoped.py), through real Envoy.

The threshold is lowered to 8 hosts so a small table is split (70 hosts: the
two wildcard routes copied into every scope must stay a small share): Envoy's
connection manager hashes each request's Host into a scope key (an early header
mutation: lychgate's Envoy module, or a CEL expression; the tests run with
each) as the translator hashed the route hostnames,
and every request must still reach what the whole table would route it to:
exact hosts in any case and with a port, wildcard hosts, the catch-all, hosts
added and removed while running, WebSocket upgrades only where the backend
speaks WebSocket, and all of it again once the table has grown a bit of key
(more scopes). A static Envoy with both scope keys answers its scope number
for any Host, to hold the module's hash, CEL's and the translator's together.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import random
import re
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
from google.protobuf import json_format, wrappers_pb2

from lychgate import native
from lychgate.deploy.local import envoy_binary
from lychgate.xds.translator import scope_module as scope_module_ext
from lychgate.xds.translator import scoped
from lychgate.xds.translator.listener import ads_source
from lychgate.xds.translator.scoped import SCOPE_ROUTES
from tests.e2e.test_http_features import Stack
from tests.harness import EchoBackends, Lychgate, free_port, wait_for

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


def scope_module() -> Path:
    """The built module: `make install` builds it (gcc), and these tests must not pass on CEL alone."""
    module = native.scope_module()
    assert module is not None, "src/lychgate/native/liblychgate_scope.so is not built: run `make native`"
    return module


@pytest.fixture(params=["native", "cel"])
def key(request: pytest.FixtureRequest) -> str:
    """Who computes the scope key: lychgate's Envoy module, or CEL."""
    if request.param == "native":
        scope_module()
    return str(request.param)


@pytest.fixture
def bits(key: str) -> int:
    """The bits of the table's key: 140 routes make 2 scopes with CEL (SCOPE_ROUTES a scope),
    8 with lychgate's module (NATIVE_SCOPE_ROUTES)."""
    return scoped.scope_bits(2 * len(HOSTS), native=key == "native")


def bucket(host: str, bits: int, key: str) -> int:
    """The scope the translator puts `host` in, with the hash of the `key` the test runs with."""
    return scoped.bucket(host, bits, native=key == "native")


@pytest.fixture
def stack(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, key: str,
          bits: int) -> Iterator[Stack]:
    monkeypatch.setenv("LYCHGATE_ROUTE_SCOPE_THRESHOLD", "8")
    monkeypatch.setenv("LYCHGATE_NATIVE_SCOPE_KEY", str(key == "native").lower())
    lg = Lychgate(tmp_path_factory.mktemp("scoped"))
    loop = EchoBackends()
    try:
        for i, host in enumerate(HOSTS):
            lg.write(f"route-{i}.yaml", route(f"r{i}", host, ("v1", "v2", "v3")[i % 3]))
        # Two wildcard routes in every scope may not outweigh the exact routes (2 per host).
        assert 2 * len(HOSTS) >= (1 << bits) * 2, "the wildcard routes would keep the table whole"
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


def key_extension(stack: Stack) -> str:
    """The type of the early header mutation that sets the scope key on port 8080."""
    admin = stack.lg.proxies()["default/gw"]["admin"]
    dump = httpx.get(f"http://{admin}/config_dump").json()
    [listeners] = [c for c in dump["configs"] if c["@type"].endswith("ListenersConfigDump")]
    [listener] = [d["active_state"]["listener"] for d in listeners["dynamic_listeners"] if d["name"] == "http-8080"]
    [mutation] = listener["filter_chains"][0]["filters"][0]["typed_config"]["early_header_mutation_extensions"]
    return str(mutation["typed_config"]["@type"]).rsplit(".", 1)[-1]


def test_every_request_reaches_what_the_whole_table_routes_it_to(stack: Stack, key: str, bits: int) -> None:
    lg = stack.lg
    lg.wait_pod(stack.addr, "v2", host=HOSTS[1])
    # Envoy holds scopes, not one table, keyed as configured.
    assert scope_names(stack) == {f"http-8080/{i}" for i in range(1 << bits)}
    assert key_extension(stack) == {"native": "DynamicModuleEarlyHeaderMutation", "cel": "HeaderMutation"}[key]
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


def test_a_table_that_doubles_keeps_its_scopes_and_routes_as_before(stack: Stack, bits: int) -> None:
    """Past the routes a scope may hold (SCOPE_ROUTES; NATIVE_SCOPE_ROUTES with the module),
    a growing table keeps its key (a new key would change the listener under draining
    connections): the scopes grow, and every request still goes where the whole table
    would send it."""
    lg = stack.lg
    lg.wait_pod(stack.addr, "v2", host=HOSTS[1])
    before = scope_names(stack)
    assert before == {f"http-8080/{i}" for i in range(1 << bits)}
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



def test_a_policy_on_a_route_of_a_split_table_applies_to_that_route_only(stack: Stack, key: str, bits: int) -> None:
    """Policies turn filters on per route; Envoy finds the scope before it builds
    the filter chain, so they apply in a split table as in a whole one."""
    lg = stack.lg
    # Two hosts in one scope: the policy on the first must not reach the second.
    i, j = next((i, j) for i in range(len(HOSTS)) for j in range(i + 1, len(HOSTS))
                if bucket(HOSTS[i], bits, key) == bucket(HOSTS[j], bits, key))
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
    other = next(h for h in HOSTS if bucket(h, bits, key) != bucket(limited, bits, key))
    for host in (neighbour, other, "unknown.example"):
        assert all(pod(stack, host) != 429 for _ in range(4)), host


# An HTTPS listener's table is named after the listener (and its ListenerSet): no length limit.
TABLE = "https-443-" + "listener" * 40


def _scope_numbers_manager(bits: int, native_key: bool) -> hcm_pb.HttpConnectionManager:
    """lychgate's scope key of `bits` bits on a connection manager whose scope i answers "i"."""
    table = scoped.scoped_routes(TABLE, ads_source())
    table.ClearField("scoped_rds")
    for i in range(1 << bits):
        scope = table.scoped_route_configurations_list.scoped_route_configurations.add(
            name=scoped.scope_name(TABLE, i))
        scope.key.fragments.add(string_key=scoped.scope_name(TABLE, i))
        host = scope.route_configuration.virtual_hosts.add(name="any", domains=["*"])
        answer = host.routes.add()
        answer.match.prefix = "/"
        answer.direct_response.status = 200
        answer.direct_response.body.inline_string = str(i)
    hcm = hcm_pb.HttpConnectionManager(stat_prefix="key", scoped_routes=table)
    hcm.early_header_mutation_extensions.append(scoped.scope_key_mutation(TABLE, bits, native_key))
    hcm.http_filters.add(name="envoy.filters.http.router").typed_config.Pack(router_pb2.Router())
    return hcm


def _answer(port: int, host: str | None, version: str = "HTTP/1.1") -> str:
    """The body (or the status, when not 200) Envoy answers a request with this
    Host header as sent (None: no Host header)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn._http_vsn_str = version
    try:
        conn.putrequest("GET", "/", skip_host=True, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host.encode())
        conn.endheaders()
        response = conn.getresponse()
        body = response.read().decode()
        return body if response.status == 200 else f"status {response.status}"
    finally:
        conn.close()


def _hosts() -> list[str]:
    """Route hostnames and requests' Hosts: generated names, upper case, ports,
    IP literals, characters no hostname has."""
    rng = random.Random(11)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-."
    names = [f"h{i}.scoped.example" for i in range(70)]
    names += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(300)]
    odd = "_*~!$&'()+,;=%@:[]ÄΩ"
    out = [sent for name in names for sent in (name, name.upper(), f"{name}:8080", name.title())]
    out += [f"{rng.randint(0, 255)}.{rng.randint(0, 255)}.0.{rng.randint(0, 255)}:{rng.randint(1, 65535)}"
            for _ in range(30)]
    out += ["[::1]:8080", "[fe80::1]", "a_b.example", "a.example:", "a.example:x", "a.example:80:80",
            ":8080", "-", ".", "A", "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z" * 4]
    for _ in range(200):
        name = list(rng.choice(names))
        name[rng.randrange(len(name))] = rng.choice(odd)
        out.append("".join(name))
    return out


def _expected(sent: str, bits: int, native: bool) -> int:
    """The scope of a Host as the translator hashes route hostnames: bucket() of the Host
    without a trailing ':<digits>' port (a Host with any other character: 0)."""
    return scoped.bucket(re.sub(r":[0-9]*$", "", sent), bits, native)


@pytest.mark.parametrize("bits", [1, 2, 3, scoped.MAX_BITS, scoped.NATIVE_MAX_BITS])
def test_envoy_hashes_a_host_into_the_scope_the_translator_puts_it_in(tmp_path: Path, bits: int) -> None:
    """lychgate's module and the CEL expression (up to its 6 bits), each on a listener of one
    Envoy, agree with bucket() on every Host, each with its own hash: route hostnames in any
    case, with ports, IPs, other characters, an empty Host."""
    module = scope_module()
    ports = {kind: free_port() for kind in ("native", "cel")[:2 if bits <= scoped.MAX_BITS else 1]}
    listeners = []
    for kind, port in ports.items():
        manager = json_format.MessageToDict(_scope_numbers_manager(bits, kind == "native"))
        manager["@type"] = "type.googleapis.com/" + hcm_pb.HttpConnectionManager.DESCRIPTOR.full_name
        listeners.append({
            "name": kind, "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
            "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                            "typed_config": manager}]}]})
    (tmp_path / "envoy.json").write_text(json.dumps({"static_resources": {"listeners": listeners}}))
    envoy = subprocess.Popen([envoy_binary(), "-c", str(tmp_path / "envoy.json"), "--disable-hot-restart",
                              "--base-id", str(ports["native"]), "-l", "error"],
                             stderr=(tmp_path / "envoy.log").open("wb"),
                             env={**os.environ, "ENVOY_DYNAMIC_MODULES_SEARCH_PATH": str(module.parent)})
    try:
        for kind, port in ports.items():
            wait_for(lambda kind=kind, port=port: _answer(port, "a") == str(_expected("a", bits, kind == "native")),
                     20, f"the static Envoy ({(tmp_path / 'envoy.log').read_text()[-2000:]})")
        answered = 0
        for sent in _hosts():
            answers = {kind: _answer(port, sent) for kind, port in ports.items()}
            # Envoy refuses some odd Hosts before any key: both listeners alike.
            assert len({a.isdigit() or a for a in answers.values()}) == 1, (sent, answers)
            for kind, got in answers.items():
                if got.isdigit():
                    assert int(got) == _expected(sent, bits, kind == "native"), (sent, kind)
                    answered += kind == "native"
        assert answered > 1500  # most are keyed
        # An empty Host is scope 0; Envoy refuses a request without one before any key.
        assert {_answer(port, "") for port in ports.values()} == {"0"}
        for version in ("HTTP/1.1", "HTTP/1.0"):
            assert len({_answer(port, None, version) for port in ports.values()}) == 1, version
    finally:
        envoy.terminate()
        envoy.wait(10)


@pytest.mark.parametrize("key", [
    f"{scoped._SETS[0]} {scoped._SETS[1]}",  # the parity sets an earlier lychgate gave its module
    f"#{scoped.NATIVE_MAX_BITS + 1}", "#0", "#", "",
])
def test_envoy_refuses_a_key_the_module_cannot_compute(tmp_path: Path, key: str) -> None:
    """The module takes `#<bits>` of its own hash and nothing else: Envoy refuses the listener
    (here in its validate mode) rather than key scopes with another hash than the translator's."""
    module = scope_module()

    def validate(config: str) -> subprocess.CompletedProcess[str]:
        manager = _scope_numbers_manager(3, native_key=True)
        extension = manager.early_header_mutation_extensions[0]
        mutation = scope_module_ext.mutation_class()()
        extension.typed_config.Unpack(mutation)
        mutation.early_header_mutation_config.Pack(wrappers_pb2.StringValue(value=config))
        extension.typed_config.Pack(mutation)
        typed = json_format.MessageToDict(manager)
        typed["@type"] = "type.googleapis.com/" + hcm_pb.HttpConnectionManager.DESCRIPTOR.full_name
        (tmp_path / "envoy.json").write_text(json.dumps({"static_resources": {"listeners": [{
            "name": "key", "address": {"socket_address": {"address": "127.0.0.1", "port_value": free_port()}},
            "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                            "typed_config": typed}]}]}]}}))
        return subprocess.run([envoy_binary(), "--mode", "validate", "-c", str(tmp_path / "envoy.json"), "-l", "error"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "ENVOY_DYNAMIC_MODULES_SEARCH_PATH": str(module.parent)})

    prefix = f"{scoped.SCOPE_HEADER} {TABLE}/ {scoped._ALPHABET}"
    assert validate(f"{prefix} #3").returncode == 0  # what lychgate sends
    refused = validate(f"{prefix} {key}".rstrip())
    assert refused.returncode != 0
    assert "dynamic module early header mutation config" in refused.stdout + refused.stderr
