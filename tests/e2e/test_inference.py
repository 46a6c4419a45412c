"""InferencePool backends: a real ext_proc endpoint picker choosing model servers through real Envoy."""

from __future__ import annotations

import asyncio
import textwrap
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.certs import CA
from tests.e2e.test_backend_tls import _ca_configmap
from tests.harness import EchoBackends, Lychgate, free_port, gateway_yaml, service_yaml, wait_for
from tests.picker import SERVED_HEADER, EndpointPicker

pytestmark = pytest.mark.e2e

# Model-server stand-ins: one loopback address each (a Pod IP), all on the pool's target port.
SERVERS = {"ms-1": "127.0.30.101", "ms-2": "127.0.30.102", "ms-3": "127.0.30.103"}


def pod_yaml(name: str, ip: str, app: str, ready: bool = True) -> str:
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}, namespace: default, labels: {{app: {app}}}}}
        spec: {{containers: [{{name: server, image: vllm}}]}}
        status:
          phase: Running
          podIP: {ip}
          conditions: [{{type: Ready, status: "{ready}"}}]
        """)


def only_pool_yaml(name: str, app: str, port: int, picker: str, failure_mode: str = "FailClose") -> str:
    return textwrap.dedent(f"""\
        apiVersion: inference.networking.k8s.io/v1
        kind: InferencePool
        metadata: {{name: {name}, namespace: default}}
        spec:
          selector: {{matchLabels: {{app: {app}}}}}
          targetPorts: [{{number: {port}}}]
          endpointPickerRef: {{name: {picker}, port: {{number: 9002}}, failureMode: {failure_mode}}}
        """)


def pool_yaml(name: str, app: str, port: int, picker: str, failure_mode: str) -> str:
    """A pool and a route of the same name to it, for host <name>.example.com."""
    return only_pool_yaml(name, app, port, picker, failure_mode) + "---\n" + route_yaml(
        name, f"- backendRefs: [{pool_ref(name)}]\n")


def route_yaml(name: str, rules: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {{name: {name}, namespace: default}}
        spec:
          parentRefs: [{{name: gw}}]
          hostnames: [{name}.example.com]
          rules:
        """) + textwrap.indent(textwrap.dedent(rules), "  ")


def pool_ref(name: str, weight: int = 1) -> str:
    return f"{{group: inference.networking.k8s.io, kind: InferencePool, name: {name}, weight: {weight}}}"


@pytest.fixture
def picker() -> Iterator[EndpointPicker]:
    p = EndpointPicker({}).start()
    yield p
    p.close()


def start_model_servers(lg: Lychgate, backends: EchoBackends, port: int) -> dict[str, str]:
    """The three model servers of SERVERS, Pods labelled app=llm, on `port`: name -> "ip:port"."""
    for name, ip in SERVERS.items():
        backends.start(pod=name, port=port, host=ip)
        lg.write(f"pod-{name}.yaml", pod_yaml(name, ip, "llm"))
    return {name: f"{ip}:{port}" for name, ip in SERVERS.items()}


