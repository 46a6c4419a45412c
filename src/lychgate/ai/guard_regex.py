"""promptGuard `regex`: built-in and custom patterns that mask or reject text.

kgateway ran these through Presidio recognizers, every pattern with Python's
regex flags DOTALL | MULTILINE | IGNORECASE, and masked a match with its entity
type in angle brackets (Presidio's default "replace"). Here the same names and
masks, with patterns of our own for the built-ins:

- CREDIT_CARD -> <CREDIT_CARD>: 13 to 19 digits (first digit 2-6: the card
  networks), optionally grouped by single spaces or hyphens, passing the Luhn
  checksum as Presidio required. A run that fails is retried without its trailing
  groups, so "4111 1111 1111 1111 12/27" still masks the card.
- SSN -> <US_SSN>: 3-2-4 digits with one separator used twice (-, space or dot),
  without the numbers the SSA never issues (area 000 or 666, group 00, serial
  0000, one digit repeated). Presidio also took bare 9-digit runs and 5-4 digit
  groups (ZIP+4 codes); those are left alone here, they are mostly not SSNs.
- PHONE_NUMBER -> <PHONE_NUMBER>: North American numbers (optional +1 or 1,
  area code with or without parentheses, separators - . or space) and
  international ones written with + and 8 to 15 digits. Presidio asked the
  phonenumbers library, which also knew national formats of other countries.
- EMAIL -> <EMAIL_ADDRESS>: local@domain with an alphabetic top-level domain.

Custom `matches` use Python's `re` (the engine kgateway's extension used, not
RE2) with those flags, and mask as <CUSTOM> as kgateway did; `name` is only for
people reading the policy.

Streams are masked as they pass: each pushed piece of text goes out at once
except the tail a pattern could still be matching. How far back that is comes
from the pattern itself: a match can reach at most its width from where it
starts (an open-ended repeat such as `+` or `*` is assumed to cover 32
characters in a stream), and a built-in match cannot cross a character outside
its alphabet (a letter ends any card number, whitespace ends an e-mail address).
So plain prose flows through untouched, digits that may be a card wait until a
non-digit or 34 characters settle them, and the output is the same as masking
the whole text at once; the exception is a custom match longer than its assumed
width (or 256 characters), which a stream masks only as far as it held.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lychgate.ai.rejection import PolicyError

# CPython's regex parser (no public API gives a pattern's width); typeshed has no stubs for it.
_sre: Any = importlib.import_module("re._constants")
_sre_parse: Any = importlib.import_module("re._parser")

FLAGS = re.DOTALL | re.MULTILINE | re.IGNORECASE  # kgateway's, for every pattern

# What a stream may hold back: an open-ended repeat is taken to span this many
# characters, and no pattern holds more than MAX_HOLD.
UNBOUNDED_SPAN = 32
MAX_HOLD = 256
# Already emitted text kept for the next scan, so lookbehinds and \b see it.
CONTEXT = 64


@dataclass(frozen=True)
class Pattern:
    rx: re.Pattern[str]
    label: str  # what a match becomes when masked
    width: int  # the farthest a match (and its lookaheads) reaches from its start
    # Finds where the text's tail could be the beginning of a match: a character a match
    # starts with, followed only by characters a match consists of (built-ins only).
    tail: re.Pattern[str] | None = None
    # The length of the match's valid prefix (0: not a match); None: every match counts.
    validate: Callable[[str], int] | None = None

    def matches(self, text: str, pos: int) -> Iterator[tuple[int, int]]:
        """The (start, end) of each match from pos on, in order, as finditer would go."""
        end = len(text)
        while pos <= end:
            m = self.rx.search(text, pos)
            if m is None:
                return
            s, e = m.span()
            if s == e:  # an empty match masks nothing
                pos = s + 1
                continue
            n = self.validate(m.group()) if self.validate else e - s
            if n:
                yield s, s + n
                pos = s + n
            else:
                # Refused by its check (a card failing Luhn): a real match may start inside
                # it ("3456 4111 1111 1111 1111" holds a card from its 5th digit on).
                pos = s + 1

    def unsettled_from(self, text: str, start: int) -> int:
        """The first position a match could start at and still run past the end of text
        (text that is still coming): everything before it is decided."""
        lo = max(start, len(text) - self.width)
        if self.tail is None:
            return lo
        m = self.tail.search(text, lo)
        return m.start() if m else len(text)


def _luhn(digits: Sequence[int]) -> bool:
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _card(match: str) -> int:
    # The whole run first, then without its trailing groups (a date or code after the card).
    ends = [len(match)] + [i for i in range(len(match) - 1, 0, -1) if match[i] in " -"]
    for end in ends:
        digits = [int(c) for c in match[:end] if c not in " -"]
        if 13 <= len(digits) <= 19 and _luhn(digits):
            return end
    return 0


def _ssn(match: str) -> int:
    d = "".join(c for c in match if c not in " .-")
    never_issued = d[:3] in ("000", "666") or d[3:5] == "00" or d[5:] == "0000"
    return 0 if never_issued or len(set(d)) == 1 else len(match)


def _phone(match: str) -> int:
    if not match.startswith("+"):
        return len(match)
    digits = sum(c.isdigit() for c in match)
    return len(match) if 8 <= digits <= 15 else 0  # E.164: at most 15 digits


def reach(pattern: str) -> int:
    """How many characters from a match's start the pattern can look at (its widest
    match plus lookaheads), open-ended repeats counted as UNBOUNDED_SPAN, at most
    MAX_HOLD. Read from Python's own parse of the pattern."""
    try:
        return min(_width(_sre_parse.parse(pattern, FLAGS), {}), MAX_HOLD)
    except Exception:  # a construct this walk does not know: hold the most
        return MAX_HOLD


