"""The wire cache (xds/translator/wire.py) stays the size of the route tables it serves under churn."""

from __future__ import annotations

from lychgate.xds.translator.wire import WireCache


class Host:
    """A stand-in for an IR virtual host: the cache knows objects by identity."""

    def __init__(self, name: str) -> None:
        self.name = name


def _encode(host: Host) -> bytes:
    return host.name.encode()


def test_replaced_hosts_are_dropped_once_a_thousand_were_encoded() -> None:
    cache = WireCache()
    tables = {t: [Host(f"{t}-{i}") for i in range(300)] for t in range(5)}
    for t, hosts in tables.items():
        cache.get_all(("ns", "gw", t), hosts, "vhost", _encode)
    cache.sweep()
    # Churn: one host of a table replaced per pass; the others keep serving.
    for n in range(1100):
        t = n % 5
        tables[t][n % 300] = Host(f"{t}-{n % 300}-v{n}")
        data, _ = cache.get_all(("ns", "gw", t), tables[t], "vhost", _encode)
        assert data == [_encode(h) for h in tables[t]]
        cache.keep(1200)  # the other tables, unchanged, count as used
        cache.sweep()
    assert len(cache._entries) < 1500 + 1000  # without the sweep: 1,500 live and 1,100 replaced
    data, _ = cache.get_all(("ns", "gw", 0), tables[0], "vhost", _encode)
    assert data == [_encode(h) for h in tables[0]]
