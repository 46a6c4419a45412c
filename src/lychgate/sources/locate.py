"""Line numbers in manifest files: where a document, a List item or a field starts.

Loading never asks for them (libyaml's loader builds plain values, without positions):
a file is parsed again with positions only when something in it needs a line (a problem
to report, `lychgate check`). Its node tree is composed by the same loader class, so
its documents are the loader's documents, one for one.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

# A field path as messages write it: `spec.rules[0].backendRefs[1].port`.
_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_path(path: str) -> tuple[str | int, ...]:
    """`spec.rules[0].name` -> ("spec", "rules", 0, "name")."""
    return tuple(int(index) if index else name for name, index in _PART.findall(path))


class Positions:
    """The positions of one file's text: composed once, on first use."""

    def __init__(self, text: str, loader: type[Any]) -> None:
        self._text = text
        self._loader = loader
        self._documents: list[Any] | None = None

    def _nodes(self) -> list[Any]:
        if self._documents is None:
            try:
                self._documents = list(yaml.compose_all(self._text, Loader=self._loader))
            except yaml.YAMLError:
                self._documents = []
        return self._documents

    def line(self, document: int | None, item: int | None = None, path: tuple[str | int, ...] = ()) -> int | None:
        """The 1-based line of a document (1-based index), of the item of its `List`, of the
        deepest part of `path` the document has; None when the document is not there."""
        nodes = self._nodes()
        if document is None or not 0 < document <= len(nodes) or nodes[document - 1] is None:
            return None
        node = start = nodes[document - 1]
        if item is not None:
            items = _child(node, "items")
            found = _child(items[1], item) if items else None
            if found is not None:
                start, node = found
        for part in path:
            child = _child(node, part)
            if child is None:
                break
            start, node = child
        line: int = start.start_mark.line + 1
        return line


def _child(node: Any, part: str | int) -> tuple[Any, Any] | None:
    """(the node whose line names it, its value): a key's line for a mapping entry."""
    if isinstance(node, yaml.MappingNode):
        return next(((key, value) for key, value in node.value if key.value == str(part)), None)
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        return node.value[part], node.value[part]
    return None
