"""Objects as the store keeps them: what thousands of them repeat, held once.

A parsed object is a tree of pydantic models, and each model carries the set of
the fields its manifest set (`__pydantic_fields_set__`, 216 bytes for a handful of
names): a third of an HTTPRoute's memory, for sets that are the same few sets
across every object of a kind. Its strings, read from YAML, are copies of the
same namespaces, kinds, match types and backend names. Here every model of an
object gets the one set of its content and every short string the interpreter's
interned copy (freed like any string once nothing holds it).

Empty lists and dicts (a route's unset filters, query parameter matches, labels,
owner references: about ten per route) are one shared empty list and one shared
empty dict, each refusing any change, so that code mutating a stored object fails
loudly instead of changing every other object.

The parts objects repeat whole are held once too: thousands of routes name the same
parent Gateway, the same `PathPrefix /` match, the same few backends, and policies set
the same headers. Below an object's own fields (its metadata and spec are its own), a
model, list or dict equal to one another stored object holds is replaced by that one
(about 1.5 KiB a route). Lists and dicts held so refuse changes like the empty ones.
A part is held once from its second sighting on (a part first seen is kept, not
looked for again: a route's own path or hostname costs no more than its entry in the
table), and the table lets a part go once no stored object holds it (`_prune`).

All this is safe because the models are frozen: pydantic never changes a fields set
in place (model_copy copies it), equal strings are interchangeable, and nothing
changes a stored object's models, lists or dicts.
"""

from __future__ import annotations

import copy
import enum
import sys
from typing import Any, NoReturn

from pydantic import BaseModel

# One set per distinct content: as many as there are shapes of manifests (a few hundred).
_FIELD_SETS: dict[frozenset[str], set[str]] = {}
_MAX_FIELD_SETS = 4096  # beyond, sets are left as they are (a source of endless shapes)
# Longer strings (certificates, scripts, bodies) are seldom repeated: not hashed to intern them.
_MAX_INTERNED = 256
# Values a shared part may hold as they are (compared with their type: True is not 1). Not
# datetimes nor Decimals: equal ones may print differently (another zone, 1.0 and 1.00).
_SCALARS = frozenset({int, bool, bytes})


def _refused(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError("a stored object is immutable: copy it (model_copy) to change it")


class _FrozenList(list[Any]):
    """A list that stored objects share: equal to (and read like) a list, changed by nobody.
    A copy of it is a plain list, the caller's to change."""

    __slots__ = ()
    append = extend = insert = remove = pop = clear = sort = reverse = _refused
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refused

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(item, memo) for item in self]

    def __reduce_ex__(self, protocol: Any) -> Any:
        return list, (list(self),)


class _FrozenDict(dict[Any, Any]):
    """A dict that stored objects share (see _FrozenList)."""

    __slots__ = ()
    __setitem__ = __delitem__ = setdefault = update = pop = popitem = clear = __ior__ = _refused

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce_ex__(self, protocol: Any) -> Any:
        return dict, (dict(self),)


_EMPTY_LIST = _FrozenList()
_EMPTY_DICT = _FrozenDict()

# The parts held once, by their content: a key names the part's type and its values, a
# part in it by its id (the part it holds is the one this table holds, alive while it is).
_SHARED: dict[tuple[Any, ...], Any] = {}
_prune_at = 4096


def _alone() -> int:
    """What sys.getrefcount says of a table entry nothing else holds (_prune's expression)."""
    probe: dict[int, Any] = {0: [None]}
    return sys.getrefcount(probe[0])


_ALONE = _alone()


def _interned(value: str) -> str:
    return sys.intern(value) if len(value) <= _MAX_INTERNED else value


def compact(obj: BaseModel) -> None:
    """Share `obj`'s fields sets, strings and repeated parts with every other object's, in place."""
    _model(obj, 0)


def _prune() -> None:
    """Let go of the parts no stored object holds any more. The newest first: a part
    let go lets go of the parts it held, older than itself, in the same walk."""
    for key in reversed(list(_SHARED)):
        if sys.getrefcount(_SHARED[key]) <= _ALONE:
            del _SHARED[key]


