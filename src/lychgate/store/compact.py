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

All this is safe because the models are frozen: pydantic never changes a fields set
in place (model_copy copies it), equal strings are interchangeable, and nothing
changes a stored object's lists or dicts.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

from pydantic import BaseModel

# One set per distinct content: as many as there are shapes of manifests (a few hundred).
_FIELD_SETS: dict[frozenset[str], set[str]] = {}
_MAX_FIELD_SETS = 4096  # beyond, sets are left as they are (a source of endless shapes)
# Longer strings (certificates, scripts, bodies) are seldom repeated: not hashed to intern them.
_MAX_INTERNED = 256


def _refused(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError("a stored object is immutable: copy it (model_copy) to change it")


class _EmptyList(list[Any]):
    """The one empty list of every stored model's empty list fields."""

    __slots__ = ()
    append = extend = insert = remove = pop = clear = sort = reverse = _refused
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refused


class _EmptyDict(dict[Any, Any]):
    """The one empty dict of every stored model's empty dict fields."""

    __slots__ = ()
    __setitem__ = __delitem__ = setdefault = update = pop = popitem = clear = __ior__ = _refused


_EMPTY: dict[type, list[Any] | dict[Any, Any]] = {list: _EmptyList(), dict: _EmptyDict()}


def _interned(value: str) -> str:
    return sys.intern(value) if len(value) <= _MAX_INTERNED else value


def compact(obj: BaseModel) -> None:
    """Share `obj`'s fields sets and strings with every other object's, in place."""
    _model(obj)


def _model(model: BaseModel) -> None:
    frozen = model.model_config.get("frozen")  # a model that may change would change what it shares
    if frozen:
        fields_set = model.__pydantic_fields_set__
        key = frozenset(fields_set)
        shared = _FIELD_SETS.get(key)
        if shared is None and len(_FIELD_SETS) < _MAX_FIELD_SETS:
            shared = _FIELD_SETS[key] = fields_set
        if shared is not None and shared is not fields_set:
            object.__setattr__(model, "__pydantic_fields_set__", shared)
    values = model.__dict__
    for name, value in values.items():
        if type(value) is str:
            values[name] = _interned(value)
        elif frozen and type(value) in _EMPTY and not value:
            values[name] = _EMPTY[type(value)]
        elif value is not None:
            _value(value)
    if model.__pydantic_extra__:
        _dict(model.__pydantic_extra__)


def _value(value: Any) -> None:
    if isinstance(value, BaseModel):
        _model(value)
    elif type(value) is list:
        for i, item in enumerate(value):
            if type(item) is str:
                value[i] = _interned(item)
            elif item is not None:
                _value(item)
    elif type(value) is dict:
        _dict(value)


def _dict(values: dict[Any, Any]) -> None:
    for name, value in values.items():
        if type(value) is str:
            values[name] = _interned(value)
        elif value is not None:
            _value(value)