def test_the_picker_chooses_the_model_server(lychgate: Lychgate, backends: EchoBackends,
                                             picker: EndpointPicker, request: pytest.FixtureRequest) -> None:
    lg = lychgate
    port = free_port()
    endpoints = start_model_servers(lg, backends, port)
    lg.write("pod-down.yaml", pod_yaml("ms-down", "127.0.30.104", "down", ready=False))
    lg.write("epp.yaml", service_yaml("epp", 9002, picker.port))
    lg.write("epp-gone.yaml", service_yaml("epp-gone", 9002, free_port()))  # nothing listens there
    # A plaintext picker whose Service does not say kubernetes.io/h2c: the proxy speaks TLS to it.
    plain = EndpointPicker({endpoints["ms-1"]: 0}, tls=False).start()
    request.addfinalizer(plain.close)
    lg.write("epp-plain.yaml", service_yaml("epp-plain", 9002, plain.port))
    lg.write("llm.yaml", pool_yaml("llm", "llm", port, "epp", "FailClose"))
    lg.write("open.yaml", pool_yaml("open", "llm", port, "epp-gone", "FailOpen"))
    lg.write("closed.yaml", pool_yaml("closed", "llm", port, "epp-gone", "FailClose"))
    # A picker Service without endpoints (its Pods gone, or its selector matching none).
    lg.write("epp-none.yaml", service_yaml("epp-none", 9002, free_port()).split("---")[0])
    lg.write("open-none.yaml", pool_yaml("open-none", "llm", port, "epp-none", "FailOpen"))
    lg.write("closed-none.yaml", pool_yaml("closed-none", "llm", port, "epp-none", "FailClose"))
    lg.write("plain.yaml", pool_yaml("plain", "llm", port, "epp-plain", "FailClose"))
    lg.write("empty.yaml", pool_yaml("empty", "down", port, "epp", "FailOpen"))
    lg.write("gateway.yaml", gateway_yaml())
    picker.queues = {endpoints["ms-1"]: 3, endpoints["ms-2"]: 0, endpoints["ms-3"]: 7}
    lg.start("--inference-extension")
    addr = lg.address()

    # The shortest queue wins, and the request goes where the picker said.
    lg.wait_pod(addr, "ms-2", host="llm.example.com")
    assert {lg.pod(addr, host="llm.example.com") for _ in range(5)} == {"ms-2"}
    assert picker.picked[-1] == endpoints["ms-2"]
    picker.queues[endpoints["ms-3"]] = -1
    assert lg.pod(addr, "/v1/completions", host="llm.example.com", method="POST",
                  json={"model": "llama", "prompt": "hi"}) == "ms-3"
    assert lg.pod(addr, host="llm.example.com", headers={"x-prefer-endpoint": endpoints["ms-1"]}) == "ms-1"

    # Picker unreachable (nothing listens, or no endpoints): FailOpen serves from any
    # ready endpoint, FailClose answers 503.
    served = {lg.pod(addr, host="open.example.com") for _ in range(9)}
    assert served and served <= set(SERVERS), served
    assert lg.pod(addr, host="closed.example.com") == 503
    served = {lg.pod(addr, host="open-none.example.com") for _ in range(9)}
    assert served and served <= set(SERVERS), served
    assert lg.pod(addr, host="closed-none.example.com") == 503
    assert lg.pod(addr, host="plain.example.com") == 503 and plain.requests == 0
    # A pool without a ready endpoint has nothing to serve from, whatever the picker says.
    assert lg.pod(addr, host="empty.example.com") == 503

    status = wait_for(lambda: lg.status("InferencePool", "llm").get("parents"), 10, "InferencePool status")
    (parent,) = status
    assert parent["parentRef"] == {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                   "namespace": "default", "name": "gw"}
    conds = {c["type"]: c for c in parent["conditions"]}
    assert conds["Accepted"]["status"] == "True" and "default/llm" in conds["Accepted"]["message"]
    assert conds["ResolvedRefs"]["status"] == "True"


