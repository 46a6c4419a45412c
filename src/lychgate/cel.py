"""CEL text → the parsed syntax tree Envoy evaluates (`cel.expr.ParsedExpr`).

Envoy 1.40's CEL matcher takes an expression only as a parsed tree (a string
is refused: "CEL expression not set"), so the control plane parses it: the
grammar and parser are cel-python's (the CEL spec's grammar in Lark), the
conversion to the canonical tree (operators as `_==_`, `_&&_`, `_[_]`, ...,
`has()` as a test-only select) is here. Other macros (`all`, `exists`, `map`,
`filter`) would need comprehensions and are refused with a clear message.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

from cel.expr import syntax_pb2

if TYPE_CHECKING:
    import lark
    from celpy.celparser import CELParser

_BINARY = {
    "relation_lt": "_<_", "relation_le": "_<=_", "relation_gt": "_>_", "relation_ge": "_>=_",
    "relation_eq": "_==_", "relation_ne": "_!=_", "relation_in": "@in",
    "addition_add": "_+_", "addition_sub": "_-_",
    "multiplication_mul": "_*_", "multiplication_div": "_/_", "multiplication_mod": "_%_",
}
_MACROS = {"all", "exists", "exists_one", "map", "filter"}


class CelError(ValueError):
    """An expression that is not CEL, or uses what lychgate cannot hand to Envoy."""


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> bytes:
    """The serialized cel.expr.ParsedExpr of `text`; raises CelError."""
    parser = _PARSER()
    from celpy.celparser import CELParseError  # loaded by _PARSER()

    try:
        tree = parser.parse(text)
    except CELParseError as err:
        lines = str(err).strip().splitlines()
        raise CelError(lines[0] if lines else "syntax error") from None
    ids = iter(range(1, 1 << 30))
    out = syntax_pb2.ParsedExpr(expr=_Builder(ids).expr(tree))
    return out.SerializeToString()


@functools.lru_cache(maxsize=1)
def _PARSER() -> CELParser:
    # cel-python and Lark (6 MiB of the controller's memory) load with the first CEL
    # expression: most configurations have none.
    from celpy.celparser import CELParser

    return CELParser()


class _Builder:
    def __init__(self, ids: Iterator[int]) -> None:
        self.ids = ids

    def node(self, **fields: object) -> syntax_pb2.Expr:
        return syntax_pb2.Expr(id=next(self.ids), **fields)

    def call(self, function: str, *args: syntax_pb2.Expr, target: syntax_pb2.Expr | None = None) -> syntax_pb2.Expr:
        c = syntax_pb2.Expr.Call(function=function, args=list(args))
        if target is not None:
            c.target.CopyFrom(target)
        return self.node(call_expr=c)

    def expr(self, t: lark.Tree) -> syntax_pb2.Expr:
        kids = [k for k in t.children if k is not None]
        rule = t.data
        if rule == "expr":
            if len(kids) == 1:
                return self.expr(kids[0])
            return self.call("_?_:_", *(self.expr(k) for k in kids))
        if rule in ("conditionalor", "conditionaland"):
            if len(kids) == 1:
                return self.expr(kids[0])
            return self.call("_||_" if rule == "conditionalor" else "_&&_", self.expr(kids[0]), self.expr(kids[1]))
        if rule in ("relation", "addition", "multiplication"):
            if len(kids) == 1:
                return self.expr(kids[0])
            op, right = kids
            return self.call(_BINARY[op.data], self.expr(op.children[0]), self.expr(right))
        if rule == "unary":
            if len(kids) == 1:
                return self.expr(kids[0])
            op, operand = kids
            return self.call("!_" if op.data == "unary_not" else "-_", self.expr(operand))
        # A child is a lark.Tree or a lark.Token, and a Token is a str (lark is not imported here).
        if rule in ("member", "primary", "literal") and len(kids) == 1 and not isinstance(kids[0], str):
            return self.expr(kids[0])
        if rule == "literal" and isinstance(kids[0], str):
            return self.node(const_expr=_constant(cast("lark.Token", kids[0])))
        if rule == "ident":
            return self.node(ident_expr=syntax_pb2.Expr.Ident(name=str(kids[0])))
        if rule == "dot_ident":
            return self.node(ident_expr=syntax_pb2.Expr.Ident(name="." + str(kids[0])))
        if rule == "paren_expr":
            return self.expr(kids[0])
        if rule == "member_dot":
            return self.node(select_expr=syntax_pb2.Expr.Select(operand=self.expr(kids[0]), field=str(kids[1])))
        if rule == "member_index":
            return self.call("_[_]", self.expr(kids[0]), self.expr(kids[1]))
        if rule == "member_dot_arg":
            name = str(kids[1])
            if name in _MACROS:
                raise CelError(f"the {name}() macro is not supported by lychgate")
            return self.call(name, *self.args(kids[2:]), target=self.expr(kids[0]))
        if rule in ("ident_arg", "dot_ident_arg"):
            name = str(kids[0])
            args = self.args(kids[1:])
            if name == "has":
                return self.has(args)
            return self.call(("." if rule == "dot_ident_arg" else "") + name, *args)
        if rule == "list_lit":
            return self.node(list_expr=syntax_pb2.Expr.CreateList(elements=self.args(kids)))
        if rule == "map_lit":
            entries = []
            if kids:
                values = [self.expr(k) for k in kids[0].children]
                for key, value in zip(values[::2], values[1::2], strict=True):
                    entries.append(syntax_pb2.Expr.CreateStruct.Entry(id=next(self.ids), map_key=key, value=value))
            return self.node(struct_expr=syntax_pb2.Expr.CreateStruct(entries=entries))
        raise CelError(f"{rule} expressions are not supported by lychgate")

    def args(self, kids: list[lark.Tree]) -> list[syntax_pb2.Expr]:
        return [self.expr(e) for e in kids[0].children] if kids else []

    def has(self, args: list[syntax_pb2.Expr]) -> syntax_pb2.Expr:
        if len(args) != 1 or not args[0].HasField("select_expr"):
            raise CelError("has() takes one field selection, like has(request.headers.x)")
        select = args[0].select_expr
        return self.node(select_expr=syntax_pb2.Expr.Select(operand=select.operand, field=select.field, test_only=True))


def _constant(token: lark.Token) -> syntax_pb2.Constant:
    text = str(token)
    kind = token.type
    if kind == "NULL_LIT":
        return syntax_pb2.Constant(null_value=0)
    if kind == "BOOL_LIT":
        return syntax_pb2.Constant(bool_value=text == "true")
    if kind == "UINT_LIT":
        return syntax_pb2.Constant(uint64_value=int(text[:-1], 0))
    if kind == "INT_LIT":
        return syntax_pb2.Constant(int64_value=int(text, 0))
    if kind == "FLOAT_LIT":
        return syntax_pb2.Constant(double_value=float(text))
    if kind == "BYTES_LIT":
        return syntax_pb2.Constant(bytes_value=_string(text[1:]).encode("latin-1", errors="replace"))
    return syntax_pb2.Constant(string_value=_string(text))


def _string(text: str) -> str:
    """A CEL string literal's value: quotes (single, double, triple; r for raw) and escapes."""
    raw = text[:1] in ("r", "R")
    body = text[1:] if raw else text
    quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
    inner = body[len(quote):-len(quote)]
    if raw:
        return inner
    try:
        value = ast.literal_eval(quote + inner + quote)
    except (SyntaxError, ValueError):
        raise CelError(f"invalid string literal {text}") from None
    return str(value)
