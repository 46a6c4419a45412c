"""InferencePool backends: a real ext_proc endpoint picker choosing model servers through real Envoy."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest

from tests.harness import EchoBackends, Lychgate, free_port, gateway_yaml, service_yaml, wait_for
from tests.picker import EndpointPicker

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


def pool_yaml(name: str, app: str, port: int, picker: str, failure_mode: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: inference.networking.k8s.io/v1
        kind: InferencePool
        metadata: {{name: {name}, namespace: default}}
        spec:
          selector: {{matchLabels: {{app: {app}}}}}
          targetPorts: [{{number: {port}}}]
          endpointPickerRef: {{name: {picker}, port: {{number: 9002}}, failureMode: {failure_mode}}}
        ---
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {{name: {name}, namespace: default}}
        spec:
          parentRefs: [{{name: gw}}]
          hostnames: [{name}.example.com]
          rules:
            - backendRefs: [{{group: inference.networking.k8s.io, kind: InferencePool, name: {name}}}]
        """)


@pytest.fixture
def picker() -> Iterator[EndpointPicker]:
    p = EndpointPicker({}).start()
    yield p
    p.close()


def test_the_picker_chooses_the_model_server(lychgate: Lychgate, backends: EchoBackends,
                                             picker: EndpointPicker) -> None:
    lg = lychgate
    port = free_port()
    endpoints = {name: f"{ip}:{port}" for name, ip in SERVERS.items()}
    for name, ip in SERVERS.items():
        backends.start(pod=name, port=port, host=ip)
        lg.write(f"pod-{name}.yaml", pod_yaml(name, ip, "llm"))
    lg.write("pod-down.yaml", pod_yaml("ms-down", "127.0.30.104", "down", ready=False))
    lg.write("epp.yaml", service_yaml("epp", 9002, picker.port))
    lg.write("epp-gone.yaml", service_yaml("epp-gone", 9002, free_port()))  # nothing listens there
    lg.write("llm.yaml", pool_yaml("llm", "llm", port, "epp", "FailClose"))
    lg.write("open.yaml", pool_yaml("open", "llm", port, "epp-gone", "FailOpen"))
    lg.write("closed.yaml", pool_yaml("closed", "llm", port, "epp-gone", "FailClose"))
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

    # Picker unreachable: FailOpen serves from any ready endpoint, FailClose answers 503.
    served = {lg.pod(addr, host="open.example.com") for _ in range(9)}
    assert served and served <= set(SERVERS), served
    assert lg.pod(addr, host="closed.example.com") == 503
    # A pool without a ready endpoint has nothing to serve from, whatever the picker says.
    assert lg.pod(addr, host="empty.example.com") == 503

    status = wait_for(lambda: lg.status("InferencePool", "llm").get("parents"), 10, "InferencePool status")
    (parent,) = status
    assert parent["parentRef"] == {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                   "namespace": "default", "name": "gw"}
    conds = {c["type"]: c for c in parent["conditions"]}
    assert conds["Accepted"]["status"] == "True" and "default/llm" in conds["Accepted"]["message"]
    assert conds["ResolvedRefs"]["status"] == "True"