def test_the_endpoint_picker_protocol_in_full(lychgate: Lychgate, backends: EchoBackends) -> None:
    """Picks as metadata only or header only, fallback lists walked by the rule's retry,
    the served endpoint reported to the picker, and a split over two pools that asks
    only the chosen pool's picker."""
    lg = lychgate
    port = free_port()
    ep = start_model_servers(lg, backends, port)
    # A ready Pod nothing listens on: a model server that just died.
    dead = f"127.0.30.109:{port}"
    lg.write("pod-dead.yaml", pod_yaml("ms-dead", "127.0.30.109", "llm"))
    backends.start(pod="other-1", port=port, host="127.0.30.111")
    lg.write("pod-other.yaml", pod_yaml("other-1", "127.0.30.111", "other"))
    meta = EndpointPicker({ep["ms-1"]: 0}, answer="metadata").start()
    # Plaintext, as a picker run with --secure-serving=false: its Service port says h2c.
    header = EndpointPicker({ep["ms-2"]: 0}, answer="header", tls=False).start()
    other = EndpointPicker({"127.0.30.111:" + str(port): 0}).start()
    try:
        lg.write("epp-meta.yaml", service_yaml("epp-meta", 9002, meta.port))
        lg.write("epp-header.yaml", service_yaml("epp-header", 9002, header.port, app_protocol="kubernetes.io/h2c"))
        lg.write("epp-other.yaml", service_yaml("epp-other", 9002, other.port))
        lg.write("pools.yaml", "---\n".join([
            only_pool_yaml("meta", "llm", port, "epp-meta"), only_pool_yaml("header", "llm", port, "epp-header"),
            only_pool_yaml("other", "other", port, "epp-other")]))
        lg.write("routes.yaml", "---\n".join([
            route_yaml("meta", f"- backendRefs: [{pool_ref('meta')}]\n"),
            route_yaml("header", f"- backendRefs: [{pool_ref('header')}]\n"),
            route_yaml("retry", f"- backendRefs: [{pool_ref('meta')}]\n  retry: {{attempts: 2}}\n"),
            route_yaml("split", f"- backendRefs: [{pool_ref('meta', 50)}, {pool_ref('other', 50)}]\n"),
            route_yaml("mixed", f"- backendRefs: [{pool_ref('other', 50)}, {{name: plain, port: 80, weight: 50}}]\n"),
        ]))
        backends.start(pod="plain-1", port=(plain_port := free_port()))
        lg.write("plain.yaml", service_yaml("plain", 80, plain_port))
        lg.write("gateway.yaml", gateway_yaml())
        lg.start("--inference-extension")
        addr = lg.address()

        # A pick given only as envoy.lb metadata is honoured, as one given only as the header.
        lg.wait_pod(addr, "ms-1", host="meta.example.com")
        assert {lg.pod(addr, host="meta.example.com") for _ in range(5)} == {"ms-1"}
        lg.wait_pod(addr, "ms-2", host="header.example.com")
        assert {lg.pod(addr, host="header.example.com") for _ in range(5)} == {"ms-2"}

        # The picker learns who served, on the response path; the report does not reach the client.
        resp = lg.get(addr, "/v1/completions", host="meta.example.com", method="POST",
                      json={"model": "llama", "prompt": "hi"})
        assert resp.status_code == 200 and resp.json()["pod"] == "ms-1"
        assert resp.json()["method"] == "POST"
        assert resp.headers[SERVED_HEADER] == ep["ms-1"] and meta.served[-1] == ep["ms-1"]
        assert "x-gateway-destination-endpoint-served" not in resp.headers

        # A fallback list: the first endpoint serves; when it is down, the rule's retry
        # goes down the list, and the picker hears which one served. Without a retry, 503.
        prefer = {"x-prefer-endpoint": f"{ep['ms-3']},{ep['ms-2']}"}
        assert lg.pod(addr, host="meta.example.com", headers=prefer) == "ms-3"
        down_first = {"x-prefer-endpoint": f"{dead},{ep['ms-2']}"}
        resp = lg.get(addr, host="retry.example.com", headers=down_first)
        assert resp.status_code == 200 and resp.json()["pod"] == "ms-2"
        assert resp.headers[SERVED_HEADER] == ep["ms-2"] and meta.served[-1] == ep["ms-2"]
        assert lg.pod(addr, host="meta.example.com", headers=down_first) == 503

        # Two pools, 50/50: each request asks the picker of the pool it goes to, and only it.
        before = meta.requests + other.requests
        seen = [lg.pod(addr, host="split.example.com") for _ in range(30)]
        assert set(seen) == {"ms-1", "other-1"}, seen
        assert meta.requests + other.requests - before == 30
        # A pool and a Service: only requests sent to the pool ask its picker.
        before = other.requests
        seen = [lg.pod(addr, host="mixed.example.com") for _ in range(30)]
        assert set(seen) == {"other-1", "plain-1"}, seen
        assert other.requests - before == seen.count("other-1")
    finally:
        for picker in (meta, header, other):
            picker.close()


class DiesBeforeTheResponse(EndpointPicker):
    """Picks, then fails the stream when the response comes back (the picker restarted
    or its connection broke while the model server was answering)."""

    def response_headers(self, served: str, picked: str) -> list[tuple[str, str]]:
        raise RuntimeError("picker gone")


def start_one_model(lg: Lychgate, port: int, picker: EndpointPicker, pools: dict[str, str]) -> str:
    """Model server ms-1 (a Pod on `port`; the caller serves it), `picker` behind the
    Service epp, one pool and route per name in `pools` (name -> failureMode), the
    Gateway; lychgate started. Returns the Gateway's address."""
    lg.write("pod.yaml", pod_yaml("ms-1", SERVERS["ms-1"], "llm"))
    lg.write("epp.yaml", service_yaml("epp", 9002, picker.port))
    for name, failure_mode in pools.items():
        lg.write(f"{name}.yaml", pool_yaml(name, "llm", port, "epp", failure_mode))
    lg.write("gateway.yaml", gateway_yaml())
    lg.start("--inference-extension")
    return lg.address()


