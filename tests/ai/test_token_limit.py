"""Token budgets (TrafficPolicy `ai.tokenRateLimit`) as the AI extension keeps them: the
descriptors a request is counted under, built as Envoy builds rateLimit.global's, and the
calls to a real rate limit service (envoy.service.ratelimit.v3 over gRPC): one hit counted
before the provider is called, the answer's tokens charged after, 429 in OpenAI's shape
once the budget is spent, failOpen when the service cannot be asked."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import grpc
import httpx2
import openai
import pytest
from envoy.service.ratelimit.v3 import rls_pb2_grpc

from lychgate.ai.config import AIConfig, LimitService, RouteSettings, TokenRateLimit
from lychgate.ai.token_limit import TokenLimiter, client_address, descriptors
from tests.harness import free_port
from tests.policies.ratelimit_server import RateLimitServer

LIMIT = TokenRateLimit(LimitService("team/rls", (), "ai"), (
    (("generic", "budget", "chat"), ("header", "x-user", "")),
    (("remote_address", "", ""),),
    (("path", "", ""),),
))


def test_descriptors_are_built_from_the_request_as_envoy_builds_them() -> None:
    headers = {":path": "/v1/chat/completions?x=1", "x-user": "alice", "authorization": "Bearer k"}
    assert descriptors(LIMIT, headers, "10.1.2.3:51234") == [
        (("budget", "chat"), ("x-user", "alice")),
        (("remote_address", "10.1.2.3"),),
        (("path", "/v1/chat/completions?x=1"),),
    ]


def test_a_request_without_the_header_is_not_counted_under_that_descriptor() -> None:
    assert descriptors(LIMIT, {":path": "/v1"}, "[2001:db8::7]:443") == [
        (("remote_address", "2001:db8::7"),), (("path", "/v1"),)]
    only_header = TokenRateLimit(LIMIT.service, ((("header", "x-user", ""),),))
    assert descriptors(only_header, {":path": "/v1"}, "10.1.2.3:5") == []
    assert descriptors(only_header, {"x-user": ""}, "") == [(("x-user", ""),)]  # present, empty: counted


@pytest.mark.parametrize(("source", "address"), [
    ("127.0.0.9:60319", "127.0.0.9"), ("[::1]:8080", "::1"), ("10.0.0.1", "10.0.0.1"), ("", "")])
def test_client_address_drops_the_port(source: str, address: str) -> None:
    assert client_address(source) == address


@pytest.fixture
async def rls() -> AsyncIterator[RateLimitServer]:
    service = RateLimitServer(port=free_port())
    server = grpc.aio.server()
    rls_pb2_grpc.add_RateLimitServiceServicer_to_server(service, server)
    server.add_insecure_port(f"127.0.0.1:{service.port}")
    await server.start()
    yield service
    await server.stop(0)


@pytest.fixture
async def limiter() -> AsyncIterator[TokenLimiter]:
    out = TokenLimiter()
    yield out
    await out.close()


def service(port: int, **settings: object) -> LimitService:
    """The rate-limit service at `port`. Its deadline is generous unless a test sets one: the
    first call on a new channel connects first, and on a busy machine that took more than the
    100 ms default (the call failed open, and the test saw no hit)."""
    settings.setdefault("timeout_ms", 5000)
    return LimitService("team/rls", (f"127.0.0.1:{port}",), "ai", **settings)  # type: ignore[arg-type]


async def settled(rls: RateLimitServer, key: tuple[str, tuple[tuple[str, str], ...]], hits: int) -> None:
    for _ in range(100):  # charges go in the background
        if rls.hits.get(key) == hits:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{key} has {rls.hits.get(key)} hits, not {hits}")


async def test_one_hit_before_the_answer_its_tokens_after_then_429(rls: RateLimitServer,
                                                                   limiter: TokenLimiter) -> None:
    alice = [(("x-user", "alice"),)]
    key = ("ai", alice[0])
    rls.limits[key] = 30
    svc = service(rls.port, x_ratelimit_headers=True)
    first = await limiter.check(svc, alice)
    assert first.allowed and first.counted == 1 and rls.hits[key] == 1
    assert dict(first.headers) == {"x-ratelimit-limit": "30, 30;w=60", "x-ratelimit-remaining": "29",
                                   "x-ratelimit-reset": "60"}
    limiter.charge(svc, alice, 25 - first.counted)  # an answer of 25 tokens
    await settled(rls, key, 25)
    assert rls.seen[-1] == ("ai", tuple(alice))

    second = await limiter.check(svc, alice)  # 26 of 30: still allowed, then 20 more tokens
    assert second.allowed
    limiter.charge(svc, alice, 19)
    await settled(rls, key, 45)

    refused = await limiter.check(svc, alice)
    assert not refused.allowed
    rejection = refused.rejection()
    assert rejection.status == 429
    assert dict(rejection.headers)["x-ratelimit-remaining"] == "0"
    assert dict(rejection.headers)["x-envoy-ratelimited"] == "true"
    # What the openai SDK reads from it: its RateLimitError with OpenAI's type and code.
    response = httpx2.Response(429, content=rejection.encode(),
                              request=httpx2.Request("POST", "http://gateway/v1/chat/completions"))
    error = openai.RateLimitError(rejection.message, response=response, body=json.loads(rejection.encode())["error"])
    assert (error.type, error.code) == ("tokens", "rate_limit_exceeded")
    assert "try again in 60s" in error.message

    bob = await limiter.check(svc, [(("x-user", "bob"),)])  # counted apart
    assert bob.allowed


async def test_nothing_to_charge_sends_nothing(rls: RateLimitServer, limiter: TokenLimiter) -> None:
    limiter.charge(service(rls.port), [(("k", "v"),)], 0)  # a one-token answer: its hit is counted
    await asyncio.sleep(0.1)
    assert rls.seen == []


@pytest.mark.parametrize("fail_open", [True, False])
async def test_an_unreachable_service_fails_open_or_closed(limiter: TokenLimiter, fail_open: bool) -> None:
    for svc in (service(free_port(), fail_open=fail_open, timeout_ms=200),  # nothing listens there
                LimitService("team/rls", (), "ai", fail_open=fail_open)):  # no ready endpoint
        verdict = await limiter.check(svc, [(("k", "v"),)])
        assert (verdict.allowed, verdict.counted) == (fail_open, 0)
        if not fail_open:
            rejection = verdict.rejection()
            assert (rejection.status, rejection.type, rejection.code) == (503, "server_error", "rate_limit_unavailable")


async def test_channels_are_reused_and_closed_with_the_routes_that_used_them(rls: RateLimitServer,
                                                                             limiter: TokenLimiter) -> None:
    svc = service(rls.port)
    for _ in range(3):
        await limiter.check(svc, [(("k", "v"),)])
    assert len(limiter._stubs) == 1
    kept = RouteSettings(id="r", token_rate_limit=TokenRateLimit(svc, ((("generic", "k", "v"),),)))
    await limiter.prune(AIConfig(routes={"r": kept}))
    assert len(limiter._stubs) == 1
    await limiter.prune(AIConfig())
    assert limiter._stubs == {}
