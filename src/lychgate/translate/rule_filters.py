"""Checks and IR for the parts of an HTTPRoute rule that are plain values:
CORS, retry, mirror fractions and durations.

Each raises InvalidRule with a message naming the field, so the rule answers
500 and the route's status says what to fix; other rules are untouched.
"""

from __future__ import annotations

import re

from lychgate import envoy_limits, ir
from lychgate.api.gateway import CORS, HTTPRouteRetry, RequestMirror
from lychgate.api.policy import TrafficPolicy
from lychgate.store import Store

# What a route rule replaced for invalid configuration answers (with 500), in kgateway's words.
REPLACED_ROUTE_BODY = "invalid route configuration detected and replaced with a direct response. "


class InvalidRule(ValueError):
    """A rule Envoy cannot or must not serve as written."""


_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")


def duration_ms(value: str | None, field_name: str) -> int | None:
    """Gateway API durations: '1h', '10s', '500ms', '1m30s'; '0s' disables."""
    if value is None:
        return None
    m = _DURATION.match(value)
    if not value or m is None or not any(m.groups()):
        raise InvalidRule(f"{field_name} {value!r} is not a duration like 10s or 500ms")
    h, mi, s, ms = (int(g or 0) for g in m.groups())
    return ((h * 60 + mi) * 60 + s) * 1000 + ms


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "*"})
_TOKEN = re.compile(r"^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$")


def cors(spec: CORS, where: str) -> ir.Cors:
    """The HTTPRoute CORS filter. Unlike a browser-facing "*", a wildcard with
    allowCredentials is allowed here: Envoy always echoes the request's Origin
    (and method and headers), never a literal "*", as the spec requires then."""
    for i, origin in enumerate(spec.allow_origins):
        if not envoy_limits.ORIGIN.match(origin):
            raise InvalidRule(f"{where}.allowOrigins[{i}] {origin!r} is not an origin like "
                              "https://example.com, https://*.example.com, https://a.b.* or *")
        if "*" in origin and origin != "*":
            try:
                envoy_limits.regex(envoy_limits.wildcard_origin_regex(origin))
            except envoy_limits.EnvoyRejects as err:
                raise InvalidRule(f"{where}.allowOrigins[{i}]: {err}") from None
    for i, method in enumerate(spec.allow_methods):
        if method not in _METHODS:
            raise InvalidRule(f"{where}.allowMethods[{i}] {method!r} is not an HTTP method or *")
    for attr, values in (("allowHeaders", spec.allow_headers), ("exposeHeaders", spec.expose_headers)):
        for i, name in enumerate(values):
            if not _TOKEN.match(name):
                raise InvalidRule(f"{where}.{attr}[{i}] {name!r} is not a header name")
    for attr, values in (("allowOrigins", spec.allow_origins), ("allowMethods", spec.allow_methods),
                         ("allowHeaders", spec.allow_headers)):
        if "*" in values and len(values) > 1:
            raise InvalidRule(f"{where}.{attr} cannot contain '*' alongside other values")
    if spec.max_age < 1:
        raise InvalidRule(f"{where}.maxAge must be at least 1 second, not {spec.max_age}")
    return ir.Cors(
        allow_origins=tuple(spec.allow_origins),
        allow_methods=tuple(spec.allow_methods),
        allow_headers=tuple(spec.allow_headers),
        expose_headers=tuple(spec.expose_headers),
        max_age_s=spec.max_age,
        # false and unset both omit the header.
        allow_credentials=True if spec.allow_credentials else None,
    )


# Connection-level failures are always retried when a rule has a retry stanza:
# the request never reached (or never got an answer from) the backend.
CONNECTION_ERRORS = ("connect-failure", "refused-stream", "reset")


def retry(spec: HTTPRouteRetry, where: str) -> ir.Retry:
    for i, code in enumerate(spec.codes):
        if not 400 <= code <= 599:
            raise InvalidRule(f"{where}.codes[{i}] {code} is not an HTTP error code (400-599)")
    if spec.attempts is not None and spec.attempts < 1:
        raise InvalidRule(f"{where}.attempts must be at least 1, not {spec.attempts}")
    return ir.Retry(
        retry_on=CONNECTION_ERRORS,
        # Unset: Envoy's default of one retry.
        attempts=spec.attempts if spec.attempts is not None else 1,
        status_codes=tuple(sorted(set(spec.codes))),
        backoff_base_ms=_backoff(duration_ms(spec.backoff, f"{where}.backoff")),
    )


def _backoff(ms: int | None) -> int | None:
    """'0s' (no minimum wait) is Envoy's shortest backoff: Envoy refuses a zero base interval."""
    return None if ms is None else max(ms, 1)


def mirror_fraction(spec: RequestMirror, where: str) -> tuple[int, int]:
    """(numerator, denominator) of requests to mirror; neither field set: all."""
    if spec.percent is not None and spec.fraction is not None:
        raise InvalidRule(f"{where}: only one of percent and fraction may be set")
    if spec.percent is not None:
        if not 0 <= spec.percent <= 100:
            raise InvalidRule(f"{where}.percent {spec.percent} must be between 0 and 100")
        return spec.percent, 100
    if spec.fraction is not None:
        num, den = spec.fraction.numerator, spec.fraction.denominator
        if den < 1 or num < 0 or num > den:
            raise InvalidRule(f"{where}.fraction {num}/{den} must have 0 <= numerator <= denominator "
                              "and denominator >= 1")
        return num, den
    return 1, 1


def policy_must_exist(store: Store, namespace: str, name: str, where: str) -> None:
    """An ExtensionRef filter naming a TrafficPolicy: a missing one fails the rule closed (it
    may be the rule's authentication), until it is created."""
    if store.get(TrafficPolicy, namespace, name) is None:
        raise InvalidRule(f"{where}: TrafficPolicy {namespace}/{name} not found")


def backend_policy(store: Store, namespace: str, name: str, backends: int, where: str) -> None:
    """An ExtensionRef filter on a backendRef naming a TrafficPolicy: on a rule's only
    backend it is the rule's policy (translate/policies/attachment.py); a policy for one of
    several backends is refused rather than applied to all of them."""
    if backends > 1:
        raise InvalidRule(f"{where}: a TrafficPolicy on one of several backendRefs is not supported by lychgate; "
                          "name it in an ExtensionRef filter of the rule instead")
    policy_must_exist(store, namespace, name, where)