def test_a_picker_lost_during_the_response(lychgate: Lychgate, backends: EchoBackends) -> None:
    """The model server answered, but the picker's stream fails on the response path:
    the client gets a 503 whatever the failureMode. Envoy does not fail open once it
    streams the exchange to the picker (FULL_DUPLEX_STREAMED: the picker holds the body)."""
    lg = lychgate
    port = free_port()
    backends.start(pod="ms-1", port=port, host=SERVERS["ms-1"])
    picker = DiesBeforeTheResponse({f"{SERVERS['ms-1']}:{port}": 0}).start()
    try:
        addr = start_one_model(lg, port, picker, {"open": "FailOpen", "closed": "FailClose"})
        for host in ("open.example.com", "closed.example.com"):
            served = len(picker.served)
            assert lg.pod(addr, host=host) == 503
            # The request reached the model server: the picker heard who served it, then failed.
            assert picker.served[served:] == [f"{SERVERS['ms-1']}:{port}"]
    finally:
        picker.close()


def picker_tls_policy(service: str, hostname: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: gateway.networking.k8s.io/v1
        kind: BackendTLSPolicy
        metadata: {{name: {service}, namespace: default}}
        spec:
          targetRefs: [{{group: "", kind: Service, name: {service}}}]
          validation:
            caCertificateRefs: [{{group: "", kind: ConfigMap, name: backend-ca}}]
            hostname: {hostname}
        """)


def test_a_backend_tls_policy_verifies_the_picker(lychgate: Lychgate, backends: EchoBackends) -> None:
    """Without a policy the picker's certificate is not checked (the reference picker's is
    self-signed); a BackendTLSPolicy on the picker's Service has it verified: the right CA
    and name serve, a wrong name fails closed."""
    lg = lychgate
    port = free_port()
    backends.start(pod="ms-1", port=port, host=SERVERS["ms-1"])
    lg.write("pod.yaml", pod_yaml("ms-1", SERVERS["ms-1"], "llm"))
    ca = CA("picker CA")
    picker = EndpointPicker({f"{SERVERS['ms-1']}:{port}": 0}, ca=ca).start()
    try:
        lg.write("ca.yaml", _ca_configmap(ca))
        for name, hostname in (("epp-good", "epp.example.com"), ("epp-bad", "other.example.com")):
            lg.write(f"{name}.yaml", service_yaml(name, 9002, picker.port) + "---\n"
                     + picker_tls_policy(name, hostname))
        lg.write("good.yaml", pool_yaml("good", "llm", port, "epp-good", "FailClose"))
        lg.write("bad.yaml", pool_yaml("bad", "llm", port, "epp-bad", "FailClose"))
        lg.write("gateway.yaml", gateway_yaml())
        lg.start("--inference-extension")
        addr = lg.address()
        lg.wait_pod(addr, "ms-1", host="good.example.com")
        asked = picker.requests
        assert lg.pod(addr, host="bad.example.com") == 503
        assert picker.requests == asked  # the handshake failed: the picker was never asked
    finally:
        picker.close()


class SlowPicker(EndpointPicker):
    """Takes its time, as a picker queueing a request until a model server has room."""

    def choose(self, headers: dict[str, str], body: bytes) -> list[str] | int:
        time.sleep(1.0)
        return super().choose(headers, body)


def test_a_picker_may_queue_the_request(lychgate: Lychgate, backends: EchoBackends) -> None:
    """A pick that takes a second is waited for. Measured: in FULL_DUPLEX_STREAMED mode
    Envoy arms no ext_proc message timer (not its 200 ms default, not even a configured
    500 ms); the route's timeout bounds the wait."""
    lg = lychgate
    port = free_port()
    backends.start(pod="ms-1", port=port, host=SERVERS["ms-1"])
    picker = SlowPicker({f"{SERVERS['ms-1']}:{port}": 0}).start()
    try:
        addr = start_one_model(lg, port, picker, {"slow": "FailClose"})
        lg.wait_pod(addr, "ms-1", host="slow.example.com")
        assert lg.pod(addr, "/v1/completions", host="slow.example.com", method="POST",
                      json={"model": "llama", "prompt": "hi"}) == "ms-1"
    finally:
        picker.close()


