"""faultInjection: delay, abort (HTTP or gRPC status) or slow responses for a share
of a route's requests, for resilience testing; `disable: {}` turns an inherited
one off."""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, Invalid, duration_ms

MAX_DELAY_MS = 3_600_000  # kgateway's limit: 1h


class FaultInjectionField(PolicyField):
    name, attr = "faultInjection", "fault_injection"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if "disable" in value:
            return {"fault_injection": None}
        delay, abort, rate = value.get("delay"), value.get("abort"), value.get("responseRateLimit")
        delay_ms = duration_ms(delay["fixedDelay"], f"{path}.delay.fixedDelay", 1) if delay else None
        if delay_ms is not None and delay_ms > MAX_DELAY_MS:
            raise Invalid(f"{path}.delay.fixedDelay", "must not exceed 1h")
        return {"fault_injection": ir.FaultInjection(
            delay_ms=delay_ms, delay_percent=(delay or {}).get("percentage", 100),
            abort_http_status=(abort or {}).get("httpStatus"), abort_grpc_status=(abort or {}).get("grpcStatus"),
            abort_percent=(abort or {}).get("percentage", 100),
            response_kbps=(rate or {}).get("kbitsPerSecond"), response_percent=(rate or {}).get("percentage", 100),
            max_active_faults=value.get("maxActiveFaults"))}


register(FaultInjectionField())
