"""The Aggregate keeps one object per token routes read, and lets it go with its last reader."""

from __future__ import annotations

from lychgate.api.base import ObjectKey
from lychgate.translate.aggregate import Aggregate, Contribution


def test_routes_reading_alike_share_tokens_and_the_last_to_go_takes_them() -> None:
    agg = Aggregate()
    empty = Contribution(attachments=(), routes=(), clusters=(), status=None)
    a, b = ObjectKey("HTTPRoute", "apps", "a"), ObjectKey("HTTPRoute", "apps", "b")
    service = ObjectKey("Service", "apps", "svc")
    agg.add(a, None, empty, {("key", ObjectKey("Service", "apps", "svc")), ("list", ("Backend", None))})  # type: ignore[arg-type]
    agg.add(b, None, empty, {("key", ObjectKey("Service", "apps", "svc"))})  # type: ignore[arg-type]
    (token_b,) = agg.reads[b]
    assert any(t is token_b for t in agg.reads[a])  # one object for the equal tokens
    assert agg.affected({("key", service)}) == {a, b}
    agg.remove(a)
    assert set(agg.tokens) == {("key", service)}
    agg.remove(b)
    assert not agg.tokens and not agg.readers


def test_the_absence_every_route_reads_is_counted_and_its_first_object_reaches_every_route() -> None:
    """"No BackendTLSPolicy exists" is read by every route with a backend: no set of them
    is kept, and the first policy (or a route changing with it) reaches every route."""
    agg = Aggregate()
    empty = Contribution(attachments=(), routes=(), clusters=(), status=None)
    a, b, c = (ObjectKey("HTTPRoute", "apps", n) for n in "abc")
    none_yet = ("list", ("BackendTLSPolicy", None))
    agg.routes[c] = (None, empty)  # type: ignore[assignment]  # a route that read something else
    agg.add(a, None, empty, {none_yet})  # type: ignore[arg-type]
    agg.add(b, None, empty, {("list", ("BackendTLSPolicy", None)), ("key", ObjectKey("Service", "apps", "s"))})  # type: ignore[arg-type]
    assert none_yet not in agg.readers and agg.wide == {none_yet: 2}
    policy = ObjectKey("BackendTLSPolicy", "apps", "tls")
    new_route = ObjectKey("HTTPRoute", "apps", "new")
    assert agg.affected({("key", policy), ("key", new_route)}) == {a, b, c, new_route}
    assert agg.affected({("key", ObjectKey("Service", "apps", "s"))}) == {b}
    agg.remove(a)
    assert agg.affected({("key", policy)}) == {b, c}
    agg.remove(b)
    assert not agg.wide and not agg.tokens and not agg.readers
    assert agg.affected({("key", policy)}) == set()
