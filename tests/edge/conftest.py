"""One `lychgate run` and its Envoys for the abuse suite: three Gateways.

- `edge`: the defaults of a new Gateway, but for two timeouts a ListenerPolicy
  shortens (idle 2 s, request headers 1 s) so the suite waits seconds, not
  minutes. Routes: /public and /admin to two echo backends, /upload buffered
  (a TrafficPolicy `buffer` of 4 KiB), /transform reading JSON bodies (a
  TrafficPolicy `transformation`).
- `flood`: a connection limit of 200 (GatewayParameters bootstrap.overload).
- `overloaded`: a heap limit below what Envoy uses at rest: memory pressure
  without having to fill memory.
"""

from __future__ import annotations

import resource
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.harness import EchoBackends, Lychgate, free_port, gateway_yaml, service_yaml, wait_for

FLOOD_LIMIT = 200


@dataclass
class Proxy:
    address: str
    port: int
    admin: str  # host:port of its Envoy admin
    pid: int

    def admin_get(self, path: str) -> str:
        return httpx.get(f"http://{self.admin}{path}", timeout=5).text

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no VmRSS for Envoy {self.pid}")


@dataclass
class Stack:
    lg: Lychgate
    edge: Proxy
    flood: Proxy
    overloaded: Proxy
    # Idle (or slow) connections a test may hold, of each kind: 1,000, fewer where the
    # open-file limit would not let Envoy (its connection limit is half its own) take 2 x that.
    crowd: int


def _params(name: str, overload: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: gateway.lychgate.dev/v1alpha1
        kind: GatewayParameters
        metadata: {{name: {name}}}
        spec:
          kube:
            envoyContainer:
              bootstrap:
                overload: {overload}
        """)


def _route(name: str, gateway: str, path: str, backend: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {{name: {name}}}
        spec:
          parentRefs: [{{name: {gateway}}}]
          rules:
            - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]
              backendRefs: [{{name: {backend}, port: 80}}]
        """)


POLICIES = """\
apiVersion: gateway.lychgate.dev/v1alpha1
kind: ListenerPolicy
metadata: {name: short-timeouts}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]
  default:
    httpSettings: {idleTimeout: 2s, requestHeadersTimeout: 1s}
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: upload}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: upload}]
  buffer: {maxRequestSize: 4Ki}
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: transform}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: transform}]
  transformation:
    request:
      set: [{name: x-greeting, value: '{{ greeting }}'}]
      body: {parseAs: AsJson}
"""


def _proxy(lg: Lychgate, gateway: str, port: int) -> Proxy:
    address = lg.address(gateway)
    info = wait_for(lambda: (p := lg.proxies().get(f"default/{gateway}")) and p.get("pid") and p, 20,
                    f"the Envoy of Gateway {gateway}")
    return Proxy(address, port, info["admin"], int(info["pid"]))


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # Thousands of client sockets in this process (Envoy gets lychgate's raised limit itself).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = hard if hard != resource.RLIM_INFINITY else 65536
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, hard))
    backends = EchoBackends()
    lg = Lychgate(tmp_path_factory.mktemp("edge"))
    try:
        ports = {name: free_port() for name in ("edge", "flood", "overloaded")}
        lg.write("services.yaml", service_yaml("public", 80, backends.start(pod="public")) + "---\n"
                 + service_yaml("admin", 80, backends.start(pod="admin")))
        lg.write("params.yaml", _params("flood", f"{{maxDownstreamConnections: {FLOOD_LIMIT}}}") + "---\n"
                 + _params("overloaded", "{maxHeapSize: 2Mi}"))
        lg.write("gateways.yaml", "---\n".join([
            gateway_yaml("edge", ports["edge"]), gateway_yaml("flood", ports["flood"], parameters="flood"),
            gateway_yaml("overloaded", ports["overloaded"], parameters="overloaded")]))
        lg.write("routes.yaml", "---\n".join([
            _route("public", "edge", "/public", "public"), _route("admin", "edge", "/admin", "admin"),
            _route("upload", "edge", "/upload", "public"), _route("transform", "edge", "/transform", "public"),
            _route("flood", "flood", "/", "public"),
            _route("overloaded", "overloaded", "/", "public"), POLICIES]))
        lg.start()
        crowd = min(1000, (files // 2 - 100) // 2)
        proxies = {name: _proxy(lg, name, port) for name, port in ports.items()}
        stack = Stack(lg, proxies["edge"], proxies["flood"], proxies["overloaded"], crowd)
        lg.wait_pod(stack.edge.address, "public", "/public", port=ports["edge"])
        lg.wait_pod(stack.flood.address, "public", "/", port=ports["flood"])
        yield stack
    finally:
        lg.close()
        backends.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
