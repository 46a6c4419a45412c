"""managedFields and server-side apply, modelled on structured-merge-diff.

What is modelled: every write records which manager owns which fields
(`metadata.managedFields`, FieldsV1 encoding: `f:<field>`, `k:{...}` for
associative-list items with `.` for the item itself, `v:<value>` for set members);
an apply conflicts with another manager (Apply *or* Update) owning a field it sets
to a different value (409 with one cause per field) unless `force=true`, which
takes those fields over; an apply removes fields this manager applied before and
no longer applies, unless someone else still owns them; an Update (PUT, non-apply
PATCH, POST) takes ownership of every field it changes from everyone. Status
subresource writes are tracked as separate entries (`subresource: status`).

Simplified: list semantics come from the resource type's list table instead of a
full OpenAPI schema (unlisted lists are atomic); no apiVersion conversion of field
sets; metadata other than labels/annotations/finalizers/ownerReferences is not tracked.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ApiError
from .resources import ListTable

Path = tuple[str, ...]
Scope = Literal["all", "main", "status"]  # main: the main endpoint of a type with /status
_MISSING = object()
_TRACKED_META = ("labels", "annotations", "finalizers", "ownerReferences")


def _enc(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def tracked_view(obj: dict[str, Any] | None, scope: Scope) -> dict[str, Any]:
    """The part of an object that field ownership is computed over."""
    if not obj:
        return {}
    if scope == "status":
        return {"status": obj["status"]} if obj.get("status") is not None else {}
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    meta = obj.get("metadata") or {}
    tracked = {k: meta[k] for k in _TRACKED_META if meta.get(k)}
    if tracked:
        out["metadata"] = tracked
    if scope == "main":
        out.pop("status", None)
    return out


def fieldset(value: Any, lists: ListTable, schema: Path = (), prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    if not isinstance(value, dict):
        return out
    for k, v in value.items():
        p, sp = (*prefix, f"f:{k}"), (*schema, k)
        kind = lists.get(sp)
        if isinstance(v, dict) and v:
            out |= fieldset(v, lists, sp, p)
        elif isinstance(v, list) and v and kind == "set":
            out |= {(*p, f"v:{_enc(item)}") for item in v}
        elif isinstance(v, list) and v and isinstance(kind, tuple) and all(isinstance(i, dict) for i in v):
            for item in v:
                kp = (*p, "k:" + _enc({key: item[key] for key in kind if key in item}))
                out.add((*kp, "."))
                out |= fieldset(item, lists, sp, kp)
        else:
            out.add(p)
    return out


def value_at(obj: Any, path: Path) -> Any:
    cur = obj
    for el in path:
        if el == ".":
            return cur
        if el.startswith("f:"):
            if not isinstance(cur, dict) or el[2:] not in cur:
                return _MISSING
            cur = cur[el[2:]]
        elif el.startswith("k:"):
            want = json.loads(el[2:])
            if not isinstance(cur, list):
                return _MISSING
            cur = next(
                (i for i in cur if isinstance(i, dict) and all(i.get(k) == v for k, v in want.items())),
                _MISSING,
            )
            if cur is _MISSING:
                return cur
        elif el.startswith("v:"):
            val = json.loads(el[2:])
            return val if isinstance(cur, list) and val in cur else _MISSING
    return cur


def _remove(obj: dict[str, Any], path: Path) -> None:
    if path[-1] == ".":
        parent = value_at(obj, path[:-2])
        item = value_at(obj, path[:-1])
        if isinstance(parent, list) and item is not _MISSING:
            parent.remove(item)
        return
    container = value_at(obj, path[:-1])
    last = path[-1]
    if last.startswith("f:") and isinstance(container, dict):
        if len(path) >= 2 and path[-2].startswith("k:") and last[2:] in json.loads(path[-2][2:]):
            return  # a key field goes with its item, never alone
        container.pop(last[2:], None)
    elif last.startswith("v:") and isinstance(container, list):
        val = json.loads(last[2:])
        if val in container:
            container.remove(val)


def _prune_emptied(obj: dict[str, Any], path: Path) -> None:
    """Maps left empty by a removal go too: the applier owned them through their fields."""
    for depth in range(len(path) - 1, 0, -1):
        parent = path[:depth]
        if not parent[-1].startswith("f:") or value_at(obj, parent) != {}:
            return
        _remove(obj, parent)


def remove_fields(obj: dict[str, Any], paths: set[Path]) -> None:
    for p in sorted(paths, key=len, reverse=True):
        _remove(obj, p)
        _prune_emptied(obj, p)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for k in _TRACKED_META:
            if k in meta and not meta[k]:
                del meta[k]


def _strip_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _strip_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_strip_nulls(x) for x in v]
    return v


def apply_merge(live: Any, cfg: Any, lists: ListTable, schema: Path = ()) -> Any:
    if not isinstance(cfg, dict) or not isinstance(live, dict):
        return copy.deepcopy(cfg)
    out = copy.deepcopy(live)
    for k, v in cfg.items():
        sp, kind = (*schema, k), lists.get((*schema, k))
        cur = out.get(k)
        if isinstance(v, dict) and isinstance(cur, dict):
            out[k] = apply_merge(cur, v, lists, sp)
        elif isinstance(v, list) and isinstance(cur, list) and kind == "set":
            out[k] = cur + [x for x in v if x not in cur]
        elif isinstance(v, list) and isinstance(cur, list) and isinstance(kind, tuple):
            merged = list(cur)
            for item in v:
                ident = {key: item.get(key) for key in kind if isinstance(item, dict) and key in item}
                idx = next(
                    (i for i, t in enumerate(merged)
                     if isinstance(t, dict) and ident and all(t.get(a) == b for a, b in ident.items())),
                    None,
                )
                if idx is None:
                    merged.append(copy.deepcopy(item))
                else:
                    merged[idx] = apply_merge(merged[idx], item, lists, sp)
            out[k] = merged
        else:
            out[k] = copy.deepcopy(v)
    return out


# --- managedFields entries ------------------------------------------------------------


@dataclass
class Entry:
    manager: str
    operation: str  # Apply | Update
    api_version: str
    time: str
    subresource: str = ""
    fields: set[Path] = field(default_factory=set)

    def same(self, manager: str, operation: str, subresource: str) -> bool:
        return (self.manager, self.operation, self.subresource) == (manager, operation, subresource)


def _to_v1(paths: set[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for p in sorted(paths):
        node = root
        for el in p:
            node = node.setdefault(el, {})
    return root


def _from_v1(node: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for k, v in node.items():
        if isinstance(v, dict) and v:
            out |= _from_v1(v, (*prefix, k))
        else:
            out.add((*prefix, k))
    return out


def decode(managed: list[dict[str, Any]] | None) -> list[Entry]:
    return [
        Entry(
            manager=m.get("manager", ""),
            operation=m.get("operation", "Update"),
            api_version=m.get("apiVersion", ""),
            time=m.get("time", ""),
            subresource=m.get("subresource", ""),
            fields=_from_v1(m.get("fieldsV1") or {}),
        )
        for m in managed or []
    ]


def encode(entries: list[Entry]) -> list[dict[str, Any]]:
    out = []
    for e in entries:
        if not e.fields:
            continue  # a manager that owns nothing disappears, as upstream
        m: dict[str, Any] = {
            "manager": e.manager,
            "operation": e.operation,
            "apiVersion": e.api_version,
            "time": e.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": _to_v1(e.fields),
        }
        if e.subresource:
            m["subresource"] = e.subresource
        out.append(m)
    return out


def _entry(entries: list[Entry], manager: str, op: str, sub: str, api_version: str, now: str) -> Entry:
    for e in entries:
        if e.same(manager, op, sub):
            e.api_version, e.time = api_version, now
            return e
    e = Entry(manager, op, api_version, now, sub)
    entries.append(e)
    return e


def human_path(p: Path) -> str:
    out = ""
    for el in p:
        if el.startswith("f:"):
            out += "." + el[2:]
        elif el.startswith("k:"):
            keys = json.loads(el[2:])
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]"
        elif el.startswith("v:"):
            out += f"[={el[2:]}]"
    return out


def conflict_error(conflicts: dict[tuple[str, str], list[Path]], name: str, group: str, plural: str) -> ApiError:
    causes, lines = [], []
    total = sum(len(v) for v in conflicts.values())
    for (manager, api_version), paths in conflicts.items():
        who = f'conflict with "{manager}" using {api_version}'
        for p in sorted(paths):
            causes.append({"reason": "FieldManagerConflict", "message": who, "field": human_path(p)})
            lines.append(f"{who}: {human_path(p)}")
    plural_s = "conflict" if total == 1 else "conflicts"
    message = f"Apply failed with {total} {plural_s}: " + "\n".join(lines)
    details = {"name": name, "kind": plural, "causes": causes}
    if group:
        details["group"] = group
    return ApiError(409, "Conflict", message, details)


def server_side_apply(
    live: dict[str, Any] | None,
    config: dict[str, Any],
    *,
    manager: str,
    force: bool,
    lists: ListTable,
    scope: Scope,
    api_version: str,
    now: str,
    ident: tuple[str, str, str],  # (name, group, plural) for the conflict Status
) -> dict[str, Any]:
    """Return the new object (with managedFields) or raise a 409 conflict."""
    live = copy.deepcopy(live) if live else {}
    cfg_view = _strip_nulls(tracked_view(config, scope))
    live_view = tracked_view(live, scope)
    cfg_fields = fieldset(cfg_view, lists)
    entries = decode((live.get("metadata") or {}).get("managedFields"))
    sub = "status" if scope == "status" else ""
    own = next((e for e in entries if e.same(manager, "Apply", sub)), None)

    conflicts: dict[tuple[str, str], list[Path]] = {}
    for e in entries:
        if e is own:
            continue
        for p in cfg_fields & e.fields:
            if p[-1] != "." and value_at(live_view, p) != value_at(cfg_view, p):
                conflicts.setdefault((e.manager, e.api_version), []).append(p)
    if conflicts and not force:
        raise conflict_error(conflicts, *ident)
    if force:
        taken = {p for ps in conflicts.values() for p in ps}
        for e in entries:
            if e is not own:
                e.fields -= taken

    previously = own.fields if own else set()
    others = set().union(*(e.fields for e in entries if e is not own))
    remove_fields(live, previously - cfg_fields - others)
    merged = apply_merge(live, cfg_view, lists)
    _entry(entries, manager, "Apply", sub, api_version, now).fields = cfg_fields
    merged.setdefault("metadata", {})["managedFields"] = encode(entries)
    return merged


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    lists: ListTable,
    scope: Scope,
    api_version: str,
    now: str,
) -> None:
    """Give `manager` (operation Update) every field this write changed."""
    old_view, new_view = tracked_view(old, scope), tracked_view(new, scope)
    old_f, new_f = fieldset(old_view, lists), fieldset(new_view, lists)
    # An item's "." changes only when the item appears; edits inside it are its fields'.
    changed = {
        p for p in new_f
        if p not in old_f or (p[-1] != "." and value_at(old_view, p) != value_at(new_view, p))
    }
    gone = old_f - new_f
    entries = decode(((old or {}).get("metadata") or {}).get("managedFields"))
    for e in entries:
        e.fields -= changed | gone
    if changed:
        sub = "status" if scope == "status" else ""
        _entry(entries, manager, "Update", sub, api_version, now).fields |= changed
    new.setdefault("metadata", {})["managedFields"] = encode(entries)
