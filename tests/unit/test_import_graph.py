"""The project's rule: keep the import graph one-way, no circles. A cycle of top-level
imports makes a module's names depend on which module of the circle is imported
first (a half-initialised module, an ImportError only one entry point sees) and ties
modules that should stand apart into one. Importing a module runs its packages' `__init__`
first, so that counts as importing them. Imports inside functions and under
`if TYPE_CHECKING:` run later or never, so they do not count."""

from __future__ import annotations

import ast
from pathlib import Path

import lychgate

SRC = Path(lychgate.__file__).parent


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its `__init__.py`)."""
    names: dict[str, Path] = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name | ast.Attribute) and ast.unparse(node.test).endswith("TYPE_CHECKING")


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The lychgate modules `name` imports at its top level (not in functions, not for typing)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    pending = list(ast.parse(path.read_text(), str(path)).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` runs only its `else`
            pending += node.orelse if _type_checking(node) else [*node.body, *node.orelse]
        elif isinstance(node, ast.Try):
            pending += [*node.body, *node.orelse, *node.finalbody, *(s for h in node.handlers for s in h.body)]
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:  # `from x import y`: the module x.y when it is one, else x
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {module for module in found if module in modules and module != name}


def _with_packages(name: str, imported: set[str], modules: dict[str, Path]) -> set[str]:
    """`imported` and the packages whose `__init__` importing them runs first (importing
    a.b.c runs a and a.b), but for `name`'s own packages: those are running already."""
    packages = {".".join(m.split(".")[:i]) for m in imported for i in range(1, m.count(".") + 1)}
    return imported | {p for p in packages if p in modules and not name.startswith(p + ".") and p != name}


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    pending = [start]
    while pending:
        new = graph[pending.pop()] - seen
        seen |= new
        pending += new
    return seen


def test_no_import_cycles() -> None:
    modules = _modules()
    graph = {name: _with_packages(name, _imports(name, path, modules), modules) for name, path in modules.items()}
    reach = {name: _reach(graph, name) for name in graph}
    # A module in a cycle reaches itself; its cycle (strongly connected component) is
    # every module it reaches that reaches it back.
    cycles = {frozenset(m for m in reach[name] if name in reach[m]) for name in graph if name in reach[name]}
    report = []
    for cycle in sorted(sorted(c) for c in cycles):
        edges = [f"  {a} -> {b}" for a in cycle for b in sorted(graph[a] & set(cycle))]
        report.append("cycle: " + ", ".join(cycle) + "\n" + "\n".join(edges))
    assert not report, "top-level imports go round in a circle:\n" + "\n".join(report)
