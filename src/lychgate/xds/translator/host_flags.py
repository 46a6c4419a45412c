"""Listener-wide questions over every virtual host ("does any route use CORS?"), answered
incrementally.

Several features ask one each while building a connection manager; at 3,000 hosts the
five walks cost about 7 ms of every change to one route. Each answer is kept as a count
of the hosts that say yes, with the host tuple it was counted on: the next pass counts
only the hosts between the unchanged ends (the very objects of the last tuple), so a
change to one route asks one host, not all. The last tuples are kept for a bounded
number of listeners (a key that falls out is counted in full again: only slower).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from lychgate import ir
from lychgate.identity import unchanged_ends

Question = Callable[[ir.VirtualHost], bool]
KEPT = 256  # (listener, question) counts kept (a few per Gateway listener)

_counts: OrderedDict[tuple[object, ...], tuple[tuple[ir.VirtualHost, ...], int]] = OrderedDict()
# The last two host tuples compared, and their unchanged ends: every question about a listener
# compares the same two (a listener's connection manager asks about seven).
_last: tuple[tuple[ir.VirtualHost, ...], tuple[ir.VirtualHost, ...], int, int] = ((), (), 0, 0)


def any_host(listener: ir.HTTPListener, question: Question) -> bool:
    """Whether `question` holds for any of the listener's virtual hosts."""
    hosts = listener.virtual_hosts
    key = (listener.name, listener.address, listener.port, listener.server_names, question)
    last = _counts.get(key)
    if last is None:
        count = sum(1 for vh in hosts if vh.summary(question))
    else:
        old, old_count = last
        head, tail = _unchanged_ends(hosts, old)
        count = (old_count - sum(1 for vh in old[head:len(old) - tail] if vh.summary(question))
                 + sum(1 for vh in hosts[head:len(hosts) - tail] if vh.summary(question)))
    _counts[key] = (hosts, count)
    _counts.move_to_end(key)
    if len(_counts) > KEPT:
        _counts.popitem(last=False)
    return count > 0


def _unchanged_ends(hosts: tuple[ir.VirtualHost, ...], old: tuple[ir.VirtualHost, ...]) -> tuple[int, int]:
    global _last
    last_hosts, last_old, head, tail = _last
    if last_hosts is not hosts or last_old is not old:
        head, tail = unchanged_ends(hosts, old)
        _last = (hosts, old, head, tail)
    return head, tail
