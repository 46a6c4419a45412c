"""ListenerSets (GEP-1713): listeners other objects add to a Gateway.

A Gateway admits ListenerSets only as its `allowedListeners` says (none by
default). Listener precedence settles conflicts: the Gateway's own listeners
first, then ListenerSets oldest first (then by namespace/name); a listener that
conflicts with one before it is not served and says so in its set's status.
"""

from __future__ import annotations

from typing import Any

from lychgate.api.gateway import GROUP, Gateway, ListenerSet
from lychgate.store import Store
from lychgate.translate.conditions import condition
from lychgate.translate.listeners import ListenerState, namespace_admitted


def listener_sets(store: Store, gateway: Gateway) -> list[tuple[ListenerSet, bool]]:
    """The ListenerSets naming a Gateway as parent, in precedence order, each with
    whether the Gateway allows it."""
    out = []
    for ls in store.list(ListenerSet):
        ref = ls.spec.parent_ref
        if ref.group not in (GROUP, "") or ref.kind != "Gateway":
            continue
        if (ref.namespace or ls.namespace, ref.name) != (gateway.namespace, gateway.name):
            continue
        ns = gateway.spec.allowed_listeners.namespaces
        out.append((ls, namespace_admitted(store, ns.from_, ns.selector, gateway.namespace, ls.namespace)))
    return sorted(out, key=lambda e: (e[0].created, e[0].namespace, e[0].name))


def set_status(ls: ListenerSet, allowed: bool, listeners: list[ListenerState]) -> dict[str, Any]:
    gen = ls.generation
    if not allowed:
        why = "the Gateway's allowedListeners does not admit ListenerSets from namespace " + ls.namespace
        return {"conditions": [condition("Accepted", False, "NotAllowed", why, gen),
                               condition("Programmed", False, "NotAllowed", why, gen)],
                "listeners": []}
    valid = [l for l in listeners if l.serving]
    if valid:
        bad = [l.name for l in listeners if not l.serving]
        accepted = condition("Accepted", True, "Accepted" if not bad else "ListenersNotValid",
                             "ListenerSet is accepted" if not bad else f"invalid listeners are not served: {', '.join(bad)}",
                             gen)
        programmed = condition("Programmed", True, "Programmed", "its valid listeners are configured in the proxy", gen)
    else:
        accepted = condition("Accepted", False, "ListenersNotValid", "no listener of the ListenerSet is valid", gen)
        programmed = condition("Programmed", False, "ListenersNotValid", "no listener of the ListenerSet is valid", gen)
    return {"conditions": [accepted, programmed], "listeners": [l.status(gen) for l in listeners]}
