"""/logging: see and change the log level of each control-plane component.

Components are lychgate.log.COMPONENTS, each logging under `lychgate.<name>`.
A level set here goes on that component's logger, so it takes effect with the
next record and also covers its child loggers (`lychgate.xds.server`). Records
still reach the handler on the `lychgate` logger however that logger's own level
is set: Python checks only handler levels while a record propagates.

Scripts:  PUT or POST /logging?xds=debug      one component (several: ?xds=debug&store=info)
          PUT or POST /logging?level=info     every component
Browsers: the form on GET /logging (POST component=<name|all>&level=<level>).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from html import escape

from aiohttp import web

from lychgate.admin.pages import Endpoint, json_body, page, table, wants_json
from lychgate.log import COMPONENTS, LEVELS, component_logger, parse_level

ENDPOINTS = (
    Endpoint(
        "/logging",
        "log level of each control-plane component; change one or all (form, or "
        "PUT /logging?<component>=<level> / ?level=<level>)",
    ),
)

ALL = "all"

# The names shown for numeric levels: the first name of each in lychgate.log.LEVELS
# except "trace", which Python cannot tell apart from debug.
_NAMES: dict[int, str] = {}
for _name, _number in LEVELS.items():
    if _name != "trace":
        _NAMES.setdefault(_number, _name)

log = component_logger("admin")


def level_name(level: int) -> str:
    return _NAMES.get(level, logging.getLevelName(level).lower())


def current_levels() -> dict[str, str]:
    """The effective level of each component (inherited from `lychgate` when not set)."""
    return {c: level_name(component_logger(c).getEffectiveLevel()) for c in COMPONENTS}


class LevelError(ValueError):
    """A request named an unknown component or level; the message says which."""


def plan_changes(params: Mapping[str, str]) -> dict[str, int]:
    """Turn request parameters into {component: level}, or raise LevelError.

    Accepted shapes: {"component": name|"all", "level": L} (the HTML form),
    {"level": L} (every component), {component: L, ...}. Nothing is applied
    unless all of it is valid.
    """
    items = {k: v for k, v in params.items() if k != "format"}
    if not items:
        raise LevelError(
            "nothing to set: use ?<component>=<level> or ?level=<level>; components: "
            f"{', '.join(COMPONENTS)}; levels: {', '.join(LEVELS)}"
        )
    if "component" in items:
        component = items.pop("component").strip()
        if "level" not in items:
            raise LevelError("component given without level")
        items = (
            {"level": items["level"]}
            if component == ALL
            else {component: items.pop("level"), **items}
        )
    changes: dict[str, int] = {}
    for key, value in items.items():
        targets = COMPONENTS if key == "level" else (key,)
        if key != "level" and key not in COMPONENTS:
            raise LevelError(f"unknown component {key!r}; components: {', '.join(COMPONENTS)}")
        try:
            number = parse_level(value)
        except ValueError as exc:
            raise LevelError(str(exc)) from None
        for target in targets:
            changes[target] = number
    return changes


def apply(changes: Mapping[str, int]) -> None:
    for component, level in changes.items():
        component_logger(component).setLevel(level)
    if set(changes) == set(COMPONENTS) and len(set(changes.values())) == 1:
        # "all": loggers outside the named components (lychgate.cli, ...) follow too.
        logging.getLogger("lychgate").setLevel(next(iter(changes.values())))


async def show(request: web.Request) -> web.Response:
    """Current levels: an HTML table and form, or JSON."""
    levels = current_levels()
    if wants_json(request):
        return json_body({"components": levels, "levels": list(LEVELS)}, pretty=True)
    rows = [
        [
            f"<code>{escape(c)}</code>",
            f"<code>lychgate.{escape(c)}</code>",
            f'<span id="level-{escape(c)}">{escape(lvl)}</span>',
        ]
        for c, lvl in levels.items()
    ]
    component_options = "".join(
        f'<option value="{escape(c)}">{escape(c)}</option>' for c in (ALL, *COMPONENTS)
    )
    level_options = "".join(
        f'<option value="{escape(n)}"{" selected" if n == "debug" else ""}>{escape(n)}</option>'
        for n in LEVELS
    )
    body = (
        table(["component", "logger", "level"], rows)
        + '<h2>Change a level</h2><form method="post" action="/logging">'
        f'<label>component <select name="component" id="component">{component_options}</select></label> '
        f'<label>level <select name="level" id="level">{level_options}</select></label> '
        '<button type="submit" id="set-level">set</button></form>'
        '<p class="note">Takes effect at once and lasts until the process restarts. '
        "From a script: <code>curl -X PUT 'http://127.0.0.1:9095/logging?xds=debug'</code> "
        "or <code>?level=info</code> for every component; GET with "
        "<code>?format=json</code> for JSON. &quot;trace&quot; is the same as debug.</p>"
    )
    return page("/logging", body)


async def change(request: web.Request) -> web.StreamResponse:
    """Set levels from the query string and/or a form body."""
    params: dict[str, str] = dict(request.query)
    if request.can_read_body:
        form = await request.post()
        params.update({k: v for k, v in form.items() if isinstance(v, str)})
    try:
        changes = plan_changes(params)
    except LevelError as exc:
        if wants_json(request) or "text/html" not in request.headers.get("Accept", ""):
            return json_body({"error": str(exc)}, status=400)
        return page(
            "Bad request",
            f'<p>{escape(str(exc))}</p><p><a href="/logging">back</a></p>',
            status=400,
        )
    apply(changes)
    log.info(
        "log levels set by %s: %s",
        request.remote,
        ", ".join(f"{c}={level_name(n)}" for c, n in changes.items()),
    )
    if "text/html" in request.headers.get("Accept", "") and not wants_json(request):
        # A browser posted the form: redirect so reload does not post again.
        raise web.HTTPSeeOther("/logging")
    return json_body({"components": current_levels()})


def routes() -> list[web.RouteDef]:
    return [
        web.get("/logging", show),
        web.put("/logging", change),
        web.post("/logging", change),
    ]
