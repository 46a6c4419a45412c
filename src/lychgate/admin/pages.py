"""HTML and JSON rendering shared by the admin endpoints.

The admin server is meant to be opened in a browser through a port-forward
(spec §4.1), so every page is a complete, dependency-free HTML document; scripts
ask for JSON with `?format=json` or `Accept: application/json`.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import json
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from aiohttp import web

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 70em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.5em; }
table { border-collapse: collapse; } td, th { padding: .25em .8em; text-align: left; }
tr:nth-child(even) { background: #f3f3f3; }
code, pre { font-family: ui-monospace, monospace; } pre { background: #f6f6f6; padding: .6em; }
.note { color: #555; } nav { margin-bottom: 1em; }
"""


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One entry of the index page: a link and what it gives."""

    href: str
    description: str


def page(title: str, body: str, *, status: int = 200) -> web.Response:
    """A full HTML document; `body` must already be escaped."""
    doc = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} - lychgate admin</title><style>{_STYLE}</style></head>"
        f'<body><nav><a href="/">lychgate admin</a></nav><h1>{escape(title)}</h1>\n'
        f"{body}\n</body></html>\n"
    )
    return web.Response(text=doc, content_type="text/html", status=status)


def endpoint_list(endpoints: Iterable[Endpoint]) -> str:
    items = "".join(
        f'<li><a href="{escape(e.href)}">{escape(e.href)}</a>'
        + (f" &mdash; {escape(e.description)}" if e.description else "")
        + "</li>"
        for e in endpoints
    )
    return f"<ul>{items}</ul>"


def table(headers: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """An HTML table of already-escaped cells."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def wants_json(request: web.Request) -> bool:
    """`?format=json`, or an Accept header that asks for JSON rather than HTML."""
    fmt = request.query.get("format")
    if fmt is not None:
        return fmt.lower() == "json"
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/html" not in accept


def flag(request: web.Request, name: str) -> bool:
    """A boolean query flag: present (`?pretty`) or truthy (`?pretty=1`) means on."""
    if name not in request.query:
        return False
    return request.query[name].lower() not in ("0", "false", "no", "off")


def jsonable(value: Any) -> Any:
    """Convert pipeline objects to plain JSON data before redaction and dumping.

    Redaction walks dicts and lists, so models and dataclasses must become dicts
    first; anything we cannot convert becomes its str() rather than a 500.
    """
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((jsonable(v) for v in value), key=repr)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    model_dump = getattr(value, "model_dump", None)  # pydantic models
    if callable(model_dump):
        return jsonable(model_dump(mode="json", by_alias=True))
    return str(value)


def json_body(data: Any, *, pretty: bool = False, status: int = 200) -> web.Response:
    text = json.dumps(data, indent=2 if pretty else None, ensure_ascii=False)
    return web.Response(text=text + "\n", content_type="application/json", status=status)
