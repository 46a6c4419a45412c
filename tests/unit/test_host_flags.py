"""Listener-wide questions answered incrementally (xds/translator/host_flags.py) give the
answer a full walk gives, pass after pass: a seeded random walk of host tuples as
translation makes them (most hosts the same objects, some replaced, added or removed)."""

from __future__ import annotations

import random

from lychgate import ir
from lychgate.xds.translator import host_flags


def _host(i: int, marked: bool) -> ir.VirtualHost:
    # Only the name and the domains matter to the question below; a host without routes.
    return ir.VirtualHost(name=f"h{i}{'-marked' if marked else ''}", domains=(f"h{i}.test",), routes=())


def _marked(vh: ir.VirtualHost) -> bool:
    return vh.name.endswith("-marked")


def _even(vh: ir.VirtualHost) -> bool:
    return int(vh.name[1:].split("-")[0]) % 2 == 0


def _listener(hosts: list[ir.VirtualHost]) -> ir.HTTPListener:
    return ir.HTTPListener(name="http-8080", address="127.0.9.1", port=8080, virtual_hosts=tuple(hosts))


def test_incremental_answers_equal_a_full_walk() -> None:
    rng = random.Random(34)
    hosts = [_host(i, False) for i in range(50)]
    serial = 50
    for step in range(400):
        kind = rng.random()
        if kind < 0.4 and hosts:  # one host replaced (a route edited), marked or not
            i = rng.randrange(len(hosts))
            hosts[i] = _host(serial, rng.random() < 0.3)
        elif kind < 0.6:  # a host added somewhere
            hosts.insert(rng.randrange(len(hosts) + 1), _host(serial, rng.random() < 0.3))
        elif kind < 0.85 and hosts:  # a host removed
            hosts.pop(rng.randrange(len(hosts)))
        else:  # every marked host unmarked (the last route with the feature gone)
            hosts = [_host(serial + j, False) if _marked(vh) else vh for j, vh in enumerate(hosts)]
            serial += len(hosts)
        serial += 1
        listener = _listener(hosts)  # (one listener, asked several questions, as a build does)
        assert host_flags.any_host(listener, _even) == any(_even(vh) for vh in hosts), f"step {step}"
        if step % 3 == 0:  # a question asked on some passes only: counted on older hosts than the other
            assert host_flags.any_host(listener, _marked) == any(_marked(vh) for vh in hosts), f"step {step}"
