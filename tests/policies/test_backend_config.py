"""BackendConfigPolicy end to end: real Envoy in front of a pool of real backend
Pods, one of which fails, goes down, or answers slowly."""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import httpx
import pytest

from tests.harness import wait_for
from tests.policies.conftest import Stack, condition, lychgate_object
from tests.policies.pool import GrpcPool, Pool

pytestmark = pytest.mark.e2e


def policy(name: str, service: str, body: str) -> str:
    return lychgate_object("BackendConfigPolicy", name, f'  targetRefs: [{{group: "", kind: Service, name: {service}}}]\n'
                           + body.lstrip("\n"))


def deploy(stack: Stack, pool: Pool | GrpcPool, body: str) -> str:
    """The pool's Service, a route to it on its own host, and a policy for it; waits until the
    policy is Attached (and, for HTTP pools, until the route answers)."""
    host = f"{pool.service}.example.com"
    stack.write(f"{pool.service}.yaml", pool.manifest(),
                stack.route(pool.service, host, f"- backendRefs: [{{name: {pool.service}, port: 80}}]"),
                policy(pool.service, pool.service, body))

    def attached() -> bool:
        ancestors = stack.status("BackendConfigPolicy", pool.service).get("ancestors", [])
        return bool(ancestors) and condition(ancestors[0]["conditions"], "Attached")["status"] == "True"

    wait_for(attached, 10, f"BackendConfigPolicy {pool.service} to be attached")
    if isinstance(pool, Pool):
        stack.wait(host, lambda r: r.status_code in (200, 500), what=f"{host} to be routed")
    return host


def pods_seen(stack: Stack, host: str, count: int, **kwargs: Any) -> Counter[str]:
    """Which Pod answered each of `count` requests (status code when none did)."""
    seen: Counter[str] = Counter()
    for _ in range(count):
        resp = stack.get(host, **kwargs)
        seen[resp.headers.get("x-backend", str(resp.status_code)) if resp.status_code == 200 else str(resp.status_code)] += 1
    return seen


def concurrently(stack: Stack, host: str, count: int, **kwargs: Any) -> list[httpx.Response]:
    """`count` requests, eight at a time (a bounded concurrent load)."""
    headers = {"host": host, **kwargs.pop("headers", {})}
    with httpx.Client(timeout=10) as client, ThreadPoolExecutor(8) as workers:
        return list(workers.map(lambda _: client.get(f"http://{stack.addr}:8080/", headers=headers), range(count)))


def test_outlier_detection_ejects_the_failing_endpoint(stack: Stack) -> None:
    pool = Pool(stack.servers, "ejects", 3, 31)
    bad = pool.pods[2]
    bad.failing = True
    host = deploy(stack, pool, """
  loadBalancer: {roundRobin: {}}
  outlierDetection: {consecutive5xx: 2, interval: 1s, baseEjectionTime: 5m, maxEjectionPercent: 50}""")
    # The failing Pod answers 500 until its second consecutive failure ejects it.
    wait_for(lambda: set(pods_seen(stack, host, 30)) == {"ejects-0", "ejects-1"}, 15,
             "30 requests in a row to avoid the failing Pod")
    failures = bad.served
    assert failures >= 2
    assert set(pods_seen(stack, host, 60)) == {"ejects-0", "ejects-1"}
    assert bad.served == failures  # ejected: not even tried


def test_health_checks_take_an_endpoint_out_and_back(stack: Stack) -> None:
    pool = Pool(stack.servers, "checked", 3, 32)
    sick = pool.pods[1]
    host = deploy(stack, pool, """
  loadBalancer: {roundRobin: {}}
  healthCheck: {timeout: 1s, interval: 200ms, unhealthyThreshold: 1, healthyThreshold: 1, http: {path: /healthz}}""")
    wait_for(lambda: len(pods_seen(stack, host, 9)) == 3, 10, "every Pod to take traffic")
    sick.healthy = False  # its requests would still succeed: only the health check takes it out
    wait_for(lambda: set(pods_seen(stack, host, 30)) == {"checked-0", "checked-2"}, 15,
             "the Pod failing its health check to be taken out")
    sick.healthy = True
    wait_for(lambda: "checked-1" in pods_seen(stack, host, 9), 15, "the recovered Pod to take traffic again")
    assert sick.health_checks >= 3


