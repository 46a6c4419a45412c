"""Label and field selectors with the API server's grammar and matching rules.

Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`,
`k>1`, `k<1`; `!=` and `notin` also match objects without the label, as upstream.
Field selectors: `f=v`, `f==v`, `f!=v` on a fixed set of field labels per type
(metadata.name and metadata.namespace everywhere); any other field is a 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SET_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<vals>[^)]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s*(?P<op>==|=|!=|>|<)\s*(?P<val>[-A-Za-z0-9_.]*)\s*$")
_EXISTS_RE = re.compile(rf"^\s*(?P<neg>!?)\s*(?P<key>{_KEY})\s*$")


class SelectorError(ValueError):
    pass


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # in, notin, exists, !, =, !=, >, <
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op in (">", "<"):
            if not present:
                return False
            try:
                have, want = int(value or ""), int(self.values[0])
            except ValueError:
                return False
            return have > want if self.op == ">" else have < want
        raise AssertionError(self.op)


def _split_terms(s: str) -> list[str]:
    """Split on commas that are not inside a `(...)` value set."""
    terms: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return terms


def parse_labels(selector: str) -> list[Requirement]:
    reqs: list[Requirement] = []
    if not selector.strip():
        return reqs
    for term in _split_terms(selector):
        if m := _SET_RE.match(term):
            vals = tuple(v.strip() for v in m["vals"].split(",") if v.strip())
            reqs.append(Requirement(m["key"], m["op"], vals))
        elif m := _CMP_RE.match(term):
            op = "=" if m["op"] == "==" else m["op"]
            if op in (">", "<") and not re.fullmatch(r"-?\d+", m["val"]):
                raise SelectorError(f"unable to parse requirement: for 'gt', 'lt' operators, the value must be an integer: {term!r}")
            reqs.append(Requirement(m["key"], op, (m["val"],)))
        elif m := _EXISTS_RE.match(term):
            reqs.append(Requirement(m["key"], "!" if m["neg"] else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: found '{term.strip()}', expected: valid label selector term")
    return reqs


def labels_match(reqs: list[Requirement], obj: Mapping[str, Any]) -> bool:
    labels = ((obj.get("metadata") or {}).get("labels")) or {}
    return all(r.matches(labels) for r in reqs)


# --- fields ---------------------------------------------------------------------------

FieldGetter = Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: str  # = or !=
    value: str


def _split_escaped(s: str, sep: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    esc = False
    for ch in s:
        if esc:
            cur.append(ch)
            esc = False
        elif ch == "\\":
            cur.append(ch)
            esc = True
        elif ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def parse_fields(selector: str, supported: tuple[str, ...]) -> list[FieldRequirement]:
    reqs: list[FieldRequirement] = []
    if not selector.strip():
        return reqs
    for term in _split_escaped(selector, ","):
        m = re.match(r"^\s*([^!=\s]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if m is None:
            raise SelectorError(f"invalid selector: '{selector}'; can't understand '{term}'")
        field, op, value = m[1], "=" if m[2] == "==" else m[2], _unescape(m[3])
        if field not in supported:
            raise SelectorError(f'field label not supported: {field}')
        reqs.append(FieldRequirement(field, op, value))
    return reqs


def field_value(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def fields_match(reqs: list[FieldRequirement], obj: Mapping[str, Any]) -> bool:
    for r in reqs:
        have = field_value(obj, r.field)
        if (have == r.value) != (r.op == "="):
            return False
    return True
