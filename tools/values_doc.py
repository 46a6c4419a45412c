"""Generate docs/values.md from the `# --` comments of charts/lychgate/values.yaml.

    python tools/values_doc.py            # rewrite docs/values.md
    python tools/values_doc.py --check    # exit 1 when docs/values.md is stale

values.yaml is the single source: every key carries a `# -- description` comment on the
lines just above it, optionally starting with `(type)` when the default (null) cannot show
the type. A map whose own children carry no comment (e.g. `controller.service.ports`) is
documented as one value; otherwise the walk descends into it. A key without a comment is an
error, so a new value cannot ship undocumented.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
VALUES = ROOT / "charts" / "lychgate" / "values.yaml"
DOC = ROOT / "docs" / "values.md"

_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.\-/\"']+):(?:\s|$)")
_DOC = re.compile(r"^\s*# -- ?(?:\((?P<type>\w+)\) )?(?P<text>.*)$")
_MORE = re.compile(r"^\s*#(?: (?P<text>.*))?$")

HEADER = """\
# Chart values

Generated from the comments of `charts/lychgate/values.yaml` by `python tools/values_doc.py`;
edit those comments, not this file. Keys use dots; `values.schema.json` rejects unknown
keys, wrong types and values outside the listed choices.

| Key | Type | Default | Description |
|---|---|---|---|
"""


@dataclass(frozen=True)
class ValueDoc:
    key: str  # dotted path, e.g. "controller.image.tag"
    type: str  # object | string | int | bool | list
    default: Any
    description: str
    has_documented_children: bool


class ValuesDocError(ValueError):
    """values.yaml is missing a comment or a type the doc needs."""


def _comments(lines: list[str]) -> dict[str, tuple[str | None, str]]:
    """Dotted key -> (explicit type, description), from the comment block above each key."""
    found: dict[str, tuple[str | None, str]] = {}
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing maps
    pending: tuple[str | None, list[str]] | None = None
    for line in lines:
        if (m := _DOC.match(line)) is not None:
            pending = (m["type"], [m["text"].strip()])
            continue
        if pending is not None and (m := _MORE.match(line)) is not None:
            pending[1].append((m["text"] or "").strip())
            continue
        if (m := _KEY.match(line)) is None:
            if not line.strip():
                pending = None  # a blank line detaches a comment from the next key
            continue
        indent, key = len(m["indent"]), m["key"].strip("\"'")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([*(k for _, k in stack), key])
        stack.append((indent, key))
        if pending is not None:
            found[path] = (pending[0], " ".join(t for t in pending[1] if t))
        pending = None
    return found


def _type_name(value: Any, explicit: str | None, key: str) -> str:
    if explicit:
        return explicit
    if value is None:
        raise ValuesDocError(f"{key}: default is null, so its comment needs a `(type)`")
    for python_type, name in ((bool, "bool"), (int, "int"), (str, "string"), (dict, "object")):
        if isinstance(value, python_type):
            return name
    if isinstance(value, list):
        return "list"
    return type(value).__name__


def parse(path: Path = VALUES) -> list[ValueDoc]:
    """Every documented key of values.yaml, in file order."""
    text = path.read_text()
    values = yaml.safe_load(text) or {}
    comments = _comments(text.splitlines())
    docs: list[ValueDoc] = []

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if dotted not in comments:
                raise ValuesDocError(f"{dotted}: no `# --` comment above it in {path.name}")
            explicit, description = comments[dotted]
            descend = isinstance(value, dict) and any(
                f"{dotted}.{child}" in comments for child in value
            )
            docs.append(
                ValueDoc(
                    dotted,
                    _type_name(value, explicit, dotted),
                    value,
                    description,
                    descend,
                )
            )
            if descend:
                walk(value, f"{dotted}.")

    walk(values, "")
    return docs


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(docs: list[ValueDoc]) -> str:
    rows = []
    for doc in docs:
        if doc.has_documented_children:
            default = "see sub-keys"
        else:
            default = "`" + json.dumps(doc.default, separators=(",", ":")) + "`"
        rows.append(f"| `{doc.key}` | {doc.type} | {_cell(default)} | {_cell(doc.description)} |")
    return HEADER + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/values.md is stale")
    args = parser.parse_args(argv)
    try:
        wanted = render(parse())
    except ValuesDocError as exc:
        print(f"values_doc: {exc}", file=sys.stderr)
        return 2
    if args.check:
        current = DOC.read_text() if DOC.exists() else ""
        if current != wanted:
            shown = DOC.relative_to(ROOT) if DOC.is_relative_to(ROOT) else DOC
            print(f"{shown} is stale: run `python tools/values_doc.py`", file=sys.stderr)
            return 1
        return 0
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
