"""TrafficPolicy `ai.tokenRateLimit`: a budget of tokens per descriptor (per client
address, per header value, ...) per interval, counted by a rate limit service speaking
Envoy's protocol (envoy.service.ratelimit.v3: the service of a RateLimit GatewayExtension).

Envoy's ratelimit filter cannot do it: it asks before the request is sent and never
learns the answer's tokens, which only this extension (in the upstream filter chain)
reads. So the extension asks the service itself, twice per attempt:

1. before the provider is called (after the request guards): ShouldRateLimit with the
   request's descriptors and hits_addend 1. The service counts the one and says whether
   the budget is spent; OVER_LIMIT is answered 429 in OpenAI's shape, the provider not
   called;
2. once the answer's usage is known (the end of a whole answer or of a stream): its total
   tokens less the one already counted, as hits_addend, in the background: the answer
   is not held back for it, and a failure is logged, not raised.

A request is let through while its budget is not spent; the last one let through may
overrun it by its own tokens (no one knows an answer's length before it is written),
and the requests after it are refused until the service's interval resets the count.

The descriptors are those Envoy builds for `rateLimit.global` (one per descriptor of the
policy, all sent in one request): Generic -> (key, value); Header -> (header name, the
client's value), and a request without the header is not counted under that descriptor
(Envoy drops it the same way); RemoteAddress -> ("remote_address", the client's address
as Envoy trusts it, attribute `source.address` without its port); Path -> ("path", :path).

A service that cannot be asked (down, too slow for the extension's `timeout`, no ready
endpoint): the GatewayExtension's `failOpen` decides, as for Envoy's ratelimit filter:
true (the default) serves the request, its tokens charged whole when the answer ends;
false refuses it (503 in OpenAI's shape).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import grpc
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

from lychgate.ai.config import AIConfig, LimitService, TokenRateLimit
from lychgate.ai.rejection import Rejection

log = logging.getLogger("lychgate.ai")

Descriptor = tuple[tuple[str, str], ...]
Headers = tuple[tuple[str, str], ...]

# Charging happens after the answer, nobody waiting: more patience than the check's.
CHARGE_TIMEOUT_S = 5.0
MAX_HITS = 2**32 - 1  # hits_addend is a uint32
_WINDOW_S = {rls_pb2.RateLimitResponse.RateLimit.SECOND: 1, rls_pb2.RateLimitResponse.RateLimit.MINUTE: 60,
             rls_pb2.RateLimitResponse.RateLimit.HOUR: 3600, rls_pb2.RateLimitResponse.RateLimit.DAY: 86400}


def client_address(source: str) -> str:
    """Envoy's `source.address` ("10.0.0.1:5342", "[::1]:5342") without the port, as
    its remote_address descriptor carries it."""
    host, sep, port = source.rpartition(":")
    if not sep or not port.isdigit():
        return source
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def descriptors(limit: TokenRateLimit, headers: Mapping[str, str], source: str) -> list[Descriptor]:
    """The request's descriptors, as Envoy's ratelimit filter would build them; `headers`:
    the client's (names lower-case, pseudo-headers included); `source`: `source.address`."""
    out: list[Descriptor] = []
    for entries in limit.descriptors:
        built: list[tuple[str, str]] = []
        for kind, key, value in entries:
            if kind == "generic":
                built.append((key, value))
            elif kind == "header":
                if key not in headers:
                    break  # not counted under this descriptor
                built.append((key, headers[key]))
            elif kind == "remote_address":
                address = client_address(source)
                if not address:
                    break
                built.append(("remote_address", address))
            else:
                built.append(("path", headers.get(":path", "")))
        else:
            out.append(tuple(built))
    return out


@dataclass(frozen=True)
class Verdict:
    """The service's answer to a request's check."""

    allowed: bool
    counted: int  # hits the service counted for it (0: it could not be asked)
    headers: Headers = ()  # for the client: the service's own, and x-ratelimit-* when asked for
    reset_s: int | None = None  # when the spent budget comes back, as the service said

    def rejection(self) -> Rejection:
        """What the client gets instead of an answer (only when not `allowed`)."""
        if self.counted:
            wait = f"in {self.reset_s}s" if self.reset_s else "later"
            return Rejection(429, f"Rate limit reached: the token budget is spent. Please try again {wait}.", type="tokens", code="rate_limit_exceeded",
                             headers=(*self.headers, ("x-envoy-ratelimited", "true")))
        return Rejection(503, "The request could not be checked against its token budget: the rate limit "
                              "service is unavailable", type="server_error", code="rate_limit_unavailable")


