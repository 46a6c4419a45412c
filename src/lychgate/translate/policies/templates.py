"""Transformation templates: kgateway's Inja and Jinja syntaxes compiled to plain data.

A template is text with `{{ expression }}` output, `{% if %}/{% elif %}/
{% else %}/{% endif %}`, `{% for x in list %}...{% endfor %}` (also
`for key, value in object`, and an `{% else %}` for an empty list),
`{% set x = ... %}`, `{% raw %}...{% endraw %}` and `{# comments #}`; a `-`
just inside a tag (`{%-`, `-%}`, `{{-`, `-}}`, `{#-`, `-#}`) trims the
whitespace beside it. Expressions are in template_expr.py.

The result is a tuple of statements, plain tuples the Lua runtime in the proxy
walks per request (docs/policies.md lists the language; template_expr.py the
nodes):

    ("t", text)                          literal text
    ("o", expr)                          an expression's value as text
    ("if", ((cond, body), ...), else)    the first true branch's body
    ("for", (names), expr, body, else)   the body once per item
    ("set", name, expr)

Mistakes are found here, when the policy is translated: a syntax error, an
unknown function or a block left open refuses the policy, naming the field
and the character where it went wrong. Nothing is checked per request.
"""

from __future__ import annotations

import re

from lychgate import ir
from lychgate.translate.policies.template_expr import Node, Tokens, parse
from lychgate.translate.values import Invalid

_OPEN = re.compile(r"\{[{%#]")
# Inja's loop variables or built-ins: `loop.index` then counts from 0, as in Inja.
_INJA = re.compile(r"\bloop\.(?:index1|is_first|is_last|parent)\b|"
                   r"\b(?:existsIn|isString|isNumber|isInteger|isFloat|isBoolean|isArray|isObject|divisibleBy)\s*\(")
_CLOSE = {"{{": "}}", "{%": "%}", "{#": "#}"}
_REFUSED = {"include", "extends", "block", "macro", "call", "import", "from", "filter", "with", "autoescape"}


def compile_template(text: str, path: str) -> ir.Template:
    return _Compiler(text, path).run()


