"""faultInjection → Envoy's fault filter: first in every listener with policy
filters (so a fault is injected before any other filter spends work), off by
default, and on with the route's faults where a policy asks."""

from __future__ import annotations

from envoy.extensions.filters.common.fault.v3 import fault_pb2 as common_fault_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2

from lychgate import ir
from lychgate.xds.translator.features import register
from lychgate.xds.translator.policy_filters import PolicyFilter, ms, percent

FILTER = "envoy.filters.http.fault"




def http_fault(f: ir.FaultInjection) -> fault_pb2.HTTPFault:
    out = fault_pb2.HTTPFault()
    if f.delay_ms is not None:
        out.delay.fixed_delay.CopyFrom(ms(f.delay_ms))
        out.delay.percentage.CopyFrom(percent(f.delay_percent))
    if f.abort_http_status is not None:
        out.abort.http_status = f.abort_http_status
        out.abort.percentage.CopyFrom(percent(f.abort_percent))
    elif f.abort_grpc_status is not None:
        out.abort.grpc_status = f.abort_grpc_status
        out.abort.percentage.CopyFrom(percent(f.abort_percent))
    if f.response_kbps is not None:
        out.response_rate_limit.CopyFrom(common_fault_pb2.FaultRateLimit(
            fixed_limit=common_fault_pb2.FaultRateLimit.FixedLimit(limit_kbps=f.response_kbps),
            percentage=percent(f.response_percent)))
    if f.max_active_faults is not None:
        out.max_active_faults.value = f.max_active_faults
    return out


class Fault(PolicyFilter):
    name, filter, field = "fault", FILTER, "fault_injection"
    order = 5

    def listener_config(self) -> object:
        return fault_pb2.HTTPFault()

    def route_config(self, value: ir.FaultInjection) -> object:
        return http_fault(value)


register(Fault())
