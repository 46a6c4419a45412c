"""A rate limit quota server speaking Envoy's RLQS protocol
(`envoy.service.rate_limit_quota.v3.RateLimitQuotaService`, grpc.aio with the
generated stubs from xds-protos). Envoy streams usage reports per bucket; the
server answers each report with the assignment set for the bucket (allow all,
deny all or a token bucket), and with nothing for a bucket it holds back, so
Envoy keeps applying its no-assignment behaviour."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from envoy.service.rate_limit_quota.v3 import rlqs_pb2, rlqs_pb2_grpc
from envoy.type.v3 import ratelimit_strategy_pb2, token_bucket_pb2
from google.protobuf import duration_pb2

from tests.harness import free_port
from tests.policies.ratelimit_server import serve_grpc
from tests.policies.servers import Servers

Bucket = frozenset[tuple[str, str]]
Strategy = ratelimit_strategy_pb2.RateLimitStrategy
ALLOW_ALL = Strategy(blanket_rule=Strategy.ALLOW_ALL)
DENY_ALL = Strategy(blanket_rule=Strategy.DENY_ALL)


def token_bucket(max_tokens: int, fill_seconds: int = 60) -> ratelimit_strategy_pb2.RateLimitStrategy:
    return Strategy(token_bucket=token_bucket_pb2.TokenBucket(
        max_tokens=max_tokens, tokens_per_fill={"value": max_tokens}, fill_interval=duration_pb2.Duration(seconds=fill_seconds)))


@dataclass
class QuotaServer(rlqs_pb2_grpc.RateLimitQuotaServiceServicer):  # type: ignore[misc]
    # bucket id -> the strategy assigned; a bucket not listed gets no answer.
    assign: dict[Bucket, ratelimit_strategy_pb2.RateLimitStrategy] = field(default_factory=dict)
    # (domain, bucket id, allowed, denied) of every usage report received
    reports: list[tuple[str, Bucket, int, int]] = field(default_factory=list)
    port: int = 0
    server: Any = None

    def reported(self, bucket: Bucket) -> bool:
        return any(b == bucket for _, b, _, _ in self.reports)

    async def StreamRateLimitQuotas(
        self, requests: AsyncIterator[rlqs_pb2.RateLimitQuotaUsageReports], context: Any
    ) -> AsyncIterator[rlqs_pb2.RateLimitQuotaResponse]:
        domain = ""
        async for report in requests:
            domain = report.domain or domain  # Envoy sends the domain on the first report only
            out = rlqs_pb2.RateLimitQuotaResponse()
            for usage in report.bucket_quota_usages:
                bucket: Bucket = frozenset(usage.bucket_id.bucket.items())
                self.reports.append((domain, bucket, usage.num_requests_allowed, usage.num_requests_denied))
                strategy = self.assign.get(bucket)
                if strategy is None:
                    continue
                action = out.bucket_action.add()
                action.bucket_id.CopyFrom(usage.bucket_id)
                action.quota_assignment_action.assignment_time_to_live.seconds = 60
                action.quota_assignment_action.rate_limit_strategy.CopyFrom(strategy)
            if out.bucket_action:
                yield out


def start(servers: Servers) -> QuotaServer:
    return serve_grpc(servers, QuotaServer(port=free_port()), rlqs_pb2_grpc.add_RateLimitQuotaServiceServicer_to_server)
