"""Fixtures for the playground's browser tests: the sheetd under test, and headless Chromium.

The sheetd is started and stopped by .ci/check-playground, which passes its address in
SHEETD_URL (so the same tests can also run against a sheetd in a container or behind a load
balancer). Chromium and chromedriver are Debian's; Selenium's own driver manager, which would
try to download a browser, is never used.
"""

import json
import os
import urllib.error
import urllib.request

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver")


class API:
    """sheetd's API as the tests read it, to compare with what the page shows."""

    def __init__(self, base_url, key=None):
        self.base_url = base_url.rstrip("/")
        self.key = key

    def call(self, method, path, body=None, headers=None):
        data = None if body is None else json.dumps(body).encode()
        headers = dict(headers or {})
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        request = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def json(self, method, path, body=None):
        status, _, payload = self.call(method, path, body)
        return status, (json.loads(payload) if payload else None)

    def session(self, session_id):
        status, body = self.json("GET", f"/sessions/{session_id}")
        assert status == 200, body
        return body

    def events(self, session_id):
        status, body = self.json("GET", f"/sessions/{session_id}/events?after=0")
        assert status == 200, body
        return body["events"]


@pytest.fixture(scope="session")
def base_url():
    url = os.environ.get("SHEETD_URL")
    if not url:
        pytest.fail("SHEETD_URL is not set: run these tests through .ci/check-playground, which starts sheetd")
    return url.rstrip("/")


@pytest.fixture(scope="session")
def keyed_server():
    """A second sheetd that requires API keys, and a key of role app (SHEETD_KEYED_URL, SHEETD_KEY)."""
    url, key = os.environ.get("SHEETD_KEYED_URL"), os.environ.get("SHEETD_KEY")
    if os.environ.get("SHEETD_KEYED_SKIP") and not (url and key):
        # Only when testing a server given by address (.ci/check-playground URL) without one.
        pytest.skip(os.environ["SHEETD_KEYED_SKIP"])
    if not url or not key:
        pytest.fail("SHEETD_KEYED_URL and SHEETD_KEY are not set: run these tests through .ci/check-playground")
    return url.rstrip("/"), key


@pytest.fixture(scope="session")
def api(base_url):
    return API(base_url)


class ConsoleWatch:
    """Every browser console entry of a test. A test fails on any error, except the network
    errors it expects: Chromium reports each 4xx answer to fetch() as a console error, and some
    tests provoke exactly such answers on purpose."""

    def __init__(self, driver):
        self.driver = driver
        self.entries = []
        self.expected = []

    def expect_network_error(self, path_fragment, status):
        self.expected.append((path_fragment, status))

    def collect(self):
        self.entries += self.driver.get_log("browser")

    def unexpected_errors(self):
        self.collect()
        unexpected = []
        for entry in self.entries:
            if entry["level"] != "SEVERE":
                continue
            message = entry["message"]
            if entry.get("source") == "network" and any(
                fragment in message and f"status of {status} " in message for fragment, status in self.expected
            ):
                continue
            unexpected.append(message)
        return unexpected


@pytest.fixture
def browser(request):
    """One headless Chromium for the test, quit afterwards whatever happened; the test fails on
    any console error it did not expect."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1200,1000", "--force-device-scale-factor=1"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.console = ConsoleWatch(driver)
    try:
        yield driver
        errors = driver.console.unexpected_errors()
        assert not errors, "browser console errors:\n" + "\n".join(errors)
    finally:
        driver.quit()
