"""Expressions of transformation templates: tokens, then a tree of plain tuples.

One grammar reads both of kgateway's engines: Inja's (`length(items)`,
`headers.X-Incoming-Stuff.0`, `loop.index1`) and minijinja's
(`items|length`, `headers["X-Incoming-Stuff"][0]`, `x is defined`). Every
node is a tuple whose first item names it; the Lua runtime walks the same
tuples (as lists) in the proxy:

    ("s", "text") ("n", 1.5) ("b", True) ("null",) ("list", (e, ...))
    ("v", name)                        a variable: set/loop-bound, else a JSON body field
    ("a", e, key_e)                    attribute or index access
    ("f", name, (arg_e, ...))          a function; a filter is a function of its input
    ("is", test, e, (arg_e, ...))      a Jinja test (`x is defined`)
    ("not", e) ("neg", e) ("and", a, b) ("or", a, b) ("cond", c, a, b)
    ("op", "==", a, b)                 == != < <= > >= in + - * / // % ~
"""

from __future__ import annotations

import json
import re
from typing import Any

from lychgate.translate.values import Invalid

Node = tuple[Any, ...]

# name: (fewest, most) arguments; a filter's input is the first argument.
FUNCTIONS: dict[str, tuple[int, int]] = {
    # kgateway's transformation functions (both engines)
    "header": (1, 1), "request_header": (1, 1), "body": (0, 0), "context": (0, 0), "env": (1, 1),
    "base64_encode": (1, 1), "base64_decode": (1, 1), "base64url_encode": (1, 1), "base64url_decode": (1, 1),
    "substring": (2, 3), "trim": (1, 1), "replace_with_random": (2, 2), "replace_with_string": (3, 3),
    "raw_string": (1, 1), "word_count": (1, 1),
    # lychgate's request accessors
    "path": (0, 0), "method": (0, 0), "query_param": (1, 1), "json": (1, 1),
    # Inja's and Jinja's built-ins
    "tojson": (1, 2), "length": (1, 1), "count": (1, 1), "upper": (1, 1), "lower": (1, 1),
    "capitalize": (1, 1), "title": (1, 1), "default": (2, 3), "d": (2, 3), "replace": (3, 3),
    "join": (1, 2), "first": (1, 1), "last": (1, 1), "int": (1, 2), "float": (1, 2), "string": (1, 1),
    "abs": (1, 1), "round": (1, 2), "sort": (1, 1), "reverse": (1, 1), "list": (1, 1), "items": (1, 1),
    "keys": (1, 1), "values": (1, 1), "min": (1, 1), "max": (1, 1), "range": (1, 3), "split": (1, 2),
    "startswith": (2, 2), "endswith": (2, 2), "urlencode": (1, 1), "at": (2, 2), "exists": (1, 1),
    "existsIn": (2, 2), "isString": (1, 1), "isNumber": (1, 1), "isInteger": (1, 1), "isFloat": (1, 1),
    "isBoolean": (1, 1), "isArray": (1, 1), "isObject": (1, 1), "odd": (1, 1), "even": (1, 1),
    "divisibleBy": (2, 2),
}
# Python-style methods Jinja users write (`x.items()`, `s.upper()`): the function they mean.
METHODS = {"items": "items", "keys": "keys", "values": "values", "upper": "upper", "lower": "lower",
           "strip": "trim", "startswith": "startswith", "endswith": "endswith", "split": "split",
           "replace": "replace", "title": "title", "capitalize": "capitalize"}
# name: how many arguments after the value
TESTS = {"defined": 0, "undefined": 0, "none": 0, "string": 0, "number": 0, "integer": 0, "float": 0,
         "boolean": 0, "mapping": 0, "sequence": 0, "iterable": 0, "true": 0, "false": 0, "odd": 0, "even": 0,
         "divisibleby": 1, "startingwith": 1, "endingwith": 1, "in": 1, "eq": 1, "ne": 1}

