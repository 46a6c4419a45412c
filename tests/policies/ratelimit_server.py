"""A rate limit service speaking Envoy's protocol (`envoy.service.ratelimit.v3`,
grpc.aio with the generated stubs from xds-protos): it counts hits per
(domain, descriptor) and answers OVER_LIMIT past the limit set for it, with the
descriptor statuses Envoy turns into x-ratelimit-* headers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import grpc
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
from google.protobuf import duration_pb2

from tests.harness import free_port
from tests.policies.servers import Servers

Descriptor = tuple[tuple[str, str], ...]


class GrpcService(Protocol):
    port: int
    server: Any


S = TypeVar("S", bound=GrpcService)


@dataclass
class RateLimitServer(rls_pb2_grpc.RateLimitServiceServicer):  # type: ignore[misc]
    # (domain, descriptor) -> requests allowed per minute; descriptors not listed are unlimited.
    limits: dict[tuple[str, Descriptor], int] = field(default_factory=dict)
    hits: dict[tuple[str, Descriptor], int] = field(default_factory=dict)
    seen: list[tuple[str, tuple[Descriptor, ...]]] = field(default_factory=list)
    port: int = 0
    server: Any = None

    async def ShouldRateLimit(self, request: rls_pb2.RateLimitRequest, context: Any) -> rls_pb2.RateLimitResponse:
        descriptors = tuple(tuple((e.key, e.value) for e in d.entries) for d in request.descriptors)
        self.seen.append((request.domain, descriptors))
        out = rls_pb2.RateLimitResponse(overall_code=rls_pb2.RateLimitResponse.OK)
        for descriptor in descriptors:
            key = (request.domain, descriptor)
            self.hits[key] = self.hits.get(key, 0) + max(request.hits_addend, 1)
            limit = self.limits.get(key)
            if limit is None:
                out.statuses.append(rls_pb2.RateLimitResponse.DescriptorStatus(code=rls_pb2.RateLimitResponse.OK))
                continue
            over = self.hits[key] > limit
            out.statuses.append(rls_pb2.RateLimitResponse.DescriptorStatus(
                code=rls_pb2.RateLimitResponse.OVER_LIMIT if over else rls_pb2.RateLimitResponse.OK,
                current_limit=rls_pb2.RateLimitResponse.RateLimit(
                    requests_per_unit=limit, unit=rls_pb2.RateLimitResponse.RateLimit.MINUTE),
                limit_remaining=max(limit - self.hits[key], 0),
                duration_until_reset=duration_pb2.Duration(seconds=60)))
            if over:
                out.overall_code = rls_pb2.RateLimitResponse.OVER_LIMIT
        return out


def serve_grpc(servers: Servers, service: S, add: Callable[[S, Any], None]) -> S:
    """Serve `service` (whose `port` is set) with grpc.aio on the servers' loop until they stop."""

    async def go() -> Any:
        server = grpc.aio.server()
        add(service, server)
        server.add_insecure_port(f"127.0.0.1:{service.port}")
        await server.start()
        return server

    service.server = servers.loop.run(go())
    servers._stops.append(lambda s=service.server: s.stop(0))
    return service


def start(servers: Servers) -> RateLimitServer:
    return serve_grpc(servers, RateLimitServer(port=free_port()), rls_pb2_grpc.add_RateLimitServiceServicer_to_server)