def test_a_streamed_answer_streams_through_the_picker(lychgate: Lychgate, backends: EchoBackends) -> None:
    """The response body goes through the picker chunk by chunk: a model server's
    text/event-stream reaches the client token by token, not once the answer is complete.
    The server sends its second event only after the client has read the first."""
    from aiohttp import web

    lg = lychgate
    port = free_port()
    first_read = threading.Event()

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"data: one\n\n")
        await asyncio.get_running_loop().run_in_executor(None, first_read.wait, 10)
        await resp.write(b"data: two\n\n")
        await resp.write_eof()
        return resp

    async def serve() -> web.AppRunner:
        app = web.Application()
        app.router.add_get("/{tail:.*}", stream)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, SERVERS["ms-1"], port).start()
        return runner

    runner = asyncio.run_coroutine_threadsafe(serve(), backends.loop).result(10)
    backends.runners.append(runner)
    picker = EndpointPicker({f"{SERVERS['ms-1']}:{port}": 0}).start()
    try:
        addr = start_one_model(lg, port, picker, {"sse": "FailClose"})
        first_read.set()  # while the route comes up, the server does not wait
        wait_for(lambda: lg.get(addr, "/ready", host="sse.example.com").status_code == 200, 10, "the pool route")
        first_read.clear()
        with httpx.Client(timeout=10) as client, client.stream(
                "GET", f"http://{addr}:8080/v1/chat", headers={"host": "sse.example.com"}) as resp:
            chunks = resp.iter_raw()
            assert next(chunks).startswith(b"data: one")  # before the server wrote the rest
            first_read.set()
            assert b"".join(chunks).endswith(b"data: two\n\n")
    finally:
        picker.close()


def healthy_pickers(lg: Lychgate, pool: str) -> int:
    """The proxy's count of healthy endpoints in the picker cluster of `pool`."""
    admin = lg.proxies()["default/gw"]["admin"]
    name = f"cluster.epp/default/{pool}.membership_healthy"
    text = lg.client.get(f"http://{admin}/stats", params={"filter": f"^{name}$"}).text
    return sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + ":"))


def test_fail_open_serves_every_request_once_the_picker_stopped(lychgate: Lychgate, backends: EchoBackends) -> None:
    """The picker served, then its server stopped (its connections closed, nothing listens
    any more): once the proxy has seen its health-check connection close (at once), a
    FailOpen pool serves every request, with a body or not, from its ready endpoints;
    a FailClose pool answers 503. The picker back, it picks again."""
    lg = lychgate
    port = free_port()
    backends.start(pod="ms-1", port=port, host=SERVERS["ms-1"])
    picker = EndpointPicker({f"{SERVERS['ms-1']}:{port}": 0}).start()
    try:
        addr = start_one_model(lg, port, picker, {"open": "FailOpen", "closed": "FailClose"})
        lg.wait_pod(addr, "ms-1", host="open.example.com")
        lg.wait_pod(addr, "ms-1", host="closed.example.com")
        wait_for(lambda: healthy_pickers(lg, "open") == 1, 10, "the picker to be healthy")
        asked = picker.requests
        assert lg.pod(addr, host="open.example.com") == "ms-1" and picker.requests == asked + 1
    finally:
        picker.close()
    wait_for(lambda: healthy_pickers(lg, "open") == 0, 5, "the proxy to see the picker gone")
    answers = []
    for i in range(6):
        answers.append(lg.pod(addr, "/v1/completions", host="open.example.com", method="POST",
                              json={"model": "llama", "prompt": f"hi {i}"}))
        answers.append(lg.pod(addr, host="open.example.com"))
    assert answers == ["ms-1"] * 12
    assert lg.pod(addr, host="closed.example.com") == 503

    back = EndpointPicker({f"{SERVERS['ms-1']}:{port}": 0}, port=picker.port).start()
    try:  # the ejection ends within a second or so of the first passing health check
        wait_for(lambda: lg.pod(addr, host="open.example.com") == "ms-1" and back.requests > 0, 10,
                 "the picker to be asked again")
    finally:
        back.close()