# A name may hold dashes between name characters (Inja: `headers.X-Request-Id`);
# `a - b` and `a-1` are still subtractions.
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<num>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op>==|!=|<=|>=|//|[-+*/%~<>()\[\]{},.|=:])
""", re.VERBOSE)
_INDEX = re.compile(r"\d+")
_KEYWORDS = {"and", "or", "not", "in", "is", "if", "else", "true", "false", "True", "False",
             "none", "None", "null"}


class Tokens:
    """The tokens of one tag; `offset` places them in the whole template for errors."""

    def __init__(self, text: str, offset: int, path: str) -> None:
        self.path, self.items, pos = path, [], 0
        after_dot = False
        while pos < len(text):
            # After a dot only a name or an index follows: `items.0.1` is two indexes, not 0.1.
            m = _INDEX.match(text, pos) if after_dot else None
            m = m or _TOKEN.match(text, pos)
            if m is None:
                raise Invalid(path, f"unexpected {text[pos]!r} at character {offset + pos}")
            kind = m.lastgroup or "index"
            if kind != "ws":
                self.items.append((kind, m.group(), offset + pos))
            after_dot = kind == "op" and m.group() == "."
            pos = m.end()
        self.i = 0
        self.end = offset + len(text)

    def peek(self, value: str | None = None, kind: str | None = None, ahead: int = 0) -> bool:
        if self.i + ahead >= len(self.items):
            return False
        k, v, _ = self.items[self.i + ahead]
        if kind is not None:
            return k == kind and (value is None or v == value)
        return v == value and k in ("op", "name")

    def take(self, value: str | None = None, kind: str | None = None) -> tuple[str, str, int]:
        if self.i >= len(self.items):
            raise Invalid(self.path, f"expected {value or kind or 'an expression'} at character {self.end}, "
                                     "found the end of the tag")
        tok = self.items[self.i]
        if (value is not None and (tok[1] != value or tok[0] == "str")) or (kind is not None and tok[0] != kind):
            raise Invalid(self.path, f"expected {value or kind} at character {tok[2]}, found {tok[1]!r}")
        self.i += 1
        return tok

    def accept(self, value: str) -> bool:
        if self.peek(value):
            self.i += 1
            return True
        return False

    def done(self) -> None:
        if self.i < len(self.items):
            _, v, pos = self.items[self.i]
            raise Invalid(self.path, f"unexpected {v!r} at character {pos}")


def parse(tokens: Tokens, loop_style: str) -> Node:
    """An expression; `loop_style` ("inja" or "jinja") says what `loop.index` counts from."""
    return _Parser(tokens, loop_style).expression()


class _Parser:
    def __init__(self, tokens: Tokens, loop_style: str) -> None:
        self.t, self.loop_style = tokens, loop_style

    def expression(self) -> Node:
        e = self._or()
        if self.t.peek("if"):  # Jinja's `a if cond else b`
            self.t.take("if")
            cond = self._or()
            other: Node = ("s", "")
            if self.t.accept("else"):
                other = self.expression()
            return ("cond", cond, e, other)
        return e

    def _or(self) -> Node:
        e = self._and()
        while self.t.accept("or"):
            e = ("or", e, self._and())
        return e

    def _and(self) -> Node:
        e = self._not()
        while self.t.accept("and"):
            e = ("and", e, self._not())
        return e

    def _not(self) -> Node:
        if self.t.accept("not"):
            return ("not", self._not())
        return self._compare()

    def _compare(self) -> Node:
        e = self._concat()
        while True:
            for op in ("==", "!=", "<=", ">=", "<", ">"):
                if self.t.peek(op, "op"):
                    self.t.take(op)
                    e = ("op", op, e, self._concat())
                    break
            else:
                if self.t.peek("in"):
                    self.t.take("in")
                    e = ("op", "in", e, self._concat())
                elif self.t.peek("not") and self.t.peek("in", ahead=1):
                    self.t.take("not")
                    self.t.take("in")
                    e = ("not", ("op", "in", e, self._concat()))
                elif self.t.peek("is"):
                    e = self._test(e)
                else:
                    return e

    def _test(self, e: Node) -> Node:
        self.t.take("is")
        negate = self.t.accept("not")
        _, name, pos = self.t.take(kind="name")
        if name not in TESTS:
            raise Invalid(self.t.path, f"unknown test 'is {name}' at character {pos}; known: {', '.join(TESTS)}")
        args: tuple[Node, ...] = ()
        if self.t.peek("("):
            args = self._args()
        elif TESTS[name] and not self._ends():
            args = (self._concat(),)
        if len(args) != TESTS[name]:
            raise Invalid(self.t.path, f"'is {name}' at character {pos} takes {TESTS[name]} argument(s)")
        node: Node = ("is", name, e, args)
        return ("not", node) if negate else node

    def _ends(self) -> bool:
        return self.t.i >= len(self.t.items) or any(self.t.peek(v) for v in ("and", "or", "else", ")", "]", ","))

    def _concat(self) -> Node:
        e = self._sum()
        while self.t.peek("~", "op"):
            self.t.take("~")
            e = ("op", "~", e, self._sum())
        return e

    def _sum(self) -> Node:
        e = self._product()
        while self.t.peek("+", "op") or self.t.peek("-", "op"):
            op = self.t.take()[1]
            e = ("op", op, e, self._product())
        return e

    def _product(self) -> Node:
        e = self._unary()
        while any(self.t.peek(op, "op") for op in ("*", "/", "//", "%")):
            op = self.t.take()[1]
            e = ("op", op, e, self._unary())
        return e

    def _unary(self) -> Node:
        if self.t.peek("-", "op"):
            self.t.take("-")
            return ("neg", self._unary())
        if self.t.peek("+", "op"):
            self.t.take("+")
        return self._postfix(self._primary())

    def _primary(self) -> Node:
        kind, value, pos = self.t.take()
        if kind == "num":
            return ("n", float(value) if any(c in value for c in ".eE") else int(value))
        if kind == "str":
            return ("s", _unquote(value, self.t.path, pos))
        if kind == "op" and value == "(":
            e = self.expression()
            self.t.take(")")
            return e
        if kind == "op" and value == "[":
            items: list[Node] = []
            while not self.t.peek("]"):
                items.append(self.expression())
                if not self.t.accept(","):
                    break
            self.t.take("]")
            return ("list", tuple(items))
        if kind == "name":
            if value in ("true", "True"):
                return ("b", True)
            if value in ("false", "False"):
                return ("b", False)
            if value in ("none", "None", "null"):
                return ("null",)
            if value in _KEYWORDS:
                raise Invalid(self.t.path, f"unexpected {value!r} at character {pos}")
            if self.t.peek("("):
                return self._call(value, pos, ())
            return ("v", value)
        raise Invalid(self.t.path, f"unexpected {value!r} at character {pos}")

    def _postfix(self, e: Node) -> Node:
        while True:
            if self.t.accept("."):
                kind, key, pos = self.t.take()
                if kind not in ("name", "index"):
                    raise Invalid(self.t.path, f"expected a name after '.' at character {pos}, found {key!r}")
                if self.t.peek("("):
                    if key not in METHODS:
                        raise Invalid(self.t.path, f"unknown method .{key}() at character {pos}; "
                                                   f"known: {', '.join(METHODS)}")
                    e = self._call(METHODS[key], pos, (e,))
                elif e == ("v", "loop"):
                    e = ("a", e, ("s", self._loop_field(key)))
                else:
                    e = ("a", e, ("n", int(key)) if kind == "index" else ("s", key))
            elif self.t.accept("["):
                key_e = self.expression()
                self.t.take("]")
                e = ("a", e, key_e)
            elif self.t.peek("|", "op"):
                self.t.take("|")
                _, name, pos = self.t.take(kind="name")
                e = self._call(name, pos, (e,)) if self.t.peek("(") else self._check_call(name, pos, (e,))
            else:
                return e

    def _loop_field(self, key: str) -> str:
        """Inja's and Jinja's loop variables, on one runtime table."""
        if key == "index":
            return "index0" if self.loop_style == "inja" else "index1"
        return {"is_first": "first", "is_last": "last"}.get(key, key)

    def _args(self) -> tuple[Node, ...]:
        self.t.take("(")
        args: list[Node] = []
        while not self.t.peek(")"):
            if self.t.peek(kind="name") and self.t.peek("=", ahead=1):
                _, name, pos = self.t.take()
                raise Invalid(self.t.path, f"keyword argument {name}= at character {pos} is not supported; "
                                           "pass arguments in order")
            args.append(self.expression())
            if not self.t.accept(","):
                break
        self.t.take(")")
        return tuple(args)

    def _call(self, name: str, pos: int, first: tuple[Node, ...]) -> Node:
        return self._check_call(name, pos, first + self._args())

    def _check_call(self, name: str, pos: int, args: tuple[Node, ...]) -> Node:
        if name not in FUNCTIONS:
            raise Invalid(self.t.path, f"unknown function {name}() at character {pos}; known: "
                                       + ", ".join(f"{f}()" for f in FUNCTIONS))
        fewest, most = FUNCTIONS[name]
        if not fewest <= len(args) <= most:
            want = str(fewest) if fewest == most else f"{fewest} to {most}"
            raise Invalid(self.t.path, f"{name}() at character {pos} takes {want} argument(s), not {len(args)}")
        return ("f", name, args)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "/": "/", "b": "\b", "f": "\f"}


def _unquote(literal: str, path: str, pos: int) -> str:
    body = literal[1:-1]
    if literal[0] == '"':
        try:
            return str(json.loads(literal))
        except ValueError:
            pass
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt not in _ESCAPES:
                raise Invalid(path, f"unknown escape \\{nxt} in the string at character {pos}")
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)
