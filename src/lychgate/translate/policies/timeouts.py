"""timeouts and retry: how long Envoy waits for a backend, and when it tries again."""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.api.policy import TrafficPolicy
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, Invalid, duration_ms

_REQUEST_TIMEOUT = "policyRequestTimeout"  # set by normalize: the same policy's timeouts.request
RETRY_ON = {
    "5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "envoy-ratelimited",
    "retriable-4xx", "refused-stream", "retriable-status-codes", "http3-post-connect-failure",
    "cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable",
}


class TimeoutsField(PolicyField):
    name, attr = "timeouts", "timeouts"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if "request" in value:
            out["timeout_ms"] = duration_ms(value["request"], f"{path}.request")
        if "streamIdle" in value:
            out["stream_idle_timeout_ms"] = duration_ms(value["streamIdle"], f"{path}.streamIdle")
        if not out:
            raise Invalid(path, "at least one of request or streamIdle must be set")
        return out


class RetryField(PolicyField):
    name, attr = "retry", "retry"

    def normalize(self, policy: TrafficPolicy, value: dict[str, Any]) -> dict[str, Any]:
        # kgateway's rule across two fields of one policy: a try must end before the request.
        timeouts = policy.spec.timeouts
        if timeouts is not None and timeouts.request is not None and "perTryTimeout" in value:
            value[_REQUEST_TIMEOUT] = timeouts.request
        return value

    def merge(self, high: dict[str, Any], low: dict[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {k: v for k, v in super().merge(high, low).items() if k != _REQUEST_TIMEOUT}
        return merged

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        request = value.get(_REQUEST_TIMEOUT)
        if request is not None:
            per_try_ms = duration_ms(value["perTryTimeout"], f"{path}.perTryTimeout", 1)
            if per_try_ms >= duration_ms(request, "spec.timeouts.request"):
                raise Invalid(f"{path}.perTryTimeout", f"must be less than timeouts.request ({request})")
        retry_on = value.get("retryOn") or []
        codes = value.get("statusCodes") or []
        if not retry_on and not codes:
            raise Invalid(path, "retryOn or statusCodes must be set")
        for i, cond in enumerate(retry_on):
            if cond not in RETRY_ON:
                raise Invalid(f"{path}.retryOn[{i}]", f"{cond!r} is not one of {', '.join(sorted(RETRY_ON))}")
        for i, code in enumerate(codes):
            if not 400 <= code <= 599:
                raise Invalid(f"{path}.statusCodes[{i}]", f"{code} is not between 400 and 599")
        per_try = value.get("perTryTimeout")
        backoff = value.get("backoffBaseInterval")
        limited = value.get("rateLimitedBackOff") or {}
        max_interval = limited.get("maxInterval")
        return {"retry": ir.Retry(
            retry_on=tuple(retry_on), attempts=value.get("attempts", 1), status_codes=tuple(codes),
            per_try_timeout_ms=duration_ms(per_try, f"{path}.perTryTimeout", 1) if per_try else None,
            backoff_base_ms=duration_ms(backoff, f"{path}.backoffBaseInterval", 1) if backoff else None,
            host_predicates=tuple(dict.fromkeys(value.get("retryHostPredicates") or ())),
            rate_limited_reset_headers=tuple((h["name"], h["format"]) for h in limited.get("resetHeaders") or ()),
            rate_limited_max_interval_ms=(duration_ms(max_interval, f"{path}.rateLimitedBackOff.maxInterval", 1)
                                          if max_interval else None),
        )}


register(TimeoutsField())
register(RetryField())