def _part(value: Any) -> Any:
    """What a key holds of a scalar; None when `value` is not one a part may share."""
    kind = type(value)
    if kind in _SCALARS or isinstance(value, enum.Enum):
        return kind, value
    if kind is float:
        return float, value.hex()  # 0.0 == -0.0, and NaN equals nothing
    return None


def _model(model: BaseModel, depth: int) -> tuple[BaseModel, tuple[Any, ...] | None]:
    """(the model to hold, its key when it is a shared one that was there before)."""
    frozen = model.model_config.get("frozen")  # a model that may change would change what it shares
    fields_set = model.__pydantic_fields_set__
    if frozen:
        key = frozenset(fields_set)
        shared_set = _FIELD_SETS.get(key)
        if shared_set is None and len(_FIELD_SETS) < _MAX_FIELD_SETS:
            shared_set = _FIELD_SETS[key] = fields_set
        if shared_set is not None and shared_set is not fields_set:
            object.__setattr__(model, "__pydantic_fields_set__", shared_set)
            fields_set = shared_set
        # Equal models that set different fields dump differently (exclude_unset): the set is in the key.
        parts: list[Any] | None = [type(model), id(fields_set)] if (
            depth >= 2 and shared_set is fields_set and not model.__pydantic_extra__
            and model.__pydantic_private__ is None) else None
    else:
        parts = None
    parts = _items(model.__dict__, depth, bool(frozen), parts, False)
    if model.__pydantic_extra__:
        _dict(model.__pydantic_extra__, depth + 1, False)
    if parts is None:
        return model, None
    return _held(tuple(parts), model, None)


def _value(value: Any, depth: int, share: bool) -> tuple[Any, tuple[Any, ...] | None]:
    """(the value to hold, its key as a part of its holder's key; None: the holder is not shared)."""
    if isinstance(value, BaseModel):
        return _model(value, depth)
    kind = type(value)
    if kind is list:
        return _list(value, depth, share)
    if kind is dict:
        return _dict(value, depth, share)
    if kind is _FrozenList or kind is _FrozenDict:
        return value, (id(value),)  # held once already
    part = _part(value)
    return value, None if part is None else (part,)


def _items(values: Any, depth: int, share: bool, parts: list[Any] | None, keyed: bool) -> list[Any] | None:
    """Compact each value of a model's fields (a dict), or of a list, in place; the key
    parts of them (of the names too when `keyed`) after `parts`, None when one has none."""
    for name, value in (values.items() if keyed or isinstance(values, dict) else enumerate(values)):
        kind = type(value)
        if kind is str:
            value = values[name] = _interned(value)
        elif value is not None:
            held, key = _value(value, depth + 1, share)
            if held is not value:
                values[name] = held
            if key is None:
                parts = None
            elif parts is not None:
                value = key[0]
        if parts is not None:
            if keyed:
                parts.append(name if type(name) is str else (type(name), name))
            parts.append(value)
    return parts


def _list(value: list[Any], depth: int, share: bool) -> tuple[list[Any], tuple[Any, ...] | None]:
    if not value:
        return (_EMPTY_LIST, (id(_EMPTY_LIST),)) if share else (value, None)
    parts = _items(value, depth, share, [list] if share and depth >= 2 else None, False)
    if parts is None:
        return value, None
    return _held(tuple(parts), value, _FrozenList)


def _dict(values: dict[Any, Any], depth: int, share: bool) -> tuple[dict[Any, Any], tuple[Any, ...] | None]:
    if not values:
        return (_EMPTY_DICT, (id(_EMPTY_DICT),)) if share else (values, None)
    parts = _items(values, depth, share, [dict] if share and depth >= 2 else None, True)
    if parts is None:
        return values, None
    return _held(tuple(parts), values, _FrozenDict)


def _held(key: tuple[Any, ...], value: Any, frozen: type | None) -> tuple[Any, tuple[Any, ...] | None]:
    """The one part of this content (`value`, as `frozen` when first seen), and its key when
    it was there before: a part first seen is held for the next one like it, and its holder
    is not looked for (it cannot be there)."""
    global _prune_at
    held = _SHARED.get(key)
    if held is not None:
        return held, (id(held),)
    if len(_SHARED) >= _prune_at:
        _prune()
        _prune_at = max(4096, 2 * len(_SHARED))
    _SHARED[key] = value if frozen is None else frozen(value)
    return _SHARED[key], None