def _width(nodes: Any, groups: dict[int, int]) -> int:
    total = 0
    for op, av in nodes:
        if op in (_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN):
            total += 1
        elif op is _sre.AT:
            pass
        elif op is _sre.SUBPATTERN:
            group, _, _, sub = av
            w = _width(sub, groups)
            if group:
                groups[group] = w
            total += w
        elif op is _sre.ATOMIC_GROUP:
            total += _width(av, groups)
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT):
            lo, hi, sub = av
            w = _width(sub, groups)
            total += max(lo * w, UNBOUNDED_SPAN) if hi == _sre.MAXREPEAT else min(hi * w, MAX_HOLD)
        elif op is _sre.BRANCH:
            total += max(_width(alt, groups) for alt in av[1])
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            direction, sub = av
            total += _width(sub, groups) if direction > 0 else 0  # lookbehinds see emitted context
        elif op is _sre.GROUPREF:
            total += groups.get(av, UNBOUNDED_SPAN)
        elif op is _sre.GROUPREF_EXISTS:
            _, yes, no = av
            total += max(_width(yes, groups), _width(no, groups) if no else 0)
        else:
            raise ValueError(f"unknown regex node {op}")
    return total


def _builtin(name: str, pattern: str, label: str, starts: str, alphabet: str,
             validate: Callable[[str], int] | None = None) -> tuple[str, Pattern]:
    """A built-in: its matches start with one of `starts` and consist of `alphabet`."""
    tail = re.compile(f"(?=[{starts}])[{alphabet}]*\\Z", FLAGS)
    return name, Pattern(re.compile(pattern, FLAGS), f"<{label}>", reach(pattern), tail, validate)


BUILTINS: dict[str, Pattern] = dict([
    _builtin("CREDIT_CARD", r"\b[2-6]\d{3}(?:[ -]?\d){9,15}\b", "CREDIT_CARD", r"\d", r"\d -", _card),
    _builtin("SSN", r"\b\d{3}([ .-])\d{2}\1\d{4}\b", "US_SSN", r"\d", r"\d .-", _ssn),
    _builtin("PHONE_NUMBER",
             r"(?<![\w+])(?:\+\d{1,3}(?:[ .-]?(?:\(\d{1,4}\)|\d{1,4})){2,5}"
             r"|(?:1[ .-]?)?(?:\(\d{3}\)[ .-]?|\d{3}[ .-]?)\d{3}[ .-]?\d{4})(?![\w])",
             "PHONE_NUMBER", r"\d(+", r"\d ().+-", _phone),
    _builtin("EMAIL",
             r"\b[a-z0-9._%+-]{1,64}@(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.){1,8}[a-z]{2,24}\b",
             "EMAIL_ADDRESS", r"\w", r"\w.%+@-"),
])


@dataclass
class _Group:
    """Overlapping matches, masked as one (with the first match's label)."""

    start: int
    end: int
    label: str
    last_end: dict[int, int]  # pattern index -> end of its last match in the group
    starts: list[tuple[int, int]]  # (pattern index, start) of each match


