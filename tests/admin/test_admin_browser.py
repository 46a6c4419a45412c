"""The admin index in a real headless Chromium: every link opens, the /logging form works.

Needs Debian's chromium and chromium-driver (CI installs them:
`apt-get install -y chromium chromium-driver`). Selenium is pointed at
/usr/bin/chromedriver and /usr/bin/chromium explicitly, so Selenium Manager
never looks for (or downloads) a browser or driver of its own.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from admin_fixtures import FakePipeline, proxy
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from lychgate.admin.server import build_admin_app, serve
from lychgate.log import component_logger

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
        reason="needs Debian's chromium and chromium-driver: "
        "apt-get update && apt-get install -y chromium chromium-driver",
    ),
]


@pytest.fixture
def live_admin() -> Iterator[str]:
    """The admin app on a real loopback port, its event loop in a thread of its own.

    Selenium's calls block, so the server cannot share the test's thread.
    """
    pipeline = FakePipeline(proxies=[proxy("default/gw")], is_ready=True)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    ports: list[int] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        runner = loop.run_until_complete(
            serve(build_admin_app(pipeline.providers()), "127.0.0.1:0")
        )
        ports.append(runner.addresses[0][1])
        started.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=run, name="admin-server", daemon=True)
    thread.start()
    assert started.wait(10), "admin server did not start"
    yield f"http://127.0.0.1:{ports[0]}"
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[webdriver.Chrome]:
    monkeypatch.setenv("SE_OFFLINE", "true")  # belt and braces: Selenium Manager stays offline
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    driver.set_page_load_timeout(90)
    try:
        yield driver
    finally:
        driver.quit()


def response_status(driver: webdriver.Chrome) -> int:
    """HTTP status of the page now shown (Navigation Timing's responseStatus)."""
    status = driver.execute_script(
        "const e = performance.getEntriesByType('navigation'); "
        "return e.length ? e[0].responseStatus : null;"
    )
    assert isinstance(status, int), status
    return status


def loaded(url: str) -> Callable[[webdriver.Chrome], bool]:
    def check(driver: webdriver.Chrome) -> bool:
        return bool(
            driver.current_url == url
            and driver.execute_script("return document.readyState") == "complete"
        )

    return check


def test_index_links_and_logging_form(live_admin: str, browser: webdriver.Chrome) -> None:
    browser.get(live_admin + "/")
    assert "lychgate admin" in browser.title
    assert response_status(browser) == 200
    hrefs = [a.get_attribute("href") or "" for a in browser.find_elements(By.CSS_SELECTOR, "a")]
    assert all(hrefs), hrefs
    assert len(hrefs) >= 8, hrefs

    # Follow every link by clicking it, as a person would.
    for index, href in enumerate(hrefs):
        browser.get(live_admin + "/")
        link = browser.find_elements(By.CSS_SELECTOR, "a")[index]
        assert link.get_attribute("href") == href
        link.click()
        WebDriverWait(browser, 90).until(loaded(href))
        assert response_status(browser) == 200, href
        body = browser.find_element(By.TAG_NAME, "body").text
        assert body.strip(), href
        assert "BEGIN PRIVATE KEY" not in body

    # Change a level with the form.
    before = component_logger("xds").level
    try:
        browser.get(live_admin + "/logging")
        Select(browser.find_element(By.ID, "component")).select_by_value("xds")
        Select(browser.find_element(By.ID, "level")).select_by_value("error")
        browser.find_element(By.ID, "set-level").click()
        # The POST redirects back: an element found on the old page goes stale while the new
        # one loads, which is "not yet", not a failure.
        WebDriverWait(browser, 10, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda d: d.find_element(By.ID, "level-xds").text == "error"
        )
        assert browser.current_url == live_admin + "/logging"  # redirected back, no re-post
        assert component_logger("xds").getEffectiveLevel() == logging.ERROR
        assert browser.find_element(By.ID, "level-store").text != "error"
    finally:
        component_logger("xds").setLevel(before)
