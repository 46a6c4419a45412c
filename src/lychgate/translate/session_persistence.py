"""A route rule's sessionPersistence (GEP-1619) -> ir.SessionPersistence.

Envoy's stateful session filter keeps a client on the upstream host it first reached:
the host's address rides in a cookie the gateway sets, or in a header the client echoes.
What Envoy cannot do is reported, not dropped: the rule still forwards, and the route's
status names each part that is not honoured (`notes`).
"""

from __future__ import annotations

from lychgate import ir
from lychgate.api.gateway import SessionPersistence
from lychgate.translate.rule_filters import InvalidRule, duration_ms

# The names kgateway gives a session without sessionName.
DEFAULT_COOKIE = "sessionPersistence"
DEFAULT_HEADER = "x-session-persistence"


def compile_session(spec: SessionPersistence, backends: int, notes: list[str]) -> ir.SessionPersistence:
    """`backends`: how many weighted backendRefs the rule has."""
    where = "sessionPersistence"
    ttl_ms = duration_ms(spec.absolute_timeout, f"{where}.absoluteTimeout")
    duration_ms(spec.idle_timeout, f"{where}.idleTimeout")
    if spec.idle_timeout is not None:
        notes.append(f"{where}.idleTimeout is not honoured: Envoy's stateful session has no idle timeout")
    if backends > 1:
        notes.append(f"{where} keeps a client on one endpoint of the backend it is sent to; "
                     "the choice between the rule's backendRefs still follows their weights")
    if spec.type == "Header":
        if spec.absolute_timeout is not None:
            notes.append(f"{where}.absoluteTimeout is not honoured with type Header: the client "
                         "holds the session header and Envoy gives it no expiry")
        return ir.SessionPersistence("Header", _name(spec.name or DEFAULT_HEADER, where))
    if spec.lifetime == "Session":
        if spec.absolute_timeout is not None:
            notes.append(f"{where}.absoluteTimeout is not honoured with lifetimeType Session: "
                         "Envoy expires a session only through the cookie's Max-Age")
        return ir.SessionPersistence("Cookie", _name(spec.name or DEFAULT_COOKIE, where))
    if ttl_ms is not None and ttl_ms < 1000:
        raise InvalidRule(f"{where}.absoluteTimeout {spec.absolute_timeout!r} must be at least 1s "
                          "(a cookie's Max-Age counts seconds)")
    return ir.SessionPersistence("Cookie", _name(spec.name or DEFAULT_COOKIE, where),
                                 ttl_s=ttl_ms // 1000 if ttl_ms is not None else None)


def _name(name: str, where: str) -> str:
    """A cookie or header name as HTTP allows it (an RFC 7230 token)."""
    if not name or any(c in _SEPARATORS or not 0x20 < ord(c) < 0x7F for c in name):
        raise InvalidRule(f"{where}.sessionName {name!r} is not a valid cookie or header name")
    return name


_SEPARATORS = frozenset('()<>@,;:\\"/[]?={} \t')