def _merge(spans: list[tuple[int, int, int]], patterns: Sequence[Pattern]) -> list[_Group]:
    groups: list[_Group] = []
    for s, e, i in sorted(spans, key=lambda sp: (sp[0], -sp[1])):
        if groups and s < groups[-1].end:
            g = groups[-1]
            g.end = max(g.end, e)
            g.last_end[i] = max(g.last_end.get(i, e), e)
            g.starts.append((i, s))
        else:
            groups.append(_Group(s, e, patterns[i].label, {i: e}, [(i, s)]))
    return groups


@dataclass(frozen=True)
class RegexGuard:
    patterns: tuple[Pattern, ...]
    reject: bool = False  # action REJECT: any match rejects; MASK: matches are masked

    def contains(self, text: str) -> bool:
        return any(next(p.matches(text, 0), None) for p in self.patterns)

    def mask(self, text: str) -> str:
        groups, _ = self.scan(text, 0, final=True)
        return _render(text, 0, len(text), groups)

    def scan(self, text: str, start: int, final: bool) -> tuple[list[_Group], int]:
        """The matches from `start` on that are decided, and how far the text is decided
        (the commit point: text before it can go out as masked; text after it waits).
        With final=True the text is complete and all of it is decided."""
        spans = [(s, e, i) for i, p in enumerate(self.patterns) for s, e in p.matches(text, start)]
        groups = _merge(spans, self.patterns)
        if final:
            return groups, len(text)
        reach_from = [p.unsettled_from(text, start) for p in self.patterns]
        commit = min(reach_from)
        decided = []
        for g in groups:
            if g.start >= commit:
                break
            if g.end > commit:
                # Crosses into the undecided tail: final only if each of its matches is
                # decided and no pattern could still start a match inside it.
                own = all(s < reach_from[i] for i, s in g.starts)
                others = all(max(reach_from[j], g.last_end.get(j, -1)) >= g.end
                             for j in range(len(self.patterns)))
                if not (own and others):
                    commit = g.start
                    break
                commit = g.end
            decided.append(g)
        return decided, commit


def _render(text: str, start: int, end: int, groups: list[_Group]) -> str:
    out, pos = [], start
    for g in groups:
        out.append(text[pos:g.start])
        out.append(g.label)
        pos = g.end
    out.append(text[pos:end])
    return "".join(out)


class MaskStream:
    """One streamed text (one choice of an answer) through a RegexGuard."""

    def __init__(self, guard: RegexGuard) -> None:
        self.guard = guard
        self.text = ""  # CONTEXT already emitted characters, then the held ones
        self.done = 0  # where the held text starts in self.text

    def push(self, delta: str, final: bool = False) -> str | None:
        """The text that can go out now (masked), or None when the guard rejects."""
        self.text += delta
        groups, commit = self.guard.scan(self.text, self.done, final)
        if self.guard.reject and groups:
            return None
        out = _render(self.text, self.done, commit, groups)
        keep = max(0, commit - CONTEXT)
        self.text, self.done = self.text[keep:], commit - keep
        return out


def parse_regex(raw: Mapping[str, Any], where: str) -> RegexGuard | None:
    """kgateway's Regex: `matches` ({pattern, name}, or plain strings), `builtins`,
    `action` (MASK, the default, or REJECT). None when it names no pattern."""
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{where}: must be an object with matches and/or builtins")
    patterns: list[Pattern] = []
    for i, name in enumerate(raw.get("builtins") or ()):
        if name not in BUILTINS:
            raise PolicyError(f"{where}.builtins[{i}]: unknown built-in {name!r} "
                              f"(one of {', '.join(BUILTINS)})")
        patterns.append(BUILTINS[name])
    for i, m in enumerate(raw.get("matches") or ()):
        text = m.get("pattern") if isinstance(m, Mapping) else m
        if not isinstance(text, str) or not text:
            raise PolicyError(f"{where}.matches[{i}].pattern: required, a regular expression")
        try:
            rx = re.compile(text, FLAGS)
        except re.error as err:
            raise PolicyError(f"{where}.matches[{i}].pattern: invalid regular expression: {err}") from None
        patterns.append(Pattern(rx, "<CUSTOM>", reach(text)))
    action = raw.get("action") or "MASK"
    if action not in ("MASK", "REJECT"):
        raise PolicyError(f"{where}.action: must be MASK or REJECT, not {action!r}")
    return RegexGuard(tuple(patterns), reject=action == "REJECT") if patterns else None
