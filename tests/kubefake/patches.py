"""The three non-apply PATCH formats the API server accepts.

- JSON merge patch (RFC 7386): exact.
- JSON patch (RFC 6902): exact, including `test`, `move`, `copy` and `-`.
- Strategic merge patch: simplified. Upstream reads the patch strategy of every
  field from the Go structs; here the resource type's list table stands in for it:
  lists it marks associative are merged by their keys (all of them, where upstream
  uses a single patchMergeKey), `set` lists are unioned, every other list is
  replaced. The directives `$patch: replace|delete`, `$retainKeys`,
  `$deleteFromPrimitiveList/<f>` are honoured; `$setElementOrder/<f>` is accepted
  and ignored (order is not modelled).
"""

from __future__ import annotations

import copy
from typing import Any

from .resources import ListTable


class PatchError(ValueError):
    """The patch is well-formed but cannot be applied (the API server's 422)."""


# --- RFC 7386 -------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


# --- RFC 6902 -------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, *, for_add: bool) -> int:
    if token == "-" and for_add:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"invalid array index {token!r}")
    i = int(token)
    if i > len(container) or (i == len(container) and not for_add):
        raise PatchError(f"array index {i} out of bounds")
    return i


def _parent(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError(f"missing path element {t!r}")
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, for_add=False)]
        else:
            raise PatchError(f"cannot traverse into {t!r}")
    return cur


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"missing value at {path!r}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_add=False)]
    raise PatchError(f"missing value at {path!r}")


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_add=True), value)
    else:
        raise PatchError(f"cannot add at {path!r}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the document root")
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"missing value at {path!r}")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, for_add=False)]
    else:
        raise PatchError(f"cannot remove at {path!r}")
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)  # must exist
            doc = _add(_remove(doc, path), path, copy.deepcopy(op.get("value"))) if path else op.get("value")
        elif kind in ("move", "copy"):
            value = copy.deepcopy(_get(doc, op["from"]))
            if kind == "move":
                doc = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise PatchError(f"testing value {path} failed")
        else:
            raise PatchError(f"unexpected operation {kind!r}")
    return doc


# --- strategic merge patch ------------------------------------------------------------

_DELETE = object()


def _strip_directives(v: Any) -> Any:
    if isinstance(v, dict):
        return {
            k: _strip_directives(x)
            for k, x in v.items()
            if not (k.startswith("$") or k.startswith("$setElementOrder/"))
        }
    if isinstance(v, list):
        return [_strip_directives(x) for x in v if not (isinstance(x, dict) and "$patch" in x)]
    return copy.deepcopy(v)


def _item_key(item: Any, keys: tuple[str, ...]) -> tuple[Any, ...] | None:
    if not isinstance(item, dict):
        return None
    return tuple(item.get(k) for k in keys)


def _merge_list(
    target: list[Any], patch: list[Any], path: tuple[str, ...], lists: ListTable
) -> list[Any]:
    kind = lists.get(path)
    if kind == "set":
        out = list(target)
        out.extend(v for v in patch if v not in out)
        return out
    if not isinstance(kind, tuple) or not all(isinstance(p, dict) for p in patch):
        return _strip_directives(patch)  # atomic: replaced
    if any(p.get("$patch") == "replace" for p in patch):
        return [_strip_directives(p) for p in patch if "$patch" not in p]
    out = [copy.deepcopy(t) for t in target]
    for p in patch:
        key = _item_key(p, kind)
        idx = next((i for i, t in enumerate(out) if _item_key(t, kind) == key), None)
        if p.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
        elif idx is None:
            out.append(_strip_directives(p))
        else:
            out[idx] = strategic_merge(out[idx], p, lists, path)
    return out


def strategic_merge(target: Any, patch: Any, lists: ListTable, path: tuple[str, ...] = ()) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _strip_directives(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k in ("$patch", "$retainKeys"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            result[field] = [x for x in result.get(field) or [] if x not in (v or [])]
            continue
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            merged = strategic_merge(result.get(k), v, lists, (*path, k))
            if merged is _DELETE:
                result.pop(k, None)
            else:
                result[k] = merged
        elif isinstance(v, list) and isinstance(result.get(k), list):
            result[k] = _merge_list(result[k], v, (*path, k), lists)
        elif isinstance(v, list):
            result[k] = _merge_list([], v, (*path, k), lists)
        else:
            result[k] = copy.deepcopy(v)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: x for k, x in result.items() if k in retain}
    return result
