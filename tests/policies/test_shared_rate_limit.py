"""rateLimit.local.shareAcrossGateway end to end: the token bucket is the Gateway's,
and real Envoy holds 1/N of it, N the proxies of the Gateway connected to the
control plane (its local cluster, xds/replicas.py; sent only while some route shares
its bucket).

One proxy holds the whole bucket. A second proxy of the same Gateway is a
simulated one (an xDS stream with the Gateway's node id, as tests/unit's ADS
clients): a second real Envoy on this host could not bind the Gateway's address
and port (lychgate's listeners refuse SO_REUSEPORT), while in Kubernetes each
replica has a Pod of its own."""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from lychgate.xds import types
from lychgate.xds.replicas import LOCAL_CLUSTER
from tests.harness import wait_for
from tests.policies.conftest import Stack
from tests.policies.conftest import route_policy as policy

pytestmark = pytest.mark.e2e

BUCKET = "tokenBucket: {maxTokens: 4, tokensPerFill: 4, fillInterval: 1h}"


class SimulatedProxy:
    """An xDS stream that says it is a proxy of default/gw, and asks for nothing more."""

    def __init__(self, target: str) -> None:
        self.channel = grpc.insecure_channel(target)
        self.requests: queue.Queue[discovery_pb2.DeltaDiscoveryRequest | None] = queue.Queue()
        first = discovery_pb2.DeltaDiscoveryRequest(type_url=types.LISTENER)
        first.node.CopyFrom(base_pb2.Node(id="default/gw", cluster="default.gw"))
        self.requests.put(first)
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(self.channel)
        self.call = stub.DeltaAggregatedResources(iter(self.requests.get, None))

    def close(self) -> None:
        self.requests.put(None)
        self.call.cancel()
        self.channel.close()


def _envoy_admin(stack: Stack) -> str:
    boot = json.loads((stack.lg.state / "proxies" / "default" / "gw" / "bootstrap.json").read_text())
    return f"http://127.0.0.1:{boot['admin']['address']['socket_address']['port_value']}"


def _local_hosts(admin: str) -> int:
    clusters = httpx.get(f"{admin}/clusters?format=json", timeout=5).json()["cluster_statuses"]
    [local] = [c for c in clusters if c["name"] == LOCAL_CLUSTER]
    return len(local.get("host_statuses", []))


def _wait_hosts(stack: Stack, count: int) -> None:
    admin = _envoy_admin(stack)
    wait_for(lambda: _local_hosts(admin) == count or None, 10, f"the local cluster to hold {count} hosts")


def _allowed(stack: Stack, name: str, share: bool = True) -> tuple[int, dict[str, Any]]:
    """Put a fresh route under a 4-token bucket; how many requests it lets through
    before the first 429 (bounded), and that 429's rate limit headers."""
    host = f"{name}.example.com"
    stack.write(f"{name}.yaml", stack.route(name, host), policy(name, name, f"""
  rateLimit:
    local:
      shareAcrossGateway: {str(share).lower()}
      {BUCKET}"""))
    # The first response with a rate limit header is the first the bucket counted.
    stack.wait(host, lambda r: "x-ratelimit-limit" in r.headers, what=f"the limit on {host}")
    allowed = 1
    for _ in range(10):
        resp = stack.get(host)
        if resp.status_code == 429:
            return allowed, dict(resp.headers)
        assert resp.status_code == 200
        allowed += 1
    raise AssertionError(f"{host}: no 429 after {allowed} requests")


def test_one_proxy_holds_the_whole_bucket(stack: Stack) -> None:
    # A bucket of its own, served: while no route shares one, the proxy is not told how
    # many replicas it has (its local cluster stays empty).
    assert _allowed(stack, "own", share=False)[0] == 4
    assert _local_hosts(_envoy_admin(stack)) == 0
    allowed, headers = _allowed(stack, "alone")
    assert allowed == 4
    assert headers["x-ratelimit-remaining"] == "0"
    _wait_hosts(stack, 1)  # now it counts itself


@pytest.fixture
def second_proxy(stack: Stack) -> Iterator[SimulatedProxy]:
    proxy = SimulatedProxy(stack.lg.xds)
    yield proxy
    proxy.close()


def test_two_proxies_hold_half_each(stack: Stack, second_proxy: SimulatedProxy) -> None:
    _wait_hosts(stack, 2)
    assert _allowed(stack, "halved")[0] == 2
    # Not shared: each proxy keeps the whole bucket, however many there are.
    assert _allowed(stack, "unshared", share=False)[0] == 4
    # The other proxy leaves: a bucket is the one proxy's alone again.
    second_proxy.close()
    _wait_hosts(stack, 1)
    assert _allowed(stack, "alone-again")[0] == 4
