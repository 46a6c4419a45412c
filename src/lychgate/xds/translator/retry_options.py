"""The retry options of a TrafficPolicy: host predicates (a retry avoids the hosts
this request already failed on, or canary hosts) and the back-off a rate-limited
answer asks for (its reset headers)."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.retry.host.omit_canary_hosts.v3 import omit_canary_hosts_pb2
from envoy.extensions.retry.host.previous_hosts.v3 import previous_hosts_pb2
from google.protobuf import any_pb2, duration_pb2

from lychgate import ir

_PREDICATES = {
    "PreviousHosts": ("envoy.retry_host_predicates.previous_hosts", previous_hosts_pb2.PreviousHostsPredicate),
    "OmitCanaryHosts": ("envoy.retry_host_predicates.omit_canary_hosts", omit_canary_hosts_pb2.OmitCanaryHostsPredicate),
}
# How many times Envoy picks another host when a predicate rejects one (Envoy's default is 1).
HOST_SELECTION_ATTEMPTS = 5


_FORMATS = {"Seconds": route_pb.RetryPolicy.SECONDS, "UnixTimestamp": route_pb.RetryPolicy.UNIX_TIMESTAMP}


def retry_options(retry: ir.Retry, out: route_pb.RetryPolicy) -> None:
    if retry.host_predicates:
        _host_predicates(retry.host_predicates, out)
    if retry.rate_limited_reset_headers:
        backoff = out.rate_limited_retry_back_off
        backoff.reset_headers.extend(route_pb.RetryPolicy.ResetHeader(name=name, format=_FORMATS[fmt])
                                     for name, fmt in retry.rate_limited_reset_headers)
        if retry.rate_limited_max_interval_ms is not None:
            ms = retry.rate_limited_max_interval_ms
            backoff.max_interval.CopyFrom(duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000))


def _host_predicates(names: tuple[str, ...], out: route_pb.RetryPolicy) -> None:
    for name in names:
        extension, message = _PREDICATES[name]
        config = any_pb2.Any()
        config.Pack(message())
        out.retry_host_predicate.append(route_pb.RetryPolicy.RetryHostPredicate(name=extension, typed_config=config))
    out.host_selection_retry_max_attempts = HOST_SELECTION_ATTEMPTS
