"""ListenerPolicy `grpcStats` → Envoy's grpc_stats HTTP filter, only on the listeners
whose policy asks for it.

Early in the chain (after the health check): it then sees the answer of every
later filter, so a call an authentication or rate limit filter refuses is
counted with the status it got.
"""

from __future__ import annotations

from envoy.extensions.filters.http.grpc_stats.v3 import config_pb2 as grpc_stats_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate import ir
from lychgate.xds.translator.features import Feature, register


class GrpcStatsFeature(Feature):
    name = "grpc_stats"
    order = 1

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        stats = listener.settings.grpc_stats if listener.settings is not None else None
        if stats is None:
            return
        config = grpc_stats_pb.FilterConfig()
        if stats.allowlist:
            for service, methods in stats.allowlist:
                config.individual_method_stats_allowlist.services.add(name=service, method_names=methods)
        elif stats.all_methods is not None:
            config.stats_for_all_methods.value = stats.all_methods
        if stats.upstream_stats is not None:
            config.enable_upstream_stats = stats.upstream_stats
        out = hcm_pb.HttpFilter(name="envoy.filters.http.grpc_stats")
        out.typed_config.Pack(config)
        hcm.http_filters.append(out)


register(GrpcStatsFeature())