def test_grpc_health_checks_follow_the_health_service(stack: Stack) -> None:
    pool = GrpcPool(stack.servers, "grpc-checked", 2, 36)
    host = deploy(stack, pool, """
  healthCheck: {timeout: 1s, interval: 200ms, unhealthyThreshold: 1, healthyThreshold: 1, grpc: {}}""")
    channel = grpc.insecure_channel(f"{stack.addr}:8080", options=[("grpc.default_authority", host)])
    name = channel.unary_unary("/test.Who/Name")

    def answers(count: int) -> set[str]:
        return {name(b"", timeout=5).decode() for _ in range(count)}

    try:
        wait_for(lambda: answers(10) == {"grpc-checked-0", "grpc-checked-1"}, 15, "both Pods to answer")
        pool.pods[1].serving(False)  # its health service says NOT_SERVING: Envoy's gRPC check takes it out
        wait_for(lambda: answers(20) == {"grpc-checked-0"}, 15, "the NOT_SERVING Pod to be taken out")
        pool.pods[1].serving(True)
        wait_for(lambda: "grpc-checked-1" in answers(10), 15, "the Pod to come back")
    finally:
        channel.close()


def test_least_request_avoids_the_slow_endpoint(stack: Stack) -> None:
    pool = Pool(stack.servers, "least", 3, 33)
    slow = pool.pods[0]
    host = deploy(stack, pool, "  loadBalancer: {leastRequest: {choiceCount: 2}}")
    slow.delay = 0.3
    pool.reset()
    answers = Counter(r.headers.get("x-backend", str(r.status_code)) for r in concurrently(stack, host, 240))
    # Round robin would give the slow Pod a third (80); least request sends new
    # requests to the Pods with fewer in flight.
    assert sum(answers.values()) == 240 and set(answers) <= {p.name for p in pool.pods}, answers
    assert answers[slow.name] < 240 * 0.25, answers  # measured: 36 of 240 (15%)
    assert min(answers["least-1"], answers["least-2"]) > 240 * 0.3, answers


def test_ring_hash_keeps_each_user_on_one_endpoint(stack: Stack) -> None:
    pool = Pool(stack.servers, "hashed", 3, 34)
    host = deploy(stack, pool, """
  loadBalancer:
    ringHash:
      hashPolicies: [{header: {name: x-user}}]""")
    owners: dict[str, set[str]] = {}
    for user in range(40):
        owners[f"u{user}"] = set(pods_seen(stack, host, 5, headers={"x-user": f"u{user}"}))
    assert all(len(pods) == 1 for pods in owners.values()), owners  # sticky
    spread = Counter(next(iter(pods)) for pods in owners.values())
    assert len(spread) == 3 and min(spread.values()) >= 4, spread  # and spread over the ring


def test_circuit_breaker_overflows_with_503(stack: Stack) -> None:
    pool = Pool(stack.servers, "breaker", 1, 35)
    pod = pool.pods[0]
    host = deploy(stack, pool, "  circuitBreakers: {maxConnections: 1, maxPendingRequests: 1, maxRequests: 1}")
    pod.delay = 0.5
    pool.reset()
    responses = concurrently(stack, host, 8, headers={"connection": "close"})
    codes = Counter(r.status_code for r in responses)
    overflowed = [r for r in responses if r.status_code == 503]
    assert codes[200] >= 1 and overflowed, codes
    assert all(r.headers.get("x-envoy-overloaded") == "true" for r in overflowed)
    assert all("overflow" in r.text for r in overflowed)
    # One request at a time per worker: the limits are the cluster's, but each worker's connection
    # pool keeps a connection to the host it picked even once the breaker has overflowed (Envoy's
    # circuit breaking overview), so with two workers a CI run once saw two at the backend.
    assert 1 <= pod.peak <= (os.cpu_count() or 1), pod
