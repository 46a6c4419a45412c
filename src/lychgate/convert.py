"""`lychgate convert`: kgateway manifests in, lychgate manifests out.

lychgate reads kgateway's v1alpha1 API as its own under another name, so converting is
renaming: the API group (`gateway.kgateway.dev` -> `gateway.lychgate.dev`) in apiVersion
and in every `group` naming one of its kinds, the GatewayClasses (`kgateway` ->
`lychgate`, `kgateway-waypoint` -> `lychgate-waypoint`), their controllerName, and
`kgateway`-named GatewayParameters a GatewayClass refers to (renamed with the reference).
Everything else is kept byte for byte, comments, key order, quoting and indentation
included: the YAML is parsed with its positions (ruamel.yaml's round-trip loader) and
only the renamed values are replaced in the text.

What cannot carry over is said, per object and field, as a Note: kinds lychgate does
not read (passed through unchanged), kgateway annotations, labels and options lychgate
has no meaning for, and objects lychgate's parser would refuse after the renaming.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from lychgate.api.registry import BY_KIND, ManifestError, describe, parse
from lychgate.sources.files import IGNORED_KINDS

OLD_GROUP = "gateway.kgateway.dev"
NEW_GROUP = "gateway.lychgate.dev"
CLASSES = {"kgateway": "lychgate", "kgateway-waypoint": "lychgate-waypoint"}
CONTROLLERS = {"kgateway.dev/kgateway": "gateway.lychgate.dev/lychgate"}
# Groups whose kinds belong to another system: said once, passed through.
FOREIGN = {"istio.io": "Istio's kind: apply it to Istio; lychgate does not read it",
           "agentgateway.dev": "agentgateway's kind: lychgate serves Envoy proxies only"}
_KGATEWAY_KEY = re.compile(r"(^|\.)kgateway\.(dev|io)/")


@dataclass(frozen=True)
class Note:
    """One thing that does not carry over: where, and why."""

    source: str  # file name, or "-" for stdin
    obj: str  # "Kind namespace/name"
    field: str  # "" for the whole object
    message: str

    def __str__(self) -> str:
        where = f"{self.obj}: {self.field}" if self.field else self.obj
        return f"{self.source}: {where}: {self.message}"


@dataclass
class Converted:
    text: str
    notes: list[Note] = field(default_factory=list)


class _Edits:
    """Replacements of scalar values at their place in the text: (line, column, old, new)."""

    def __init__(self) -> None:
        self.items: list[tuple[int, int, str, str]] = []

    def set(self, parent: Any, key: str, new: str) -> None:
        line, col = parent.lc.value(key)
        self.items.append((line, col, str(parent[key]), new))
        parent[key] = new

    def apply(self, text: str) -> str:
        lines = text.splitlines(keepends=True)
        for line, col, old, new in sorted(self.items, reverse=True):
            at = col + (1 if lines[line][col] in "'\"" else 0)
            if lines[line][at:at + len(old)] != old:
                raise ValueError(f"line {line + 1}: expected {old!r} at column {at + 1}")
            lines[line] = lines[line][:at] + new + lines[line][at + len(old):]
        return "".join(lines)


def convert_text(text: str, source: str, renamed_params: set[str] | None = None) -> Converted:
    """Convert one YAML stream. `renamed_params`: the GatewayParameters names to rename
    (class_parameters of every input converted together; default: this stream's).
    Raises YAMLError when it is not YAML."""
    docs = list(YAML().load_all(text))
    notes: list[Note] = []
    if renamed_params is None:
        renamed_params = class_parameters(text)
    edits = _Edits()
    for doc in docs:
        if isinstance(doc, dict):
            _convert_object(doc, source, notes, renamed_params, edits)
    return Converted(edits.apply(text), notes)


def class_parameters(text: str) -> set[str]:
    """Names of the kgateway-named GatewayParameters the GatewayClasses refer to: renamed
    with their references, like the classes (kgateway's chart names them after the class)."""
    names = set()
    for doc in YAML(typ="safe").load_all(text):
        if isinstance(doc, dict) and doc.get("kind") == "GatewayClass":
            ref = (doc.get("spec") or {}).get("parametersRef") or {}
            name = ref.get("name")
            if isinstance(name, str) and (name == "kgateway" or name.startswith("kgateway-")):
                names.add(name)
    return names


def _convert_object(doc: Any, source: str, notes: list[Note], renamed_params: set[str], edits: _Edits) -> None:
    what = describe(doc)
    _rename_groups(doc, edits)
    api_version = doc.get("apiVersion")
    if isinstance(api_version, str) and api_version.startswith(OLD_GROUP + "/"):
        edits.set(doc, "apiVersion", NEW_GROUP + api_version[len(OLD_GROUP):])
    kind = doc.get("kind")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    if kind == "GatewayClass":
        _rename(meta, "name", CLASSES, edits)
        _rename(spec, "controllerName", CONTROLLERS, edits)
        _rename_parameters_ref(spec.get("parametersRef"), renamed_params, edits)
    if kind == "GatewayParameters" and meta.get("name") in renamed_params:
        edits.set(meta, "name", "lychgate" + meta["name"][len("kgateway"):])
    if kind == "Gateway":
        _rename(spec, "gatewayClassName", CLASSES, edits)
        _rename_parameters_ref((spec.get("infrastructure") or {}).get("parametersRef"), renamed_params, edits)
        name = spec.get("gatewayClassName")
        if isinstance(name, str) and name not in CLASSES.values():
            notes.append(Note(source, what, "spec.gatewayClassName",
                              f"class {name!r} is not one lychgate serves (lychgate, lychgate-waypoint); "
                              "kept as written"))
    what = describe(doc)  # the names may have changed
    notes.extend(_foreign_keys(doc, source, what))
    notes.extend(_unread(doc, source, what))


def _rename_parameters_ref(ref: Any, renamed: set[str], edits: _Edits) -> None:
    if isinstance(ref, dict) and ref.get("kind") == "GatewayParameters" and ref.get("name") in renamed:
        edits.set(ref, "name", "lychgate" + ref["name"][len("kgateway"):])


def _rename(parent: Any, key: str, names: dict[str, str], edits: _Edits) -> None:
    if isinstance(parent, dict) and parent.get(key) in names:
        edits.set(parent, key, names[parent[key]])


def _rename_groups(node: Any, edits: _Edits) -> None:
    """Every `group`/`apiGroup` naming kgateway's API, at any depth (ExtensionRefs,
    targetRefs, parametersRefs, backendRefs, ReferenceGrants...)."""
    if isinstance(node, dict):
        for key, value in list(node.items()):
            if key in ("group", "apiGroup") and value == OLD_GROUP:
                edits.set(node, key, NEW_GROUP)
            else:
                _rename_groups(value, edits)
    elif isinstance(node, list):
        for item in node:
            _rename_groups(item, edits)


def _foreign_keys(doc: Any, source: str, what: str) -> Iterator[Note]:
    """kgateway annotations, labels and options: lychgate gives none of them a meaning."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    places = [("metadata.annotations", meta.get("annotations")), ("metadata.labels", meta.get("labels")),
              ("spec.options", spec.get("options"))]
    places += [(f"spec.listeners[{i}].tls.options", (listener.get("tls") or {}).get("options"))
               for i, listener in enumerate(spec.get("listeners") or []) if isinstance(listener, dict)]
    for where, values in places:
        for key in values or {} if isinstance(values, dict) else {}:
            if isinstance(key, str) and _KGATEWAY_KEY.search(key):
                yield Note(source, what, f"{where}[{key}]", "a kgateway setting lychgate does not read; kept as written")


def _unread(doc: Any, source: str, what: str) -> Iterator[Note]:
    """Kinds lychgate does not read, and objects its parser would refuse."""
    kind = doc.get("kind")
    group = str(doc.get("apiVersion") or "").rpartition("/")[0]
    if not isinstance(kind, str):
        return
    foreign = next((why for suffix, why in FOREIGN.items() if group == suffix or group.endswith("." + suffix)), None)
    if foreign is not None:
        yield Note(source, what, "", f"{foreign}; passed through unchanged")
    elif kind in IGNORED_KINDS:
        yield Note(source, what, "", f"lychgate does not read {kind} (a workload or access object: apply it to "
                                     "Kubernetes as is; `lychgate run` skips it); passed through unchanged")
    elif kind not in BY_KIND:
        yield Note(source, what, "", f"lychgate does not read {kind} ({group or 'core'}); passed through unchanged")
    else:
        try:
            parse(_plain(doc))
        except ManifestError as err:
            yield Note(source, what, "", f"lychgate would refuse it: {str(err).split(': ', 1)[-1]}")


def _plain(node: Any) -> Any:
    """ruamel's commented containers as plain dicts and lists, as the parser reads YAML."""
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def inputs(path: Path) -> Iterator[tuple[Path, Path]]:
    """(file, its path relative to the argument) for a file or, recursively, a directory's YAML files."""
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()):
            yield file, file.relative_to(path)
    else:
        yield path, Path(path.name)


__all__ = ["Converted", "Note", "YAMLError", "class_parameters", "convert_text", "inputs"]