def x_ratelimit_headers(statuses: Iterable[rls_pb2.RateLimitResponse.DescriptorStatus]) -> Headers:
    """x-ratelimit-limit/-remaining/-reset as Envoy's DraftVersion03 writes them: of the
    descriptor with the least remaining, and every limit's quota policy (`30, 30;w=60`)."""
    tightest = None
    policy = ""
    for status in statuses:
        if not status.HasField("current_limit"):
            continue
        if tightest is None or status.limit_remaining < tightest.limit_remaining:
            tightest = status
        window = _WINDOW_S.get(status.current_limit.unit)
        if window:
            policy += f", {status.current_limit.requests_per_unit};w={window}"
            if status.current_limit.name:
                policy += f';name="{status.current_limit.name}"'
    if tightest is None:
        return ()
    return (("x-ratelimit-limit", f"{tightest.current_limit.requests_per_unit}{policy}"),
            ("x-ratelimit-remaining", str(tightest.limit_remaining)),
            ("x-ratelimit-reset", str(tightest.duration_until_reset.seconds)))


class Unreachable(Exception):
    """The service has no ready endpoint."""


class TokenLimiter:
    """The extension's calls to rate limit services: one gRPC channel per address, reused
    (a service with several ready endpoints is called on each in turn)."""

    def __init__(self) -> None:
        self._stubs: dict[tuple[str, str | None], tuple[grpc.aio.Channel, rls_pb2_grpc.RateLimitServiceStub]] = {}
        self._turn = 0
        self._charges: set[asyncio.Task[None]] = set()

    async def check(self, service: LimitService, request: Sequence[Descriptor]) -> Verdict:
        """Count one hit for the request and say whether its budget allows it."""
        try:
            response = await self._call(service, request, 1, service.timeout_ms / 1000)
        except (grpc.aio.AioRpcError, Unreachable) as err:
            log.warning("token rate limit: %s could not be asked (%s); %s", service.name, _why(err),
                        "serving" if service.fail_open else "refusing")
            return Verdict(allowed=service.fail_open, counted=0)
        headers = tuple((h.key, h.raw_value.decode() if h.raw_value else h.value)
                        for h in response.response_headers_to_add)
        if service.x_ratelimit_headers:
            headers += x_ratelimit_headers(response.statuses)
        over = [s for s in response.statuses if s.code == rls_pb2.RateLimitResponse.OVER_LIMIT]
        reset = max((s.duration_until_reset.seconds for s in over), default=0) or None
        return Verdict(allowed=response.overall_code != rls_pb2.RateLimitResponse.OVER_LIMIT, counted=1,
                       headers=headers, reset_s=reset)

    def charge(self, service: LimitService, request: Sequence[Descriptor], hits: int) -> None:
        """Count `hits` more for the request, in the background (call it in the loop)."""
        if hits <= 0:
            return
        task = asyncio.get_running_loop().create_task(self._charge(service, request, min(hits, MAX_HITS)))
        self._charges.add(task)  # held until done: the loop keeps only weak references
        task.add_done_callback(self._charges.discard)

    async def _charge(self, service: LimitService, request: Sequence[Descriptor], hits: int) -> None:
        try:
            await self._call(service, request, hits, CHARGE_TIMEOUT_S)
        except (grpc.aio.AioRpcError, Unreachable) as err:
            log.warning("token rate limit: %d tokens could not be charged to %s (%s)", hits, service.name, _why(err))

    async def _call(self, service: LimitService, request: Sequence[Descriptor], hits: int,
                    timeout: float) -> rls_pb2.RateLimitResponse:
        message = rls_pb2.RateLimitRequest(domain=service.domain, hits_addend=hits, descriptors=[
            ratelimit_pb2.RateLimitDescriptor(entries=[ratelimit_pb2.RateLimitDescriptor.Entry(key=k, value=v)
                                                       for k, v in d])
            for d in request])
        response: rls_pb2.RateLimitResponse = await self._stub(service).ShouldRateLimit(message, timeout=timeout)
        return response

    def _stub(self, service: LimitService) -> rls_pb2_grpc.RateLimitServiceStub:
        if not service.addresses:
            raise Unreachable("no ready endpoint")
        address = service.addresses[self._turn % len(service.addresses)]
        self._turn += 1
        key = (address, service.authority)
        if key not in self._stubs:
            options = [("grpc.default_authority", service.authority)] if service.authority else []
            channel = grpc.aio.insecure_channel(address, options=options)
            self._stubs[key] = (channel, rls_pb2_grpc.RateLimitServiceStub(channel))
        return self._stubs[key][1]

    async def prune(self, config: AIConfig) -> None:
        """Close the channels to addresses no route of `config` uses any more."""
        used = {(address, limit.service.authority) for route in config.routes.values()
                if (limit := route.token_rate_limit) is not None for address in limit.service.addresses}
        for key in [k for k in self._stubs if k not in used]:
            channel, _ = self._stubs.pop(key)
            await channel.close()

    async def close(self) -> None:
        await self.prune(AIConfig())


def _why(err: Exception) -> str:
    """A failure as the log says it: the gRPC status, never the descriptors (they may
    carry a client's header value)."""
    if isinstance(err, grpc.aio.AioRpcError):
        return f"{err.code().name}: {err.details()}"
    return str(err)
