"""The wire cache (xds/translator/wire.py) builds a sequence's bytes from the last
call's bytes, and keeps nothing but the live sequences under churn."""

from __future__ import annotations

import hashlib
import random

from lychgate.xds.translator.wire import WireCache


class Host:
    """A stand-in for an IR virtual host: the cache knows objects by identity."""

    def __init__(self, name: str) -> None:
        self.name = name


def _encode(host: Host) -> bytes:
    return host.name.encode()


def _expected(hosts: list[Host], prefix: bytes) -> tuple[bytes, bytes]:
    digests = b"".join(hashlib.blake2b(_encode(h), digest_size=8).digest() for h in hosts)
    return prefix + b"".join(_encode(h) for h in hosts), digests


def test_changed_moved_inserted_and_removed_hosts_give_the_bytes_of_a_fresh_build() -> None:
    rng = random.Random(7)
    cache = WireCache()
    hosts = [Host(f"h{i}" * rng.randint(1, 4)) for i in range(200)]
    for n in range(300):
        step = n % 5
        if step == 0:  # one host replaced
            hosts[rng.randrange(len(hosts))] = Host(f"v{n}")
        elif step == 1:  # two far apart: the unchanged hosts between are reused from the middle
            hosts[rng.randrange(20)] = Host(f"a{n}")
            hosts[-rng.randrange(1, 20)] = Host(f"b{n}" * 3)
        elif step == 2:  # inserted and removed
            hosts.insert(rng.randrange(len(hosts)), Host(f"i{n}"))
            del hosts[rng.randrange(len(hosts))]
        elif step == 3:  # moved
            hosts.insert(rng.randrange(len(hosts)), hosts.pop(rng.randrange(len(hosts))))
        prefix = b"head" * (n % 3)  # the table's own fields may change too
        assert cache.get_all(("ns", "gw", "t"), hosts, _encode, prefix) == _expected(hosts, prefix)
        cache.sweep()


def test_hosts_are_encoded_once_and_only_live_ones_are_kept() -> None:
    cache = WireCache()
    encoded: list[str] = []

    def encode(host: Host) -> bytes:
        encoded.append(host.name)
        return _encode(host)

    tables = {t: [Host(f"{t}-{i}") for i in range(300)] for t in range(5)}
    for t, hosts in tables.items():
        cache.get_all(("ns", "gw", t), hosts, encode)
    cache.sweep()
    encoded.clear()
    # Churn: one host of a table replaced per pass; the others keep serving.
    for n in range(1100):
        t = n % 5
        tables[t][n % 300] = Host(f"{t}-{n % 300}-v{n}")
        data, _ = cache.get_all(("ns", "gw", t), tables[t], encode)
        assert data == _expected(tables[t], b"")[0]
        cache.keep(1200)  # the other tables, unchanged, count as used
        cache.sweep()
    assert len(encoded) == 1100  # only the replaced hosts
    assert not cache._entries  # no copy of each host beside the table's bytes
    assert sum(len(s[0]) for s in cache._sequences.values()) == 1500