class _Compiler:
    def __init__(self, text: str, path: str) -> None:
        self.text, self.path = text, path
        self.style = "inja" if _INJA.search(text) else "jinja"
        self.stack: list[_Block] = []
        self.out: list[Node] = []

    def run(self) -> ir.Template:
        text, pos, trim_next = self.text, 0, False
        while True:
            m = _OPEN.search(text, pos)
            chunk = text[pos:m.start() if m else len(text)]
            if trim_next:
                chunk = chunk.lstrip()
            if m is None:
                self._text(chunk)
                break
            start, opener = m.start(), m.group()
            inner = start + 2
            if inner < len(text) and text[inner] == "-":
                chunk = chunk.rstrip()
                inner += 1
            elif inner < len(text) and text[inner] == "+":
                inner += 1
            self._text(chunk)
            end = text.find(_CLOSE[opener], inner)
            if end < 0:
                raise Invalid(self.path, f"'{opener}' at character {start} is never closed with '{_CLOSE[opener]}'")
            pos, trim_next = end + 2, False
            if end > inner and text[end - 1] == "-":
                trim_next, end = True, end - 1
            if opener == "{{":
                if not text[inner:end].strip():
                    raise Invalid(self.path, f"empty {{{{ }}}} at character {start}")
                self._emit(("o", self._expr(text[inner:end], inner)))
            elif opener == "{%":
                pos = self._statement(text[inner:end], inner, start, pos)
        if self.stack:
            block = self.stack[-1]
            raise Invalid(self.path, f"{{% {block.kind} %}} at character {block.at} is never closed "
                                     f"with {{% end{block.kind} %}}")
        return _merge(tuple(self.out))

    def _expr(self, source: str, offset: int) -> Node:
        tokens = Tokens(source, offset, self.path)
        e = parse(tokens, self.style)
        tokens.done()
        return e

    def _text(self, chunk: str) -> None:
        if chunk:
            self._emit(("t", chunk))

    def _emit(self, node: Node) -> None:
        (self.stack[-1].body if self.stack else self.out).append(node)

    def _statement(self, source: str, offset: int, at: int, after: int) -> int:
        tokens = Tokens(source, offset, self.path)
        if not tokens.items:
            raise Invalid(self.path, f"empty {{% %}} at character {at}")
        _, word, _ = tokens.take()
        if word == "raw":
            tokens.done()
            m = re.compile(r"\{%-?\s*endraw\s*-?%\}").search(self.text, after)
            if m is None:
                raise Invalid(self.path, f"{{% raw %}} at character {at} is never closed with {{% endraw %}}")
            self._text(self.text[after:m.start()])
            return m.end()
        if word == "if":
            self.stack.append(_Block("if", at))
            self.stack[-1].branches.append((self._rest(tokens), []))
            self.stack[-1].body = self.stack[-1].branches[-1][1]
        elif word == "elif":
            block = self._open("if", "elif", at)
            if block.else_seen:
                raise Invalid(self.path, f"{{% elif %}} at character {at} comes after {{% else %}}")
            block.branches.append((self._rest(tokens), []))
            block.body = block.branches[-1][1]
        elif word == "else":
            tokens.done()
            if not self.stack or self.stack[-1].else_seen:
                raise Invalid(self.path, f"{{% else %}} at character {at} outside an if or for block")
            block = self.stack[-1]
            block.else_seen, block.body = True, block.else_body
        elif word in ("endif", "endfor"):
            tokens.done()
            block = self._open(word[3:], word, at)
            self.stack.pop()
            self._emit(block.node())
        elif word == "for":
            self._for(tokens, at)
        elif word == "set":
            _, name, _ = tokens.take(kind="name")
            tokens.take("=")
            self._emit(("set", name, self._rest(tokens)))
        elif word in _REFUSED:
            raise Invalid(self.path, f"{{% {word} %}} at character {at} is not supported in transformation "
                                     "templates (one template, no macros or includes)")
        else:
            raise Invalid(self.path, f"unknown statement {{% {word} %}} at character {at}; "
                                     "known: if, elif, else, endif, for, endfor, set, raw")
        return after

    def _for(self, tokens: Tokens, at: int) -> None:
        names = [tokens.take(kind="name")[1]]
        while tokens.accept(","):
            names.append(tokens.take(kind="name")[1])
        if len(names) > 2:
            raise Invalid(self.path, f"{{% for %}} at character {at} unpacks one or two names, not {len(names)}")
        tokens.take("in")
        block = _Block("for", at)
        block.names, block.iterable = tuple(names), self._rest(tokens)
        self.stack.append(block)

    def _rest(self, tokens: Tokens) -> Node:
        e = parse(tokens, self.style)
        tokens.done()
        return e

    def _open(self, kind: str, word: str, at: int) -> _Block:
        if not self.stack or self.stack[-1].kind != kind:
            open_kind = self.stack[-1].kind if self.stack else None
            hint = f" (the open block is {{% {open_kind} %}})" if open_kind else ""
            raise Invalid(self.path, f"{{% {word} %}} at character {at} has no matching {{% {kind} %}}{hint}")
        return self.stack[-1]


class _Block:
    def __init__(self, kind: str, at: int) -> None:
        self.kind, self.at = kind, at
        self.branches: list[tuple[Node, list[Node]]] = []
        self.else_body: list[Node] = []
        self.else_seen = False
        self.main: list[Node] = []  # a for block's loop body
        self.body = self.main       # where statements go now
        self.names: tuple[str, ...] = ()
        self.iterable: Node = ("null",)

    def node(self) -> Node:
        if self.kind == "if":
            return ("if", tuple((c, _merge(tuple(b))) for c, b in self.branches), _merge(tuple(self.else_body)))
        return ("for", self.names, self.iterable, _merge(tuple(self.main)), _merge(tuple(self.else_body)))


def _merge(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    """Adjacent text joined, so equal templates compile to equal data."""
    out: list[Node] = []
    for n in nodes:
        if n[0] == "t" and out and out[-1][0] == "t":
            out[-1] = ("t", out[-1][1] + n[1])
        else:
            out.append(n)
    return tuple(out)

