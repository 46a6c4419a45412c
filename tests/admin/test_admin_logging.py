"""/logging: levels per component, changed at run time, with clear errors."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from lychgate.log import COMPONENTS, component_logger

Client = TestClient[web.Request, web.Application]


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self) -> list[str]:
        return [r.getMessage() for r in self.records]


@pytest.fixture
def captured() -> Iterator[Capture]:
    handler = Capture()
    root = logging.getLogger("lychgate")
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)


async def test_shows_each_component_html_and_json(admin: Client) -> None:
    html = await (await admin.get("/logging")).text()
    for component in COMPONENTS:
        assert f'id="level-{component}"' in html
        assert f"lychgate.{component}" in html
    assert '<form method="post" action="/logging">' in html

    for resp in (
        await admin.get("/logging?format=json"),
        await admin.get("/logging", headers={"Accept": "application/json"}),
    ):
        data = await resp.json()
        assert list(data["components"]) == list(COMPONENTS)
        assert "debug" in data["levels"]


async def test_put_sets_one_component_and_takes_effect(admin: Client, captured: Capture) -> None:
    log = component_logger("xds")
    store_before = component_logger("store").level
    resp = await admin.put("/logging?xds=warn")
    assert resp.status == 200
    assert (await resp.json())["components"]["xds"] == "warn"
    log.info("info while at warn")
    assert "info while at warn" not in captured.messages()

    resp = await admin.post("/logging?xds=debug")
    assert (await resp.json())["components"]["xds"] == "debug"
    log.debug("debug while at debug")
    # Child loggers of the component follow it.
    logging.getLogger("lychgate.xds.server").debug("child debug")
    assert "debug while at debug" in captured.messages()
    assert "child debug" in captured.messages()
    # Other components keep their level.
    assert component_logger("store").level == store_before
    shown = await (await admin.get("/logging?format=json")).json()
    assert shown["components"]["xds"] == "debug"


async def test_level_parameter_sets_every_component(admin: Client, captured: Capture) -> None:
    resp = await admin.put("/logging?level=ERROR")
    levels = (await resp.json())["components"]
    assert set(levels.values()) == {"error"}
    for component in COMPONENTS:
        component_logger(component).warning("warn-%s", component)
    logging.getLogger("lychgate.cli").warning("outside the components")
    assert captured.messages() == []

    await admin.put("/logging?level=off")
    component_logger("admin").critical("critical while off")
    assert captured.messages() == []


async def test_several_components_at_once(admin: Client) -> None:
    resp = await admin.put("/logging?xds=debug&store=error")
    levels = (await resp.json())["components"]
    assert levels["xds"] == "debug" and levels["store"] == "error"


async def test_form_post_from_browser_redirects_back(admin: Client) -> None:
    resp = await admin.post(
        "/logging",
        data={"component": "translate", "level": "debug"},
        headers={"Accept": "text/html,application/xhtml+xml"},
        allow_redirects=False,
    )
    assert resp.status == 303
    assert resp.headers["Location"] == "/logging"
    assert component_logger("translate").getEffectiveLevel() == logging.DEBUG

    resp = await admin.post(
        "/logging",
        data={"component": "all", "level": "warn"},
        headers={"Accept": "text/html"},
    )
    assert resp.status == 200  # followed the redirect to the page
    assert all(component_logger(c).getEffectiveLevel() == logging.WARNING for c in COMPONENTS)


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("xdss=debug", "unknown component 'xdss'"),
        ("xds=loud", "unknown log level 'loud'"),
        ("level=verbose", "unknown log level 'verbose'"),
        ("", "nothing to set"),
    ],
)
async def test_bad_requests_are_400_and_change_nothing(
    admin: Client, query: str, fragment: str
) -> None:
    before = {c: component_logger(c).level for c in COMPONENTS}
    resp = await admin.put(f"/logging?{query}&store=debug" if query else "/logging")
    assert resp.status == 400
    error = (await resp.json())["error"]
    assert fragment in error
    assert {c: component_logger(c).level for c in COMPONENTS} == before


async def test_bad_form_post_is_an_html_400(admin: Client) -> None:
    resp = await admin.post(
        "/logging", data={"component": "nope", "level": "debug"}, headers={"Accept": "text/html"}
    )
    assert resp.status == 400
    assert resp.content_type == "text/html"
    assert "unknown component &#x27;nope&#x27;" in await resp.text()
