"""What a compiled transformation template reads: the runtime prepares (or refuses) per message.

Walks the nodes of translate/policies/templates.py: the functions called,
the variables no `set`/`for` binds (JSON body fields), and the request
headers response templates read (stashed by the request half).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lychgate import ir

Node = tuple[Any, ...]


@dataclass
class Uses:
    """What a template reads, for the runtime to prepare (or refuse) per message."""

    functions: set[str] = field(default_factory=set)
    free: set[str] = field(default_factory=set)        # variables no set/for binds: JSON body fields
    request_headers: set[str] = field(default_factory=set)
    any_request_header: bool = False                     # request_header() of a computed name


def uses(template: ir.Template) -> Uses:
    found = Uses()
    _walk(template, set(), found)
    return found


def _walk(nodes: tuple[Node, ...], bound: set[str], found: Uses) -> None:
    bound = set(bound)  # a `set` inside a block is visible after it (Inja), never to the caller's siblings
    for n in nodes:
        kind = n[0]
        if kind == "o":
            _expr(n[1], bound, found)
        elif kind == "set":
            _expr(n[2], bound, found)
            bound.add(n[1])
        elif kind == "if":
            for cond, body in n[1]:
                _expr(cond, bound, found)
                _walk(body, bound, found)
            _walk(n[2], bound, found)
        elif kind == "for":
            _expr(n[2], bound, found)
            _walk(n[3], bound | set(n[1]) | {"loop"}, found)
            _walk(n[4], bound, found)


def _expr(e: Node, bound: set[str], found: Uses) -> None:
    kind = e[0]
    if kind == "v":
        if e[1] not in bound:
            found.free.add(e[1])
    elif kind == "f":
        found.functions.add(e[1])
        if e[1] == "request_header":
            if e[2][0][0] == "s":
                found.request_headers.add(e[2][0][1].lower())
            else:
                found.any_request_header = True
        for a in e[2]:
            _expr(a, bound, found)
    elif kind == "is":
        _expr(e[2], bound, found)
        for a in e[3]:
            _expr(a, bound, found)
    elif kind == "list":
        for a in e[1]:
            _expr(a, bound, found)
    elif kind not in ("s", "n", "b", "null"):
        for a in e[1:]:
            if isinstance(a, tuple):
                _expr(a, bound, found)
