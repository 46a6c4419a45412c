"""retry.retryHostPredicates → Envoy retry host predicates: a retry avoids the
hosts this request already failed on (PreviousHosts) or canary hosts."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.retry.host.omit_canary_hosts.v3 import omit_canary_hosts_pb2
from envoy.extensions.retry.host.previous_hosts.v3 import previous_hosts_pb2
from google.protobuf import any_pb2

_PREDICATES = {
    "PreviousHosts": ("envoy.retry_host_predicates.previous_hosts", previous_hosts_pb2.PreviousHostsPredicate),
    "OmitCanaryHosts": ("envoy.retry_host_predicates.omit_canary_hosts", omit_canary_hosts_pb2.OmitCanaryHostsPredicate),
}
# How many times Envoy picks another host when a predicate rejects one (Envoy's default is 1).
HOST_SELECTION_ATTEMPTS = 5


def retry_host_predicates(names: tuple[str, ...], out: route_pb.RetryPolicy) -> None:
    for name in names:
        extension, message = _PREDICATES[name]
        config = any_pb2.Any()
        config.Pack(message())
        out.retry_host_predicate.append(route_pb.RetryPolicy.RetryHostPredicate(name=extension, typed_config=config))
    out.host_selection_retry_max_attempts = HOST_SELECTION_ATTEMPTS
