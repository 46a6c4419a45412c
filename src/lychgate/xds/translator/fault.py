"""faultInjection → Envoy's fault filter: first in every listener with policy
filters (so a fault is injected before any other filter spends work), off by
default, and on with the route's faults where a policy asks."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.common.fault.v3 import fault_pb2 as common_fault_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.type.v3 import percent_pb2

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route, ms

FILTER = "envoy.filters.http.fault"


def _percent(value: int) -> percent_pb2.FractionalPercent:
    return percent_pb2.FractionalPercent(numerator=value, denominator=percent_pb2.FractionalPercent.HUNDRED)


def http_fault(f: ir.FaultInjection) -> fault_pb2.HTTPFault:
    out = fault_pb2.HTTPFault()
    if f.delay_ms is not None:
        out.delay.fixed_delay.CopyFrom(ms(f.delay_ms))
        out.delay.percentage.CopyFrom(_percent(f.delay_percent))
    if f.abort_http_status is not None:
        out.abort.http_status = f.abort_http_status
        out.abort.percentage.CopyFrom(_percent(f.abort_percent))
    elif f.abort_grpc_status is not None:
        out.abort.grpc_status = f.abort_grpc_status
        out.abort.percentage.CopyFrom(_percent(f.abort_percent))
    if f.response_kbps is not None:
        out.response_rate_limit.CopyFrom(common_fault_pb2.FaultRateLimit(
            fixed_limit=common_fault_pb2.FaultRateLimit.FixedLimit(limit_kbps=f.response_kbps),
            percentage=_percent(f.response_percent)))
    if f.max_active_faults is not None:
        out.max_active_faults.value = f.max_active_faults
    return out


class Fault(Feature):
    name = "fault"
    order = 5

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if listener.policy_filters:
            add_disabled_filter(hcm, FILTER, fault_pb2.HTTPFault())

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if route.policy is not None and route.policy.fault_injection is not None:
            enable_on_route(out, FILTER, http_fault(route.policy.fault_injection))


register(Fault())
