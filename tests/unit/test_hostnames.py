from __future__ import annotations

import pytest

from lychgate.translate.hostnames import effective_hostnames, intersect


@pytest.mark.parametrize(
    ("listener", "route", "expected"),
    [
        (None, "a.example.com", "a.example.com"),
        ("a.example.com", "a.example.com", "a.example.com"),
        ("a.example.com", "b.example.com", None),
        ("*.example.com", "a.example.com", "a.example.com"),
        ("*.example.com", "a.b.example.com", "a.b.example.com"),
        ("*.example.com", "example.com", None),  # a wildcard needs at least one label
        ("a.example.com", "*.example.com", "a.example.com"),
        ("*.example.com", "*.a.example.com", "*.a.example.com"),
        ("*.a.example.com", "*.example.com", "*.a.example.com"),
        ("*.example.com", "*.example.org", None),
    ],
)
def test_intersection(listener: str | None, route: str, expected: str | None) -> None:
    assert intersect(listener, route) == expected


def test_route_without_hostnames_takes_the_listener_hostname() -> None:
    assert effective_hostnames("*.example.com", []) == ["*.example.com"]
    assert effective_hostnames(None, []) == ["*"]


def test_no_intersection_means_no_attachment() -> None:
    assert effective_hostnames("a.example.com", ["b.example.com", "c.example.com"]) == []
