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
