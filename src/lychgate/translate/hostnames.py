"""Hostname matching and intersection as the Gateway API defines them.

A wildcard `*.example.com` matches one or more labels in front of
`.example.com`, never `example.com` itself.
"""

from __future__ import annotations


def _matches_wildcard(host: str, wildcard: str) -> bool:
    suffix = wildcard[1:]  # ".example.com"
    return host.endswith(suffix) and len(host) > len(suffix)


def intersect(listener: str | None, route: str) -> str | None:
    """The hostname a route hostname serves on a listener, or None."""
    if listener is None or listener == route:
        return route
    if route.startswith("*.") and not listener.startswith("*."):
        return listener if _matches_wildcard(listener, route) else None
    if listener.startswith("*.") and not route.startswith("*."):
        return route if _matches_wildcard(route, listener) else None
    if listener.startswith("*.") and route.startswith("*."):
        # The narrower wildcard is what both accept.
        if _matches_wildcard(route[2:], listener):
            return route
        if _matches_wildcard(listener[2:], route):
            return listener
    return None


def effective_hostnames(listener: str | None, route_hostnames: list[str]) -> list[str]:
    """Hostnames a route serves on a listener; [] means it attaches to none."""
    if not route_hostnames:
        return [listener or "*"]
    out: list[str] = []
    for hostname in route_hostnames:
        served = intersect(listener, hostname)
        if served is not None and served not in out:
            out.append(served)
    return out


def _specificity(listener: str | None, host: str) -> int | None:
    """How closely a listener hostname matches a served host (higher wins), or None."""
    if listener is None:
        return 0
    if listener == host:
        return 1 << 16
    if listener.startswith("*.") and host != "*" and _matches_wildcard(host.removeprefix("*"), listener):
        return len(listener)
    return None


def owner(host: str, listeners: dict[str, str | None]) -> str | None:
    """The listener (name -> hostname, one port) a request for `host` belongs to:
    the most specific match, as the Gateway API's listener isolation asks."""
    best, best_score = None, -1
    for name, hostname in listeners.items():
        score = _specificity(hostname, host)
        if score is not None and score > best_score:
            best, best_score = name, score
    return best
