"""TrafficPolicy `ai.defaults`: request fields the gateway sets (kgateway's FieldDefault).

`field` is a top-level key of the client's JSON body (kgateway documents it as a
key of the body and merged it with a flat key map; no path form), `value` any JSON
value, `override` whether it replaces the client's own value. kgateway's API
types `value` as a string that holds JSON ("0.5", "[1,2,3]") and also shows plain
text ("answer all questions in French"): a string is read as JSON when it parses
and kept as text otherwise; a value already structured (from YAML) is used as is.

Without `override` the default fills a field the client left out or sent as
null. kgateway rendered this with Inja's `default()`, which also replaced falsy
values; here `temperature: 0` or `stream: false` from a client stays, since those
are choices, not omissions.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lychgate.ai.rejection import PolicyError


@dataclass(frozen=True)
class FieldDefault:
    field: str
    value: Any
    override: bool = False


def parse_defaults(raw: Iterable[Mapping[str, Any]], where: str = "defaults") -> tuple[FieldDefault, ...]:
    out = []
    for i, entry in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(entry, Mapping):
            raise PolicyError(f"{at}: must be an object with field and value")
        field = entry.get("field")
        if not isinstance(field, str) or not field:
            raise PolicyError(f"{at}.field: required, the name of a request body field")
        if entry.get("value") is None:
            raise PolicyError(f"{at}.value: required")
        override = entry.get("override") or False
        if not isinstance(override, bool):
            raise PolicyError(f"{at}.override: must be true or false")
        out.append(FieldDefault(field, _json_value(entry["value"]), override))
    return tuple(out)


def _json_value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def apply_defaults(defaults: Sequence[FieldDefault], chat: dict[str, Any]) -> None:
    """Set the defaults on the request body, in place."""
    for d in defaults:
        if d.override or chat.get(d.field) is None:
            # A list or object value is copied: later steps may edit the request in place.
            chat[d.field] = copy.deepcopy(d.value) if isinstance(d.value, (list, dict)) else d.value
