"""`httpSettings.grpcStats` → Envoy's grpc_stats filter on the listener (IR).

The filter counts gRPC calls on the cluster that serves them:
`cluster.<cluster>.grpc.<service>.<method>.{success,failure,total,<status code>,
request_message_count,response_message_count}` for each method it breaks out,
`cluster.<cluster>.grpc.*` for the others, and with `enableUpstreamStats` an
`upstream_rq_time` histogram. `statsForAllMethods` breaks out every method a
client names (a client can make up method names: one series each), a
`methodAllowlist` only the methods listed. The model refuses an empty block and
both at once (api/listener_policy.py); with neither, only the cluster's totals
are counted.
"""

from __future__ import annotations

from lychgate import ir_listener
from lychgate.api.listener_policy import GrpcStatsConfig


def compile_grpc_stats(config: GrpcStatsConfig) -> ir_listener.GrpcStats:
    services: dict[str, list[str]] = {}
    for method in config.method_allowlist:  # "/package.Service/Method", checked by the model
        service, name = method[1:].split("/")
        if name not in services.setdefault(service, []):
            services[service].append(name)
    return ir_listener.GrpcStats(all_methods=config.stats_for_all_methods,
                                 allowlist=tuple((s, tuple(m)) for s, m in services.items()),
                                 upstream_stats=config.enable_upstream_stats)
